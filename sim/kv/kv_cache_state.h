// What a KvCacheManager (prefixsim/kv_cache_manager.h, the facade) holds and does: the block
// pool, the coordinator with its per-group managers, the tracked requests, the shadow index and,
// when on, miss attribution. vLLM keeps the same parts apart in v1/core (block_pool.py,
// kv_cache_coordinator.py, single_type_kv_cache_manager.py, kv_cache_manager.py); here the
// facade forwards to this class, and the internal layers (routing.cc, fleet_lookup.cc,
// miss_attributor.cc) reach it through KvCacheManager::impl().
//
// Where the rules live (docs/design.md §2, "The KV kitchen"): which computed blocks are published
// is CacheComputedBlocks, one call into the coordinator's CacheBlocks per step, whose managers
// apply the retention masks (Reachable, RetainsStateAt); what an admission may take from the pool
// is NumBlocksToAllocate in AllocateSlotsFull, and FullSequenceFits for the admission gate; a tier
// behind the pool would listen to the pool's stores and evictions.
#ifndef PREFIXSIM_SIM_KV_KV_CACHE_STATE_H_
#define PREFIXSIM_SIM_KV_KV_CACHE_STATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "prefixsim/kv_cache_manager.h"
#include "sim/kv/block_hasher.h"
#include "sim/kv/block_pool.h"
#include "sim/kv/coordinator.h"
#include "sim/kv/ever_cached_index.h"
#include "sim/kv/miss_attributor.h"
#include "sim/kv/quiet_ranges.h"
#include "sim/kv/request_table.h"
#include "sim/kv/shadow_index.h"

namespace prefixsim::kv {

class KvCacheState {
 public:
  KvCacheState(const KvPlan& plan, const KvCacheOptions& options);

  // The facade's calls (prefixsim/kv_cache_manager.h says what each does).
  KvRequestHandle AddRequest(const Request* request);
  void RemoveRequest(uint64_t id) { requests_.Remove(id); }
  KvRequestHandle Handle(uint64_t id) const { return requests_.Handle(id); }
  void SetNumTokens(KvRequestHandle h, int64_t num_tokens);
  PrefixHit GetComputedBlocks(KvRequestHandle h);
  bool AllocateSlots(KvRequestHandle h, int64_t num_computed_tokens, int64_t num_new_tokens,
                     int64_t num_new_computed_tokens, int64_t num_lookahead_tokens);
  void Free(KvRequestHandle h);
  bool FullSequenceFits(KvRequestHandle h) const;
  void NewStep() { coord_.NewStep(); }
  // Invariants: the pool's own (queue links, every block exactly one of free / cached-free / in
  // use, the index), plus reference counts == occurrences in block tables, and a block id is used
  // by one group only.
  void CheckInvariants() const;

  // For the internal layers.
  const KvPlan& plan() const { return plan_; }
  // Prefix caching on and every prefix-cacheable group's blocks named by the hashes. vLLM refuses
  // the other plans at startup (docs/semantics.md §7); here they get no prefix cache, and
  // PrefixCachingDisabledWarning tells the caller.
  bool caching() const { return caching_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }
  // Lookups keep scratch in the coordinator: a peek needs the mutable one.
  KvCacheCoordinator& coordinator() { return coord_; }
  const KvCacheCoordinator& coordinator() const { return coord_; }
  // Block lists, one per group, for lookups that read only the hit.
  std::vector<BlockId>* lookup_scratch() { return lookup_scratch_.data(); }
  // With miss attribution: the request's lookup at H on what every group ever cached (at least
  // the published prefix, without a record: see EnableMissAttribution); `dense`: and on what the
  // retention interval dropped (what dense retention would have cached).
  int64_t CheckpointedHit(const RequestState& st, bool dense);
  const RequestTable& requests() const { return requests_; }
  KvCacheCounters& counters() { return counters_; }
  void set_fast_path(bool on) { fast_path_ = on; }

