// exact: every event applied at once, read with the replicas' own lookup rule. What an idealised
// KV-aware router sees, and what routing regret is measured against.
#include "sim/fleet/cache_view.h"

namespace prefixsim {
namespace fleet {
namespace {

class ExactView final : public IndexedView {
 public:
  explicit ExactView(const CacheViewConfig& config) : IndexedView(config, /*primary_only=*/false) {}
  std::string_view name() const override { return "exact"; }
  void OnStored(int replica, uint64_t key, uint32_t tag, int /*group*/,
                int64_t /*now_ns*/) override {
    index_.Store(replica, key, tag);
  }
  void OnRemoved(int replica, uint64_t key, int /*group*/, int64_t /*now_ns*/) override {
    PREFIXSIM_CHECK(index_.Remove(replica, key));  // every remove follows its store
  }
};

}  // namespace

std::unique_ptr<CacheView> MakeExactView(const CacheViewConfig& config) {
  return std::make_unique<ExactView>(config);
}

}  // namespace fleet
}  // namespace prefixsim
