// The KV cache coordinator (docs/semantics.md §9.3, §10): combines the per-group managers. Unitary
// (one group: A = H = B) or hybrid (the fixed point over spec-groups, alignment to A, caching under
// the round-down to S).
#ifndef PREFIXSIM_SIM_KV_COORDINATOR_H_
#define PREFIXSIM_SIM_KV_COORDINATOR_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "prefixsim/kv_plan.h"
#include "sim/kv/block_pool.h"
#include "sim/kv/fleet_index.h"
#include "sim/kv/single_type_manager.h"

namespace prefixsim {
namespace kv {

class KvCacheCoordinator {
 public:
  // With plan.enable_prefix_caching, the plan's S, H, A must be consistent (S % H == 0,
  // A % H == 0); without it they are not used (S is used for all three).
  // `group_runs`: consecutive groups with the same spec are handled as one run (one manager
  // call per run, the same pool operations in the same order); false makes every group its own
  // run (one call per group), which tests compare against.
  KvCacheCoordinator(const KvPlan& plan, BlockPool* pool, int64_t extra_retained_tokens,
                     bool group_runs = true);

  // The hash granularity H a coordinator of `plan` uses. REQUIRES: plan.groups is not empty.
  static int64_t HashBlockSize(const KvPlan& plan);

  // Whether every prefix-cacheable group's block size is a multiple of H, so that lookups and
  // caching are possible. The first group of `plan` that is not, or -1. REQUIRES: plan.groups is
  // not empty.
  static int UnhashableGroup(const KvPlan& plan);
  int unhashable_group() const { return unhashable_group_; }

  int num_groups() const { return num_groups_; }
  bool unitary() const { return managers_.size() == 1; }
  int64_t hash_block_size() const { return hash_block_size_; }            // H
  int64_t hit_alignment() const { return hit_alignment_; }                // A
  int64_t scheduler_block_size() const { return scheduler_block_size_; }  // S
  const SingleTypeManager& manager(int g) const { return *managers_[g]; }

  // The longest hit of at most max_hit tokens that every group can serve, a multiple of
  // `alignment` (the plan's A for the real lookup), reading the cache through `index`. out[g]
  // receives group g's hit blocks. Not const: it reuses internal scratch buffers (no
  // allocation in steady state).
  // With `uncached_common_prefix`, also the tokens by which the longest hit any single
  // spec-group reported during the fixed point exceeds the reconciled hit: a prefix that earlier
  // requests computed but that a lagging group (a mamba state, a sliding window) never cached at
  // its end. vLLM's num_uncached_common_prefix_tokens (docs/semantics.md §9.3, docs/semantics.md
  // "Junction stop"); 0 for unitary plans.
  // With `limiting_group`, also the group whose own lookup came back shortest in the first pass
  // (the first group of its spec-group; the earlier one on a tie): what broke the chain
  // (miss_attribution.h).
  int64_t FindLongestCacheHit(const HitIndex& index, const HashPair* fine, int64_t num_fine,
                              int64_t max_hit, int64_t alignment, std::vector<BlockId>* out,
                              int64_t* uncached_common_prefix = nullptr,
                              int* limiting_group = nullptr);
  // FindLongestCacheHit on the fleet's index for every replica: hits[r] (index.num_replicas()
  // of them) is what FindLongestCacheHit(index.hit_index(r), ...) returns. A whole-block hit
  // starts with full attention's blocks (§9.2), whose lookup opens the fixed point with the same
  // arguments for every replica (§9.3): it is one walk for all the replicas holding the first
  // block, and only the other groups' lookups, which start from its answer, run per replica.
  // `scratch` holds num_groups() block lists; what it holds afterwards is unspecified.
  void FindLongestCacheHits(const FleetIndex& index, const HashPair* fine, int64_t num_fine,
                            int64_t max_hit, int64_t alignment, std::vector<BlockId>* scratch,
                            int64_t* hits);
  // The group a hybrid-unaware router would watch: the first prefix-cacheable full-attention
  // group (else the first prefix-cacheable one), or -1.
  int primary_group() const { return spec_groups_.empty() ? -1 : spec_groups_[0].gids[0]; }

