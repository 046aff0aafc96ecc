// approximate: no cache events at all. The router remembers where it sent each prompt (its
// blocks at the plan's hash block H) and believes a replica holds the prefix it was sent, as
// SGLang's cache-aware router does with its own radix tree (sgl-project/sglang #16734, #32195).
// Its memory is bounded: it forgets the least recently routed blocks beyond max_blocks, and
// blocks not routed for ttl_s. It knows nothing of the engine: no eviction, no groups, no
// alignment, so it over-promises where the replica evicted and under-promises nothing.
// Simplification: a block is forgotten for every replica at once (SGLang evicts per tenant).
#include <algorithm>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "sim/fleet/cache_view.h"
#include "sim/kv/block_pool.h"

namespace prefixsim {
namespace fleet {
namespace {

class ApproximateView final : public CacheView {
 public:
  explicit ApproximateView(const CacheViewConfig& config)
      : index_(config.num_replicas),
        max_blocks_(config.view.max_blocks > 0
                        ? config.view.max_blocks
                        : int64_t{config.num_replicas} * config.plan->num_blocks),
        ttl_ns_(static_cast<int64_t>(config.view.ttl_s * 1e9)),
        hash_block_(config.plan->hash_block_size) {}
  std::string_view name() const override { return "approximate"; }
  bool reads_events() const override { return false; }

  void Overlaps(KvCacheManager& /*any_replica*/, const Request& request,
                const std::vector<kv::HashPair>& hashes, int64_t now_ns,
                std::vector<int64_t>* overlaps) override {
    Forget(now_ns);
    const int n = index_.num_replicas();
    overlaps->assign(n, 0);
    std::vector<uint64_t> alive(index_.words(), ~uint64_t{0});
    for (size_t j = 0; j < hashes.size(); ++j) {
      const uint64_t* holders = index_.Holders(0, hashes[j]);
      bool any = false;
      for (int w = 0; w < index_.words(); ++w) {
        alive[w] &= holders != nullptr ? holders[w] : 0;
        any |= alive[w] != 0;
      }
      if (!any) break;
      const int64_t run = std::min<int64_t>((j + 1) * hash_block_, request.prompt_tokens);
      for (int w = 0; w < index_.words(); ++w) {
        for (uint64_t bits = alive[w]; bits != 0; bits &= bits - 1) {
          const int r = w * 64 + __builtin_ctzll(bits);
          if (r < n) (*overlaps)[r] = run;
        }
      }
    }
  }

  void Routed(const Request& /*request*/, const std::vector<kv::HashPair>& hashes, int replica,
              int64_t now_ns) override {
    for (const kv::HashPair& h : hashes) {
      const uint64_t key = h.hash ^ kv::GroupSalt(0);
      if (!index_.Holds(replica, key)) index_.Store(replica, key, kv::GroupTag(0, h));
      const int64_t stamp = ++clock_;
      last_use_[key] = stamp;
      lru_.push_back({key, stamp, now_ns});
    }
    Forget(now_ns);
    // Entries re-routed later stay behind in the queue; drop them once they are most of it.
    if (lru_.size() > 2 * last_use_.size() + 1024) {
      std::erase_if(lru_, [&](const Use& u) { return last_use_.at(u.key) != u.stamp; });
    }
  }

 private:
  struct Use {
    uint64_t key;
    int64_t stamp;
    int64_t time_ns;
  };
  // Forgets the least recently routed blocks beyond max_blocks, and those older than the TTL.
  void Forget(int64_t now_ns) {
    while (!lru_.empty()) {
      const Use& u = lru_.front();
      auto it = last_use_.find(u.key);
      if (it == last_use_.end() || it->second != u.stamp) {
        lru_.pop_front();  // routed again since: a later entry stands for it
        continue;
      }
      const bool expired = ttl_ns_ > 0 && u.time_ns < now_ns - ttl_ns_;
      if (!expired && static_cast<int64_t>(last_use_.size()) <= max_blocks_) break;
      index_.Erase(u.key);
      last_use_.erase(it);
      lru_.pop_front();
    }
  }

  kv::FleetIndex index_;  // group 0's salt: the router has no notion of groups
  int64_t max_blocks_;
  int64_t ttl_ns_;
  int64_t hash_block_;
  int64_t clock_ = 0;
  absl::flat_hash_map<uint64_t, int64_t> last_use_;  // key -> stamp of its last routing
  std::deque<Use> lru_;                              // oldest routing first
};

}  // namespace

std::unique_ptr<CacheView> MakeApproximateView(const CacheViewConfig& config) {
  return std::make_unique<ApproximateView>(config);
}

}  // namespace fleet
}  // namespace prefixsim
