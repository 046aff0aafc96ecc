// Per-group KV managers (docs/semantics.md §9.2, §10): one object per KV cache group, behind one
// small interface. The coordinator (coordinator.h) combines them. Block tables hold block ids, with
// kNullBlock for positions a group does not keep (out of window, before a chunk, old states).
#ifndef PREFIXSIM_SIM_KV_SINGLE_TYPE_MANAGER_H_
#define PREFIXSIM_SIM_KV_SINGLE_TYPE_MANAGER_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "prefixsim/kv_plan.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/block_pool.h"
#include "sim/kv/fleet_index.h"

namespace prefixsim {
namespace kv {

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t RoundDown(int64_t a, int64_t b) { return a / b * b; }

// One request's blocks in one group.
struct GroupBlocks {
  std::vector<BlockId> blocks;
  int64_t num_cached = 0;  // blocks [0, num_cached) were already considered for caching
  // Mamba: the last num_speculative blocks are the request's speculative state blocks, past its
  // running state (docs/semantics.md §10.1); blocks [0, num_released) hold no block any more.
  int32_t num_speculative = 0;
  int32_t num_released = 0;
  // Empties the table (its blocks freed or moved elsewhere).
  void Clear() {
    blocks.clear();
    num_cached = 0;
    num_speculative = 0;
    num_released = 0;
  }
};

struct ManagerParams {
  int64_t hash_block_size = 0;  // H
  int64_t hit_alignment = 0;    // A (the caching mask uses it)
  // Extra tokens a sliding window keeps for multi-module MTP (docs/semantics.md §2.2, §10.3).
  int64_t extra_retained_tokens = 0;
  // Fine-grained (partial) hits (docs/semantics.md §7, §8.2, §9.2): A = H < B for some groups.
  bool partial_hits = false;
  // prefix_cache_retention_interval (docs/semantics.md §10.2): nullopt = dense.
  std::optional<int64_t> retention_interval;
  // Mamba's replay boundary lies this many tokens before the prompt's end instead of one (vLLM's
  // _sparse_replay_boundary_shift: S in a hybrid plan with EAGLE groups), 0 otherwise.
  int64_t replay_boundary_shift = 0;
};

// What a retention mask needs of the request being cached (vLLM's reachable boundaries in
// cache_blocks): its prompt length and the shared-prefix junction of its last lookup (0: none).
struct CacheRequest {
  int64_t prompt_tokens = 0;
  int64_t shared_prefix_boundary = 0;
};

class SingleTypeManager {
 public:
  SingleTypeManager(const KvGroup& spec, int group_id, BlockPool* pool, const ManagerParams& p);
  virtual ~SingleTypeManager() = default;

  const KvGroup& spec() const { return spec_; }
  int group_id() const { return group_id_; }
  int64_t block_size() const { return block_size_; }
  bool is_full_attention() const {
    return spec_.kind == LayerKind::kFullAttention || spec_.kind == LayerKind::kMla;
  }
  bool is_mamba() const { return spec_.kind == LayerKind::kMamba; }
  // Whether B is a multiple of H (the group's blocks can be keyed by the request's hashes).
  bool hashable() const { return ratio_ > 0; }

  // The chained hash of this group's block j: the last H-chunk hash inside it (docs/semantics.md
  // §8.1).
  const HashPair& BlockHash(const HashPair* fine, int64_t j) const {
    return fine[(j + 1) * ratio_ - 1];
  }

  // Longest hit of at most max_len tokens for the batch `gids` (groups with this manager's spec;
  // a block is a hit only if every group of the batch has it cached). Fills out[k] with the
  // block table prefix of gids[k] (kNullBlock where nothing is needed) and returns the hit in
  // tokens. `fine` holds num_fine H-chunk hashes. Allocation-free once `out` has capacity.
  // Reads the cache through `index` only (the pool's, or the fleet's index read for one replica).
  virtual int64_t FindLongestHit(const HitIndex& index, const HashPair* fine, int64_t num_fine,
                                 int64_t max_len, int64_t alignment, bool drop_eagle,
                                 absl::Span<const int> gids, std::vector<BlockId>* out) const = 0;

  // Tokens before `num_computed` this group no longer needs (docs/semantics.md §10.3).
  virtual int64_t NumSkippedTokens(int64_t /*num_computed*/) const { return 0; }
  // The most tokens' worth of blocks admission counts for one request in this group (vLLM's
  // max_admission_blocks_per_request, times B; docs/semantics.md §2.3): no cap but for sliding
  // window and chunked local attention.
  virtual int64_t MaxAdmissionTokens(int64_t /*max_in_flight_tokens*/,
                                     int64_t /*max_model_len*/) const {
    return INT64_MAX / 4;
  }
  // A scheduler step starts (vLLM's new_step_starts).
  virtual void NewStep() const {}
  // Blocks at the front of the table it no longer needs then (RemoveSkippedBlocks frees them).
  virtual int64_t NumSkippedBlocks(int64_t num_computed) const {
    return NumSkippedTokens(num_computed) / block_size_;
  }

