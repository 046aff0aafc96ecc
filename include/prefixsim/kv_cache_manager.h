// The KV cache manager: the only door from the scheduler to KV memory (docs/design.md §2). It
// mirrors vLLM v1's KVCacheManager (docs/semantics.md §9–§10, §12): prefix lookup at admission,
// slot allocation with lookahead, caching while running, freeing tail first.
#ifndef PREFIXSIM_KV_CACHE_MANAGER_H_
#define PREFIXSIM_KV_CACHE_MANAGER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "prefixsim/cache_event_listener.h"
#include "prefixsim/kv_event_sink.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/request.h"

namespace prefixsim {
namespace kv {
class KvCacheState;
}  // namespace kv

struct KvCacheOptions {
  // Run the full invariant checker after every operation (tests; slow).
  bool check_invariants = false;
  // Tokens per request that a multi-module MTP drafter re-prefills and that are never cached
  // (docs/semantics.md §10.2 num_reprefillable); 0 otherwise.
  int64_t num_reprefillable_tokens = 0;
  // max_model_len: AllocateSlots caps computed + new + lookahead tokens here (docs/semantics.md
  // §10.1). 0 means no cap.
  int64_t max_model_len = 0;
  // The tokens one step may schedule (vLLM's max_in_flight_tokens with one batch in flight): what
  // FullSequenceFits counts of a sliding window or local chunk (docs/semantics.md §2.3). 0 means
  // no cap.
  int64_t max_num_batched_tokens = 0;
};

struct KvCacheCounters {
  int64_t evicted_blocks = 0;    // cached blocks whose hash was dropped to reuse them
  int64_t cached_blocks = 0;     // blocks published to the prefix index
  int64_t allocated_blocks = 0;  // blocks handed out by the pool
  // 64-bit hash-key collisions caught by the second, independent check value (verified on every
  // lookup and insert): each one cost at most a hit, none produced a wrong hit. Expected 0.
  int64_t hash_collisions = 0;
};

// Result of a prefix lookup for one request.
struct PrefixHit {
  int64_t hit_tokens = 0;  // num_new_local_computed_tokens: a multiple of the hit alignment A
  // Tokens found cached in every group but cut off by the alignment to A (docs/design.md §4.5): the
  // hit that the same lookup (same fixed point, same EAGLE drop, same max_hit = num_tokens - 1)
  // would give with alignment H (the hash granularity) instead of A, minus hit_tokens; 0 when
  // A == H (unitary models, partial hits).
  int64_t alignment_loss_tokens = 0;
  // What the LCM costs this lookup: the hit a shadow index would give (the same computed blocks,
  // published at the finest prefix-cacheable block size U and never rounded to S, evicted with
  // the real cache's LRU clock; same max_hit = num_tokens - 1) minus hit_tokens. 0 when A == U
  // (unitary models, S equal to the finest block, partial hits).
  int64_t lost_to_alignment_tokens = 0;
  // Where a prefix shared with earlier requests ends although not every group cached its end
  // (a lagging mamba state or sliding window): hit_tokens plus the tokens the longest single
  // group's hit goes beyond it, or 0 when every group agrees. vLLM's shared_prefix_boundary:
  // the scheduler stops a prefill chunk there so that the state at the junction is cached for
  // the requests that share the prefix next (docs/semantics.md, "Junction stop").
  int64_t shared_prefix_boundary = 0;
};

// Content id of a request's generated output tokens (those beyond Request::output): token p of
// the output is (GeneratedOutputContentId(id), p). A trace reader can reuse it so that a later
// turn's prompt names an earlier turn's generated output.
uint64_t GeneratedOutputContentId(uint64_t request_id);

// Why a manager of `plan` keeps no prefix cache although the plan enables it: a prefix-cacheable
// group whose block size is not a multiple of the hash block size, which vLLM refuses at startup
// (docs/semantics.md §7). Empty when the plan has no such group. The manager prints nothing;
// callers show it.
std::string PrefixCachingDisabledWarning(const KvPlan& plan);

// Names a request tracked by a KvCacheManager (a slot of its request table). Default: none.
struct KvRequestHandle {
  uint32_t slot = UINT32_MAX;
  bool valid() const { return slot != UINT32_MAX; }
};

class KvCacheManager {
 public:
  // REQUIRES: plan.num_blocks >= 2 (the null block plus one usable block).
  KvCacheManager(const KvPlan& plan, const KvCacheOptions& options = {});
  ~KvCacheManager();
  KvCacheManager(const KvCacheManager&) = delete;
  KvCacheManager& operator=(const KvCacheManager&) = delete;

  // Starts tracking a request; the handle names it in the calls below until RemoveRequest (the
  // per-step calls then need no id lookup). REQUIRES: *request outlives RemoveRequest(request->id);
  // ids unique.
  KvRequestHandle AddRequest(const Request* request);
  // Work another thread can do for a manager of `plan` before `request` reaches it: the prompt's
  // block hashes (Request::prompt_hashes), which AddRequest and the routers' lookups then take
  // instead of computing them. Results are the same with or without it. Reads only `plan` and
  // `request`: safe to run on a reader thread. Does nothing without prefix caching, and keeps
  // hashes already computed at the plan's hash unit (a search replaying one parsed trace under
  // many plans hashes each prompt once per unit).
  static void PrepareRequest(const KvPlan& plan, Request* request);
  // What PrepareRequest stores for a plan hashing at `hash_tokens` (> 0), computed from the
  // request's content alone.
  static PromptHashes PromptHashesAt(const Request& request, int64_t hash_tokens);
  // Stops tracking; its handle is invalid from now on. REQUIRES: its blocks were freed with Free().
  void RemoveRequest(uint64_t request_id);
  // The handle of a tracked request. REQUIRES: AddRequest'ed and not removed.
  KvRequestHandle Handle(uint64_t request_id) const;