  // The token counts are vLLM's (allocate_slots, docs/semantics.md §10.1; kv::SlotCounts in
  // quiet_ranges.h): total_computed_tokens (computed + new hit), num_tokens_main_model (+ new
  // tokens), num_tokens_need_slot (+ lookahead).
  void RemoveSkippedBlocks(GroupBlocks* groups, int64_t total_computed_tokens) const;
  // `hit` is null or an array of num_groups() hit block lists.
  int64_t NumBlocksToAllocate(const GroupBlocks* groups, const std::vector<BlockId>* hit,
                              int64_t num_tokens_need_slot, int64_t num_tokens_main_model,
                              int64_t total_computed_tokens) const;
  // Blocks the whole sequence of `full_tokens` would take, sliding-window and chunked-local groups
  // capped at what one request keeps (vLLM's allocate_slots with full_sequence_must_fit).
  int64_t NumBlocksForFullSequence(const GroupBlocks* groups, const std::vector<BlockId>* hit,
                                   int64_t full_tokens, int64_t total_computed_tokens,
                                   int64_t max_in_flight_tokens, int64_t max_model_len) const;
  // A scheduler step starts (vLLM's new_step_starts).
  void NewStep() const;
  int64_t AllocateNew(GroupBlocks* groups, int64_t num_tokens_need_slot,
                      int64_t num_tokens_main_model, int64_t total_computed_tokens) const;
  // Token count up to which blocks may be cached, per group, for `n` finalized tokens
  // (docs/semantics.md §10.2). The largest is returned by MaxCacheLimit.
  int64_t CacheLimit(int g, int64_t n) const { return LimitFor(g, n, RoundedForCache(n)); }
  int64_t MaxCacheLimit(int64_t n) const;
  // What every prefix-cacheable group may cache of n tokens (the round-down to S in hybrid plans
  // without partial hits; n otherwise).
  int64_t CommonCacheLimit(int64_t n) const { return partial_hits_ ? n : RoundedForCache(n); }
  // Of n computed tokens, those the finest prefix-cacheable group could publish at its own block
  // boundary but that CacheLimit keeps out (the hybrid round-down to S). 0 for unitary plans.
  int64_t UnpublishedAlignmentTokens(int64_t n) const;
  int64_t CacheBlocks(GroupBlocks* groups, const HashPair* fine, int64_t n, int64_t step_end,
                      const CacheRequest& request = {}) const;
  void FreeAll(GroupBlocks* groups) const;

 private:
  // n rounded down to S (hybrid) or n (unitary): what a kRounded group may cache.
  int64_t RoundedForCache(int64_t n) const {
    return unitary() ? n : RoundDown(n, scheduler_block_size_);
  }
  // CacheLimit given `rounded` = RoundedForCache(n): the division is done once per call, not once
  // per group.
  int64_t LimitFor(int g, int64_t n, int64_t rounded) const {
    switch (limit_rules_[g]) {
      case LimitRule::kNothing:
        return 0;
      case LimitRule::kAll:
        return n;
      case LimitRule::kRounded:
        return rounded;
      case LimitRule::kEagle:
        return std::min(n, rounded + managers_[g]->block_size());
    }
    return 0;
  }
  enum class LimitRule : uint8_t { kNothing, kAll, kRounded, kEagle };

  // The hybrid fixed point of FindLongestCacheHit (§9.3). `first_hit` >= 0: the first spec
  // group's (full attention's) first lookup, already found by FindLongestCacheHits, which reads
  // only the hit: `out` is then left as it was.
  int64_t Reconcile(const HitIndex& index, const HashPair* fine, int64_t num_fine, int64_t max_hit,
                    int64_t alignment, int64_t first_hit, std::vector<BlockId>* out,
                    int64_t* uncached_common_prefix, int* limiting_group);

  struct SpecGroup {
    std::vector<int> gids;
    bool full_attention = false;
    bool eagle = false;
    bool mamba = false;
    int64_t block_size = 0;
    const SingleTypeManager* manager = nullptr;
  };

  // Runs of consecutive groups with the same spec (so the same limit rule): the managers' work
  // on a block table is done run by run (single_type_manager.h), the first group's manager
  // doing it for the run.
  struct Run {
    int first = 0;
    int count = 0;
  };

  int num_groups_ = 0;  // managers_.size(), read in every per-group loop
  std::vector<Run> runs_;
  std::vector<LimitRule> limit_rules_;  // per group
  BlockPool* pool_;
  std::vector<std::unique_ptr<SingleTypeManager>> managers_;
  std::vector<SpecGroup> spec_groups_;  // full attention first
  int64_t hash_block_size_;
  int64_t hit_alignment_;
  int64_t scheduler_block_size_;
  bool partial_hits_;
  int unhashable_group_ = -1;
  // Scratch: per spec-group, per member group, the blocks of the last lookup.
  std::vector<std::vector<std::vector<BlockId>>> scratch_;
  std::vector<int64_t> sg_hit_;
  std::vector<char> sg_looked_up_, sg_eagle_ok_;
  std::vector<int64_t> replica_hits_;  // FindLongestCacheHits: full attention's, per replica
};

}  // namespace kv
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_KV_COORDINATOR_H_