  // The methods below work on a run: the groups with this manager's spec whose ids follow one
  // another from group_id(); run[k] is the block table of group group_id() + k (a run of one
  // is a single group). The pool operations go group by group in id order, as one call per
  // group would make them (vLLM's managers run one after another); what depends only on the
  // token counts is worked out once per run.

  // Replaces the blocks no longer needed (NumSkippedBlocks) by the null block and frees them,
  // last first.
  virtual void RemoveSkippedBlocks(absl::Span<GroupBlocks> run, int64_t num_computed) const;
  // Blocks these groups must take from the free queue (docs/semantics.md §10.1): new blocks plus
  // hit blocks that are currently free (touching them removes them from the queue). `hits` is null
  // or the run's hit lists (hits[k] for run[k]).
  virtual int64_t NumBlocksToAllocate(absl::Span<const GroupBlocks> run,
                                      const std::vector<BlockId>* hits, int64_t need, int64_t main,
                                      int64_t total) const;
  // Appends new blocks so each group covers `need` tokens. Returns how many were allocated.
  virtual int64_t AllocateNew(absl::Span<GroupBlocks> run, int64_t need, int64_t main,
                              int64_t total) const;
  // Publishes full blocks [num_cached, limit / B) (null and masked-out blocks skipped).
  // `step_end` is where this step's computation ends (mamba caches the state there).
  // Returns how many blocks were published. step_end < 0: unknown.
  virtual int64_t CacheBlocks(absl::Span<GroupBlocks> run, const HashPair* fine, int64_t limit,
                              int64_t step_end, const CacheRequest& request) const;
  // Hints the pool about the blocks CacheBlocks(run, fine, limit, step_end) will publish (a
  // prefetch only: an inexact guess costs nothing but the loads).
  virtual void PrefetchPublishes(absl::Span<const GroupBlocks> run, const HashPair* fine,
                                 int64_t limit, int64_t step_end) const;

  // Whether the last block of a hit of `hit_tokens` must be copied rather than shared, because
  // the request will write into it (partial hits only: copy-on-write, docs/semantics.md §8.2).
  virtual bool NeedsCopyOnWrite(const std::vector<BlockId>& hit, int64_t hit_tokens) const;

 protected:
  // Whether block i is published at all under retention interval `retention` (nullopt: dense;
  // the retention masks of docs/semantics.md §10.2; vLLM's reachable_block_mask): every block but
  // for sliding-window and mamba groups.
  virtual bool Reachable(int64_t /*i*/, const CacheRequest& /*request*/,
                         const std::optional<int64_t>& /*retention*/) const {
    return true;
  }
  // The positions a sparse retention keeps checkpoints at, floored to A: the prompt's replay
  // boundary (its end less one token, or less replay_boundary_shift) and the shared-prefix
  // junction. Boundaries at 0 are left out.
  int NumRetainedBoundaries(const CacheRequest& request, int64_t shift, int64_t out[2]) const;
  // Looks up block j in every group of the batch; on success writes out[k][j].
  bool LookupAll(const HitIndex& index, const HashPair* fine, int64_t j, absl::Span<const int> gids,
                 std::vector<BlockId>* out) const {
    const HashPair& h = BlockHash(fine, j);
    for (size_t k = 0; k < gids.size(); ++k) {
      const BlockId b = index.Lookup(gids[k], h);
      if (b == kNoBlock) return false;
      out[k][j] = b;
    }
    return true;
  }

  KvGroup spec_;
  int group_id_;
  BlockPool* pool_;
  ManagerParams params_;
  int64_t block_size_;
  int64_t ratio_;  // B / H; 0 if H does not divide B
};

// Full attention and MLA: left to right (docs/semantics.md §9.2).
class FullAttentionManager : public SingleTypeManager {
 public:
  using SingleTypeManager::SingleTypeManager;
  int64_t FindLongestHit(const HitIndex& index, const HashPair* fine, int64_t num_fine,
                         int64_t max_len, int64_t alignment, bool drop_eagle,
                         absl::Span<const int> gids, std::vector<BlockId>* out) const override;
  // FindLongestHit on the fleet's index for every replica of `replicas` (a bitset of
  // index.words() words) at once: hits[r] is what FindLongestHit(index.hit_index(r), ...) returns,
  // for each r in `replicas` (the others are not written). One walk over the prompt's blocks, in
  // which the replicas still holding the run drop out block by block, instead of one walk per
  // replica. REQUIRES: whole blocks only (no partial hits).
  void FindLongestHits(const FleetIndex& index, const HashPair* fine, int64_t num_fine,
                       int64_t max_len, int64_t alignment, bool drop_eagle,
                       absl::Span<const int> gids, const uint64_t* replicas, int64_t* hits) const;
  // With partial hits, also registers the tail block under the hash of its last H boundary.
  int64_t CacheBlocks(absl::Span<GroupBlocks> run, const HashPair* fine, int64_t limit,
                      int64_t step_end, const CacheRequest& request) const override;
  // EAGLE/MTP: the last matched unit is recomputed (docs/semantics.md §9.4); then the hit is
  // floored to the alignment.
  static int64_t TrimmedHit(int64_t hit, int64_t block_size, int64_t alignment, bool drop_eagle) {
    if (drop_eagle && hit > 0) hit -= std::min(alignment, block_size);
    return hit - hit % alignment;
  }

