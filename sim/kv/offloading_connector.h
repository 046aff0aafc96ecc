// The scheduler side of vLLM's native KV offloading (the OffloadingConnector's scheduler with
// CPUOffloadingSpec or TieringOffloadingSpec; docs/semantics.md §16): after the GPU prefix lookup
// it looks the request's next blocks up in the CPU tier and the secondary tiers behind it, loads
// a hit asynchronously (the request waits for it, as in WAITING_FOR_REMOTE_KVS), and after every
// step stores the blocks that became full. Keys are (block hash, group), one per group's block.
#ifndef PREFIXSIM_SIM_KV_OFFLOADING_CONNECTOR_H_
#define PREFIXSIM_SIM_KV_OFFLOADING_CONNECTOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "prefixsim/engine.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_plan.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/offload_tier.h"

namespace prefixsim::kv {

class KvCacheState;

// The key of one group's block in every tier: the request's block hash at the block's end, with
// the group folded in (vLLM's make_offload_key(block_hash, group_idx)).
inline uint64_t OffloadKey(uint64_t block_hash, int group) {
  return block_hash ^ (static_cast<uint64_t>(group) + 1) * 0x9E3779B97F4A7C15ULL;
}

class OffloadingConnector {
 public:
  // The tiers a fleet's replicas share (SecondaryTierConfig::shared), one entry per secondary
  // tier, null where the tier is each replica's own. MakeSharedTiers builds them.
  using SharedTiers = std::vector<std::shared_ptr<OffloadTier>>;
  static SharedTiers MakeSharedTiers(const EngineConfig& engine);

  // REQUIRES: engine.kv_offload.enabled(). `shared`: the fleet's shared tiers (null: none);
  // `reports_shared` says whether this replica's Stats() carry their state (capacity,
  // occupancy, evictions), which one replica reports for all.
  OffloadingConnector(const KvPlan& plan, const EngineConfig& engine, KvCacheManager* kv,
                      const SharedTiers* shared = nullptr, bool reports_shared = true);
  // Whether some tier is shared with other replicas (their steps must then run in one order).
  bool shares_tiers() const { return shares_tiers_; }

  // What the tiers hold beyond a GPU hit (vLLM's get_num_new_matched_tokens).
  struct Match {
    int64_t tokens = 0;  // loadable tokens beyond gpu_hit; 0: none
    bool defer = false;  // wait and ask again next step (a needed block is still being written,
                         // or another request is loading it)
  };
  Match Lookup(KvRequestHandle h, int64_t num_tokens, int64_t gpu_hit, int64_t now);

  // Allocates GPU blocks for the GPU hit and the `match` of the last Lookup (plus lookahead) and
  // starts loading it; false, with nothing changed, when the GPU pool cannot hold them. On
  // success the load ends at *done_ns (after `now`; at least the next step), and split[t]
  // (kMaxOffloadTiers entries) holds the loaded tokens tier t serves.
  bool StartLoad(KvRequestHandle h, int64_t gpu_hit, const Match& match,
                 int64_t num_lookahead_tokens, int64_t now, int64_t* done_ns, int64_t* split);
  // The load ended: its blocks are published on the GPU, and `num_computed_tokens` become
  // computed (the hit, less one token when it reached the end of the sequence).
  void FinishLoad(KvRequestHandle h, int64_t num_computed_tokens);

  // A request admitted for prefill without a load: storing starts from its first block (blocks
  // hit on the GPU are offered again). With a load, storing starts past the loaded hit.
  void ResetStores(KvRequestHandle h);
  // After a step that computes the request's tokens up to `computed_end` (drafts excluded):
  // stores its newly full blocks, prompt only unless `offload_prompt_only` is off. The writes
  // start when the step ends, at `step_end_ns`. Refused stores are retried after the next step.
  void StoreAfterStep(KvRequestHandle h, int64_t computed_end, int64_t prompt_tokens,
                      int64_t step_end_ns);

  // What the tiers would add to a GPU hit of `gpu_hit` for a prompt with `hashes`, by tier (CPU
  // first), added to split[] (kMaxOffloadTiers): a peek for routers, which neither counts for
  // store_threshold nor touches the LRU.
  void PeekSplit(const std::vector<HashPair>& hashes, int64_t num_tokens, int64_t gpu_hit,
                 int64_t now, int64_t* split);

