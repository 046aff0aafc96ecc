// kv_aware and kv_aware_unaligned: what NVIDIA Dynamo's KV router and llm-d's precise
// prefix-cache scorer do. The router keeps, per replica, a mirror of the block hashes that
// replica's cache holds, fed only by the replica's own store/remove events (kv::IndexMirror),
// and sends a request to the replica with the lowest
//     cost = overlap_weight x (prompt tokens it would have to compute) + outstanding tokens,
// ties to the lower load, then the lower index.
//  * kv_aware counts the overlap the replica would really serve: its own lookup rule (the
//    hybrid fixed point over all groups, the alignment to A, the L-1 cap; docs/semantics.md §9) run
//    on the mirror. With RouterConfig::verify_index every overlap is checked against the replica's
//    own cache.
//  * kv_aware_unaligned counts what a hybrid-unaware router sees in the events: the run of the
//    primary group's blocks cached from the start, with no alignment to A, no other group and no
//    cap. Under a policy with a large A (old: 13,824 tokens) it over-promises, which is what the
//    LCM costs routing.
#include <memory>
#include <vector>

#include "prefixsim/status.h"
#include "sim/fleet/router.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/index_mirror.h"
#include "sim/kv/routing.h"

namespace prefixsim {
namespace fleet {
namespace {

class KvAwareRouter final : public Router {
 public:
  KvAwareRouter(const RouterConfig& config, bool aligned) : config_(config), aligned_(aligned) {}

  std::string_view name() const override { return aligned_ ? "kv_aware" : "kv_aware_unaligned"; }
  bool uses_overlap_weight() const override { return true; }

  void Attach(FleetView& fleet) override {
    PREFIXSIM_CHECK(config_.plan != nullptr);
    mirrors_.clear();
    for (int r = 0; r < fleet.num_replicas(); ++r) {
      mirrors_.push_back(std::make_unique<kv::IndexMirror>(config_.plan->num_blocks));
      kv::AttachIndexMirror(fleet.kv(r), mirrors_.back().get());
    }
  }

  int Route(const Request& request, const FleetView& fleet) override {
    PREFIXSIM_CHECK(static_cast<int>(mirrors_.size()) == fleet.num_replicas());
    // Every replica runs the same plan, so one hash chain serves them all.
    kv::HashPrompt(fleet.kv(0), request, &hashes_);
    int best = 0;
    double best_cost = 0;
    int64_t best_load = 0;
    for (int r = 0; r < fleet.num_replicas(); ++r) {
      KvCacheManager& cache = fleet.kv(r);
      const int64_t overlap = Overlap(cache, request, mirrors_[r].get());
      if (config_.verify_index) {
        PREFIXSIM_CHECK(overlap == Overlap(cache, request, nullptr));
        ++checks_;
      }
      const int64_t load = fleet.OutstandingTokens(r);
      const double cost =
          config_.overlap_weight * static_cast<double>(request.prompt_tokens - overlap) +
          static_cast<double>(load);
      if (r == 0 || cost < best_cost || (cost == best_cost && load < best_load)) {
        best = r;
        best_cost = cost;
        best_load = load;
      }
    }
    return best;
  }

  int64_t index_checks() const override { return checks_; }

 private:
  // mirror == nullptr: the replica's own cache (verification only).
  int64_t Overlap(KvCacheManager& cache, const Request& request, const kv::IndexMirror* mirror) {
    return aligned_ ? kv::PeekPromptHit(cache, request, hashes_, mirror)
                    : kv::PeekPrimaryOverlap(cache, request, hashes_, mirror);
  }

  RouterConfig config_;
  bool aligned_;
  std::vector<std::unique_ptr<kv::IndexMirror>> mirrors_;
  std::vector<kv::HashPair> hashes_;
  int64_t checks_ = 0;
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