 private:
  int64_t CachePartial(GroupBlocks* g, int group, const HashPair* fine, int64_t limit) const;
};

// Sliding window: right to left, cdiv(W-1, B) contiguous blocks (docs/semantics.md §9.2, §10.2,
// §10.3).
class SlidingWindowManager : public SingleTypeManager {
 public:
  SlidingWindowManager(const KvGroup& spec, int group_id, BlockPool* pool, const ManagerParams& p);
  int64_t FindLongestHit(const HitIndex& index, const HashPair* fine, int64_t num_fine,
                         int64_t max_len, int64_t alignment, bool drop_eagle,
                         absl::Span<const int> gids, std::vector<BlockId>* out) const override;
  int64_t NumSkippedTokens(int64_t num_computed) const override;
  int64_t MaxAdmissionTokens(int64_t max_in_flight_tokens, int64_t max_model_len) const override;
  // Contiguous cached blocks a hit needs: cdiv(W - 1, B), +1 for the EAGLE drop.
  int64_t NeedBlocks(bool drop_eagle) const;

 protected:
  bool Reachable(int64_t i, const CacheRequest& request,
                 const std::optional<int64_t>& retention) const override;
};

// Chunked local attention (docs/semantics.md §9.2, §10.3).
class ChunkedLocalManager : public SingleTypeManager {
 public:
  using SingleTypeManager::SingleTypeManager;
  int64_t FindLongestHit(const HitIndex& index, const HashPair* fine, int64_t num_fine,
                         int64_t max_len, int64_t alignment, bool drop_eagle,
                         absl::Span<const int> gids, std::vector<BlockId>* out) const override;
  int64_t NumSkippedTokens(int64_t num_computed) const override;
  int64_t MaxAdmissionTokens(int64_t max_in_flight_tokens, int64_t max_model_len) const override;
};

// Mamba in align mode: one running state block per request; states at block boundaries are
// cached; a hit is the last cached state at an A-aligned boundary (docs/semantics.md §9.2, §10).
class MambaManager : public SingleTypeManager {
 public:
  using SingleTypeManager::SingleTypeManager;
  int64_t FindLongestHit(const HitIndex& index, const HashPair* fine, int64_t num_fine,
                         int64_t max_len, int64_t alignment, bool drop_eagle,
                         absl::Span<const int> gids, std::vector<BlockId>* out) const override;
  // Every block before the one holding the state at num_computed.
  int64_t NumSkippedBlocks(int64_t num_computed) const override {
    return CeilDiv(num_computed, block_size_) - 1;
  }
  // Frees every real block before the running state, null blocks between them or not
  // (MambaManager.remove_skipped_blocks frees the previous state by its index).
  void RemoveSkippedBlocks(absl::Span<GroupBlocks> run, int64_t num_computed) const override;
  int64_t NumBlocksToAllocate(absl::Span<const GroupBlocks> run, const std::vector<BlockId>* hits,
                              int64_t need, int64_t main, int64_t total) const override;
  int64_t AllocateNew(absl::Span<GroupBlocks> run, int64_t need, int64_t main,
                      int64_t total) const override;
  void PrefetchPublishes(absl::Span<const GroupBlocks> run, const HashPair* fine, int64_t limit,
                         int64_t step_end) const override;
  int64_t CacheBlocks(absl::Span<GroupBlocks> run, const HashPair* fine, int64_t limit,
                      int64_t step_end, const CacheRequest& request) const override;
  bool NeedsCopyOnWrite(const std::vector<BlockId>&, int64_t) const override { return false; }
  void NewStep() const override { cached_this_step_.clear(); }

 private:
  // The part of the table indexed by state: block i holds the state after (i + 1)·B tokens.
  static int64_t StateBlocks(const GroupBlocks& g) {
    return static_cast<int64_t>(g.blocks.size()) - g.num_speculative;
  }
  // Whether the retention interval keeps a state at `position` (a block or, with partial hits, a
  // hash boundary where a step ended).
  bool RetainsStateAt(int64_t position, const CacheRequest& request) const;
  // Appends speculative state blocks until the table has `count`; returns how many it took.
  int64_t ReserveSpeculativeBlocks(GroupBlocks& g, int count) const;
  // The state blocks published since the step started (vLLM's cached_blocks_this_step): a hit
  // ending on one waits a step (NumBlocksToAllocate).
  mutable std::vector<BlockId> cached_this_step_;
  // The state CacheBlocks(run, fine, limit, step_end) publishes, the same for every group of the
  // run: its block index (the block holding the state at step_end) and hash; null: none.
  const HashPair* StateToPublish(const HashPair* fine, int64_t limit, int64_t step_end,
                                 int64_t* index) const;
};

std::unique_ptr<SingleTypeManager> MakeManager(const KvGroup& spec, int group_id, BlockPool* pool,
                                               const ManagerParams& p);

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_SINGLE_TYPE_MANAGER_H_
