// delayed: every event reaches the router event_delay_ms after the replica's cache changed (the
// publisher's batching, the network, the router's queue), so it routes on a cache as it was:
// to a replica that has since evicted the prefix, or away from one that has just computed it.
#include <deque>

#include "sim/fleet/cache_view.h"

namespace prefixsim {
namespace fleet {
namespace {

class DelayedView final : public IndexedView {
 public:
  explicit DelayedView(const CacheViewConfig& config)
      : IndexedView(config, /*primary_only=*/false),
        delay_ns_(static_cast<int64_t>(config.view.event_delay_ms * 1e6)),
        pending_(config.num_replicas) {}
  std::string_view name() const override { return "delayed"; }
  void OnStored(int replica, uint64_t key, uint32_t tag, int /*group*/, int64_t now_ns) override {
    pending_[replica].push_back({now_ns + delay_ns_, key, tag, true});
  }
  void OnRemoved(int replica, uint64_t key, int /*group*/, int64_t now_ns) override {
    pending_[replica].push_back({now_ns + delay_ns_, key, 0, false});
  }

 private:
  struct Event {
    int64_t due_ns;
    uint64_t key;
    uint32_t tag;
    bool stored;
  };
  // One queue per replica: a replica's events come in time order, but replicas run ahead of
  // each other to the next arrival, so the fleet's events do not.
  void CatchUp(int64_t now_ns) override {
    for (size_t r = 0; r < pending_.size(); ++r) {
      std::deque<Event>& q = pending_[r];
      while (!q.empty() && q.front().due_ns <= now_ns) {
        const Event& e = q.front();
        if (e.stored) {
          index_.Store(static_cast<int>(r), e.key, e.tag);
        } else {
          PREFIXSIM_CHECK(index_.Remove(static_cast<int>(r), e.key));
        }
        q.pop_front();
      }
    }
  }

  int64_t delay_ns_;
  std::vector<std::deque<Event>> pending_;
};

}  // namespace

std::unique_ptr<CacheView> MakeDelayedView(const CacheViewConfig& config) {
  return std::make_unique<DelayedView>(config);
}

}  // namespace fleet
}  // namespace prefixsim
