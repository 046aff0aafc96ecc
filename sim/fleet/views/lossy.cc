// lossy: the router never receives a fraction event_loss of the replicas' event batches (a seeded
// stream of its own), as when its subscriber falls behind and the publisher's buffer drops them.
// vLLM publishes one EventBatch per engine step, so a loss takes every event of that step, all
// groups together: a replica's events at one simulated instant are one batch here. A lost store
// hides a cached block from the router; a lost remove leaves it believing in a block long
// evicted; nothing corrects either (the router never re-reads the cache).
#include <random>
#include <vector>

#include "sim/fleet/cache_view.h"

namespace prefixsim {
namespace fleet {
namespace {

class LossyView final : public IndexedView {
 public:
  explicit LossyView(const CacheViewConfig& config)
      : IndexedView(config, /*primary_only=*/false),
        loss_(config.view.event_loss),
        rng_(config.seed ^ 0x6c6f7373ULL),
        batches_(config.num_replicas) {}
  std::string_view name() const override { return "lossy"; }
  void OnStored(int replica, uint64_t key, uint32_t tag, int /*group*/, int64_t now_ns) override {
    if (!Lost(replica, now_ns)) index_.Store(replica, key, tag);
  }
  void OnRemoved(int replica, uint64_t key, int /*group*/, int64_t now_ns) override {
    // The remove of a store that was lost finds nothing to remove: Remove says so and changes
    // nothing.
    if (!Lost(replica, now_ns)) index_.Remove(replica, key);
  }

 private:
  struct Batch {
    int64_t time_ns = -1;
    bool lost = false;
  };
  // Whether the batch of `replica`'s events at `now_ns` is lost: drawn at its first event.
  bool Lost(int replica, int64_t now_ns) {
    Batch& b = batches_[replica];
    if (b.time_ns != now_ns) {
      b.time_ns = now_ns;
      b.lost = std::uniform_real_distribution<double>(0, 1)(rng_) < loss_;
    }
    return b.lost;
  }

  double loss_;
  std::mt19937_64 rng_;
  std::vector<Batch> batches_;  // per replica, the batch in progress
};

}  // namespace

std::unique_ptr<CacheView> MakeLossyView(const CacheViewConfig& config) {
  return std::make_unique<LossyView>(config);
}

}  // namespace fleet
}  // namespace prefixsim
