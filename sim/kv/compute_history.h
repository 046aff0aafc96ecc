// Which replicas of a fleet have ever computed each prefix, at the finest prefix-cacheable block
// U: the unbounded oracle behind the miss causes "evicted", "elsewhere" and "compulsory"
// (docs/design.md §7). Keyed by a U-block's chained hash (the fine H-chunk hash at its end,
// docs/semantics.md §8.1), so a block's presence implies its whole prefix was computed by that
// replica. Nothing is ever removed: memory grows with the distinct U-blocks a replay computes
// (16 bytes each, per 64 replicas). A single engine needs none: its shadow index keeps what it
// computed (ShadowIndex::KeepComputed).
// Threading: a fleet may step its replicas on several threads between two arrivals. Record only
// stages the block in the replica's own list, so replicas may record concurrently, each on one
// thread; Commit (REQUIRES: no Record running) makes the staged records visible, and the
// lookups see only committed ones. Marks are a set, so the order of commits changes nothing.
#ifndef PREFIXSIM_SIM_KV_COMPUTE_HISTORY_H_
#define PREFIXSIM_SIM_KV_COMPUTE_HISTORY_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace prefixsim {
namespace kv {

class ComputeHistory {
 public:
  // REQUIRES: num_replicas >= 1.
  explicit ComputeHistory(int num_replicas);

  int num_replicas() const { return num_replicas_; }
  // `replica` has computed the U-block named by `hash` (seen after the next Commit).
  void Record(uint64_t hash, int replica) {
    staged_[static_cast<size_t>(replica)].hashes.push_back(hash);
  }
  void Commit();
  bool ComputedBy(uint64_t hash, int replica) const;
  bool ComputedByAny(uint64_t hash) const { return Find(hash, 0).by_any; }
  // Both at once, with one probe when `replica` computed it or there are at most 64 replicas.
  struct Seen {
    bool by_any = false;
    bool by_replica = false;
  };
  Seen Find(uint64_t hash, int replica) const;
  // Calls f(replica) for each replica that computed the block, in replica order.
  template <typename F>
  void ForEachReplica(uint64_t hash, F&& f) const {
    for (size_t w = 0; w < words_.size(); ++w) {
      auto it = words_[w].find(hash);
      if (it == words_[w].end()) continue;
      for (uint64_t bits = it->second; bits != 0; bits &= bits - 1) {
        f(static_cast<int>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
      }
    }
  }
  int64_t size() const;  // distinct (block, 64-replica word) entries

 private:
  int num_replicas_;
  // words_[w]: hash -> bit r - 64w set when replica r in [64w, 64w + 64) computed it.
  std::vector<absl::flat_hash_map<uint64_t, uint64_t>> words_;
  // Per replica, since the last Commit; each on its own cache line, as replicas on different
  // threads append at once.
  struct alignas(64) Staged {
    std::vector<uint64_t> hashes;
  };
  std::vector<Staged> staged_;
};

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_COMPUTE_HISTORY_H_