  // Miss attribution: the tiers remember the keys they evict (at most `max_record_keys` each, 0:
  // all), so that StoredEnd can tell a block a tier dropped from one it never stored.
  void EnableMissAttribution(int64_t max_record_keys);
  // Where the tiers' hit beyond `gpu_hit` would end had every tier kept every key it ever stored
  // (the lookup's rules, on what was stored rather than what is held): the tokens past the real
  // hit and before it were lost to a tier's evictions, those past it were never stored.
  int64_t StoredEnd(KvRequestHandle h, int64_t num_tokens, int64_t gpu_hit);
  // Evicted keys the tiers' records forgot (a shared tier counted by the replica that reports it).
  int64_t ForgottenTierKeys() const;

  // The load of the request in progress, if any, ends at; -1 when none.
  int64_t LoadDoneNs(KvRequestHandle h) const;
  bool loads_in_flight() const { return loads_in_flight_ > 0; }

  // Tier `t` (0: CPU, then the secondary tiers), for reports and tests.
  int num_tiers() const { return static_cast<int>(tiers_.size()); }
  OffloadTier& tier(int t) { return *tiers_[t]; }

  // The counters so far (the tiers' occupancy included).
  OffloadStats Stats() const;

 private:
  struct GroupRule {
    int group = 0;
    int64_t block = 0;       // tokens per key
    int64_t ratio = 0;       // block / H
    int64_t window = 0;      // keys a hit must end with; 0 for full attention
    bool eagle = false;      // needs one more block, dropped (an annotated EAGLE group)
    int64_t bytes = 0;       // the group's real bytes per key, all ranks
    int64_t rank_bytes = 0;  // per rank (what one GPU's link carries)
  };
  struct RequestOffload {
    std::vector<int64_t> next_store;               // per rule: the first block not yet stored
    std::vector<std::pair<int, uint64_t>> pinned;  // (tier, key) read by the load in progress
    int64_t load_done_ns = -1;
  };

  // A key's first tier that holds it ready (-1: none); *pending when the CPU tier holds it but
  // its write has not landed.
  int TierOf(uint64_t key, int64_t now, bool* pending) const;
  // Whether some tier holds the key or remembers evicting it.
  bool EverHeld(uint64_t key) const;
  // `ever_held`: count a key as present if EverHeld, ready or not (StoredEnd; `defer` null).
  int64_t GroupHit(const GroupRule& r, const std::vector<HashPair>& hashes, int64_t gpu_hit,
                   int64_t max_hit, int64_t now, bool* defer, bool ever_held = false);
  int64_t HitEnd(const std::vector<HashPair>& hashes, int64_t num_tokens, int64_t gpu_hit,
                 int64_t now, bool* defer, bool ever_held = false);
  template <typename F>
  void ForEachNeededKey(const std::vector<HashPair>& hashes, int64_t gpu_hit, int64_t end,
                        F&& f) const;
  void SplitByTier(const std::vector<HashPair>& hashes, int64_t gpu_hit, int64_t end, int64_t now,
                   int64_t* split) const;
  RequestOffload& State(KvRequestHandle h);
  bool HeldOnGpu(KvRequestHandle h, int group, int64_t block) const;
  KvEventSink* EventSink() const;
  void SetNextStore(KvRequestHandle h, int64_t tokens, bool round_up);
  int64_t CpuSlotBytes(int64_t group_bytes) const;

  KvOffloadConfig config_;
  KvCacheState* state_;
  int64_t hash_block_size_;
  bool has_window_group_ = false;
  int64_t slot_bytes_ = 0;        // row_per_key: one slot per key, whatever its group
  std::vector<GroupRule> rules_;  // full attention first, then windows, largest first
  std::vector<std::shared_ptr<OffloadTier>> tiers_;  // CPU, then the secondary tiers
  std::vector<bool> tier_shared_;
  bool shares_tiers_ = false;
  bool reports_shared_ = true;
  std::unique_ptr<LookupTracker> tracker_;  // store_threshold >= 2
  std::vector<RequestOffload> requests_;    // by KvRequestHandle slot
  // By slot, the fewest tokens at which some rule has a whole block to store: a step below it
  // has nothing to do (most steps: decodes past the prompt). Apart from requests_, so that the
  // check every running request makes after every step reads a few dense lines.
  std::vector<int64_t> next_store_tokens_;
  int64_t loads_in_flight_ = 0;
  OffloadStats stats_;
  std::vector<uint64_t> keys_;  // scratch
  std::vector<TierBlock> blocks_, real_blocks_, tier_blocks_;
  std::vector<int64_t> rank_bytes_;
};

}  // namespace prefixsim::kv

#endif  // PREFIXSIM_SIM_KV_OFFLOADING_CONNECTOR_H_