  // Tells the manager that the request's verified token count (prompt + accepted outputs, no
  // drafts) is now `num_tokens`. Output tokens beyond Request::output get unique content.
  void SetNumTokens(KvRequestHandle request, int64_t num_tokens);

  // Prefix lookup for a request that holds no blocks (new, or preempted and reset): the longest
  // hit with max_hit = num_tokens - 1 (docs/semantics.md §9). The matched blocks are remembered and
  // taken by the next AllocateSlots call for this request. Without prefix caching, returns {0, 0}.
  // Look up again before retrying an AllocateSlots that returned false (vLLM looks up every
  // step): a remembered hit whose blocks were evicted meanwhile aborts.
  PrefixHit GetComputedBlocks(KvRequestHandle request);

  // Allocates blocks so that the request can hold num_computed_tokens + num_new_computed_tokens +
  // num_new_tokens (+ num_lookahead_tokens, capped at max_model_len) tokens, all groups or none
  // (docs/semantics.md §10.1). num_new_computed_tokens is the hit from GetComputedBlocks (0 after
  // the first step). Then caches full blocks up to min(computed + new, num_tokens), under the
  // hybrid round-down to S. Returns false if there are not enough free blocks: nothing is allocated
  // then, but, as in vLLM, blocks that fell out of a sliding window / local chunk before
  // num_computed_tokens + num_new_computed_tokens are released first.
  // num_new_computed_tokens must be 0 (discarding a remembered hit) or the hit_tokens returned.
  bool AllocateSlots(KvRequestHandle request, int64_t num_computed_tokens, int64_t num_new_tokens,
                     int64_t num_new_computed_tokens, int64_t num_lookahead_tokens);

  // Frees all of the request's blocks, tail first (docs/semantics.md §8.2). The request stays
  // registered and may look up and allocate again (preemption).
  void Free(KvRequestHandle request);

  // Whether the free blocks would hold the request's whole sequence (its tokens so far, at most
  // max_model_len; sliding-window and chunked-local groups counted up to what one request keeps)
  // on top of the hit GetComputedBlocks remembered: vLLM's admission gate
  // (scheduler_reserve_full_isl, allocate_slots' full_sequence_must_fit; docs/semantics.md
  // §10.1). Changes nothing.
  bool FullSequenceFits(KvRequestHandle request) const;
  // A scheduler step starts (vLLM's new_step_starts): a mamba state published from now on cannot
  // serve a hit until the next step.
  void NewStep();

  // The same calls by request id (one hash lookup each; tests and tools).
  void SetNumTokens(uint64_t request_id, int64_t num_tokens) {
    SetNumTokens(Handle(request_id), num_tokens);
  }
  PrefixHit GetComputedBlocks(uint64_t request_id) { return GetComputedBlocks(Handle(request_id)); }
  bool AllocateSlots(uint64_t request_id, int64_t num_computed_tokens, int64_t num_new_tokens,
                     int64_t num_new_computed_tokens, int64_t num_lookahead_tokens) {
    return AllocateSlots(Handle(request_id), num_computed_tokens, num_new_tokens,
                         num_new_computed_tokens, num_lookahead_tokens);
  }
  void Free(uint64_t request_id) { Free(Handle(request_id)); }

  // Of `computed_tokens` computed tokens of a sequence, those the finest prefix-cacheable group
  // could publish at its own block boundary but that the hybrid caching rule (round-down to S,
  // docs/semantics.md §10.2) keeps out of the cache. 0 without prefix caching and for unitary
  // plans.
  int64_t UnpublishedAlignmentTokens(int64_t computed_tokens) const;

  // Events of this cache's prefix index go to `listener` (null: none). Not owned; it must
  // outlive the manager or be unset first.
  void SetCacheEventListener(CacheEventListener* listener);
  // Per-block events with group, hash and request (vLLM's KV events; kv_event_sink.h) go to
  // `sink` (null: none). Not owned; it must outlive the manager or be unset first.
  void SetKvEventSink(KvEventSink* sink);

  int64_t num_free_blocks() const;    // free and cached-free blocks (not the null block)
  int64_t num_usable_blocks() const;  // num_blocks - 1
  double usage() const;               // 1 - free / usable
  const KvCacheCounters& counters() const;
  const KvPlan& plan() const;

  // The request's block table in group `group` (0 = the null block), for tests and debugging.
  std::vector<int32_t> BlockTable(uint64_t request_id, int group) const;
  // Blocks the request holds over all groups (null entries not counted).
  int64_t NumHeldBlocks(uint64_t request_id) const;

  // Checks every invariant (block states, reference counts vs block tables); aborts on failure.
  void CheckInvariants() const;

  // The state behind this facade, for the simulator's own layers (routers' lookups, miss
  // attribution); an opaque type to everyone else.
  kv::KvCacheState* impl() const { return state_.get(); }

 private:
  std::unique_ptr<kv::KvCacheState> state_;
};

}  // namespace prefixsim

#endif  // PREFIXSIM_KV_CACHE_MANAGER_H_