  // For the offloading connector (offloading_connector.h), which sits behind the pool as vLLM's
  // OffloadingConnector does: the request's hashes of its first `num_tokens` tokens' full chunks,
  // and its state (block tables).
  const std::vector<HashPair>& HashesOf(KvRequestHandle h, int64_t num_tokens) {
    RequestState& st = requests_[h];
    EnsureHashes(st, num_tokens / coord_.hash_block_size());
    return st.hashes;
  }
  const RequestState& request_state(KvRequestHandle h) const { return requests_[h]; }
  // vLLM's allocate_slots for a request whose `num_external_tokens` beyond the GPU hit are loaded
  // from an offload tier (num_external_computed_tokens, delay_cache_blocks): blocks for the hit,
  // the loaded tokens and the lookahead, all groups or none, and nothing published until the load
  // ends (CacheLoadedBlocks). `gpu_hit` is 0 or the hit GetComputedBlocks returned.
  bool AllocateSlotsForLoad(KvRequestHandle h, int64_t gpu_hit, int64_t num_external_tokens,
                            int64_t num_lookahead_tokens) {
    return AllocateSlotsFull(h, 0, 0, gpu_hit, num_lookahead_tokens, num_external_tokens,
                             /*delay_cache=*/true);
  }
  // The load ended: publishes the loaded full blocks of the first `num_computed_tokens` tokens
  // (vLLM's cache_blocks in _update_waiting_for_remote_kv).
  void CacheLoadedBlocks(KvRequestHandle h, int64_t num_computed_tokens);

  // Takes the hashes PrepareRequest computed, if at this cache's H. REQUIRES: `hashes` empty and
  // `cursor` at the start.
  void AdoptPromptHashes(const Request& r, std::vector<HashPair>* hashes, HashCursor* cursor) const;

  // Miss attribution (miss_attribution.h): null while off.
  void EnableMissAttribution(int64_t max_record_blocks, bool shadow_may_read_pool);
  const MissAttributor* attributor() const { return attributor_.get(); }
  MissAttributor* attributor() { return attributor_.get(); }

 private:
  // What a quiet call must leave as it found it (see AllocateSlotsFull).
  struct QuietSnapshot {
    int64_t free, cached_entries, allocated, published, evicted, shadow_held;
    std::vector<GroupBlocks> tables;
  };

  void MakeShadow(bool always);
  void EnsureHashes(RequestState& st, int64_t num_chunks);
  SlotCounts Counts(const RequestState& st, int64_t num_computed_tokens, int64_t num_new_tokens,
                    int64_t num_new_computed_tokens, int64_t num_lookahead_tokens,
                    int64_t num_external_tokens = 0) const;
  int64_t MaxModelLen() const;
  [[gnu::noinline]] bool AllocateSlotsFull(KvRequestHandle h, int64_t num_computed_tokens,
                                           int64_t num_new_tokens, int64_t num_new_computed_tokens,
                                           int64_t num_lookahead_tokens,
                                           int64_t num_external_tokens = 0,
                                           bool delay_cache = false);
  bool TakePendingHit(RequestState& st, int64_t num_computed_tokens,
                      int64_t num_new_computed_tokens);
  void ValidatePending(const RequestState& st) const;
  void TakeHitBlocks(RequestState& st, int64_t total_computed_tokens);
  void ReserveBlockTables(RequestState& st, int64_t num_lookahead_tokens);
  void NoteCachingRequest(const RequestState& st);
  void CacheComputedBlocks(RequestState& st, const SlotCounts& c, uint32_t slot);
  void CacheSpecBoundaryState(RequestState& st, int64_t total, int64_t prev_verified_end);
  QuietSnapshot TakeSnapshot(const RequestState& st) const;
  void CheckUnchanged(const RequestState& st, const QuietSnapshot& s) const;

  const KvPlan plan_;
  const KvCacheOptions options_;
  int64_t mamba_block_size_ = 0;  // 0 without a mamba group
  BlockPool pool_;
  KvCacheCoordinator coord_;
  const bool caching_;
  const QuietRanges quiet_;
  bool fast_path_ = true;  // kv::SetFastPath
  RequestTable requests_;
  std::vector<std::vector<BlockId>> lookup_scratch_;
  std::unique_ptr<ShadowIndex> shadow_;  // null when nothing can be lost to the alignment
  bool shadow_counts_loss_ = false;      // U < A: lost_to_alignment_tokens is reported
  std::unique_ptr<MissAttributor> attributor_;
  // With attributor_, unless every group caches what it publishes: what groups ever cached.
  std::unique_ptr<EverCachedIndex> ever_cached_;
  std::vector<char> cow_;
  KvCacheCounters counters_;
};

}  // namespace prefixsim::kv

#endif  // PREFIXSIM_SIM_KV_KV_CACHE_STATE_H_
