// kv_aware and kv_aware_unaligned: what NVIDIA Dynamo's KV router and llm-d's precise
// prefix-cache scorer do. The router sends a request to the replica with the lowest
//     cost = overlap_weight x (prompt tokens it would have to compute) + outstanding tokens,
// ties to the lower load, then the lower index, where the overlap is what its cache view
// (cache_view.h) believes the replica holds.
//  * kv_aware reads the `exact` view by default: every replica's own lookup rule (the hybrid
//    fixed point over all groups, the alignment to A, the L-1 cap; docs/semantics.md §9) on an
//    index kept by the replicas' events. Other views (RouterViewConfig::kind) model routers that
//    see the cache late, partly or not at all.
//  * kv_aware_unaligned is kv_aware on the `attention_only` view: what a hybrid-unaware router
//    sees in the events, the run of the primary group's blocks cached from the start, with no
//    alignment to A, no other group and no cap. Under a policy with a large A (old: 13,824
//    tokens) it over-promises, which is what the LCM costs routing.
#include <memory>

#include "sim/fleet/router.h"

namespace prefixsim {
namespace fleet {
namespace {

class KvAwareRouter final : public Router {
 public:
  KvAwareRouter(const RouterConfig& config, bool aligned) : config_(config), aligned_(aligned) {}

  std::string_view name() const override { return aligned_ ? "kv_aware" : "kv_aware_unaligned"; }
  bool uses_overlap_weight() const override { return true; }
  std::string_view default_view() const override { return aligned_ ? "exact" : "attention_only"; }

  int Route(const Request& request, const FleetView& fleet) override {
    int best = 0;
    double best_cost = 0;
    int64_t best_load = 0;
    for (int r = 0; r < fleet.num_replicas(); ++r) {
      const int64_t load = fleet.OutstandingTokens(r);
      const double cost =
          config_.overlap_weight * static_cast<double>(request.prompt_tokens - fleet.Overlap(r)) +
          static_cast<double>(load);
      if (r == 0 || cost < best_cost || (cost == best_cost && load < best_load)) {
        best = r;
        best_cost = cost;
        best_load = load;
      }
    }
    return best;
  }

 private:
  RouterConfig config_;
  bool aligned_;
};

}  // namespace

std::unique_ptr<Router> MakeKvAwareRouter(const RouterConfig& config) {
  return std::make_unique<KvAwareRouter>(config, /*aligned=*/true);
}
std::unique_ptr<Router> MakeKvAwareUnalignedRouter(const RouterConfig& config) {
  return std::make_unique<KvAwareRouter>(config, /*aligned=*/false);
}

}  // namespace fleet
}  // namespace prefixsim
