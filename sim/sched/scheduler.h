// The continuous-batching scheduler of vLLM v1 (docs/semantics.md §11): every step, RUNNING
// requests first (decode = 1 + drafts, or the next prefill chunk), then WAITING ones (prefix lookup
// at admission, chunked prefill), under a token budget and max_num_seqs. When the KV cache cannot
// take a running request's tokens it preempts by recomputation: the last running request is
// freed, reset to zero and pushed to the front of the waiting queue (FCFS victim policy).
#ifndef PREFIXSIM_SIM_SCHED_SCHEDULER_H_
#define PREFIXSIM_SIM_SCHED_SCHEDULER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "prefixsim/engine.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/request.h"
#include "sim/kv/miss_attribution.h"
#include "sim/kv/offloading_connector.h"
#include "sim/sched/prefix_stats.h"

namespace prefixsim {

// A request inside the engine: the trace request plus vLLM's per-request state.
// alignas(64) and the fields of every step first: a step walks every running request several
// times (schedule, cost, finish), and a batch's requests then fit the L1 cache, one line each.
struct alignas(64) SimRequest {
  int64_t num_tokens = 0;     // prompt + verified outputs (vLLM request.num_tokens)
  int64_t num_computed = 0;   // num_computed_tokens
  int64_t num_outputs = 0;    // generated tokens
  int64_t max_outputs = 0;    // finish when num_outputs reaches this
  int64_t prompt_tokens = 0;  // request->prompt_tokens
  int64_t first_token_ns = -1;
  int32_t num_drafts = 0;  // proposed draft tokens (spec_token_ids) awaiting verification
  // Its entry in the KV cache manager, made when the scheduler first considers it for
  // admission: a long waiting queue holds no KV state (Scheduler::Schedule).
  KvRequestHandle kv;
  // Acceptance lengths recorded in the trace that the replay uses (request->accepted_lengths,
  // none unless the engine uses them), and the next one.
  int32_t num_trace_accepted = 0;
  int32_t accepted_cursor = 0;
  // Read at admission, preemption and finish.
  std::unique_ptr<Request> request;
  int32_t num_preemptions = 0;
  bool finished = false;
  int64_t finish_ns = -1;
  int64_t first_hit_tokens = -1;       // at the first admission
  int64_t readmission_hit_tokens = 0;  // summed over its re-admissions after preemptions
  int64_t first_alignment_loss = 0;
  int64_t first_lost_to_alignment = 0;
  // Miss attribution: what the fleet held at arrival, and the causes of the first admission.
  kv::ArrivalSighting sighting;
  MissAttribution first_miss;
  // PrefixHit::shared_prefix_boundary of the last admission lookup: a prefill chunk that would
  // run past it stops there (MambaAlignedSplit).
  int64_t shared_prefix_boundary = 0;
  int64_t record_index = -1;  // into ReplayResult::per_request, -1 if not recorded
  size_t slot = 0;            // owner's storage slot
  // An offload tier's hit being loaded (vLLM's WAITING_FOR_REMOTE_KVS): the load ends at
  // load_done_ns (-1: none), the request then holds loaded_tokens computed tokens, lookup_gpu_hit
  // of them from the GPU pool and load_split[t] from tier t.
  int64_t load_done_ns = -1;
  bool load_ended = false;  // loaded, not admitted yet
  int64_t loaded_tokens = 0;
  int64_t lookup_gpu_hit = 0;
  int64_t load_split[kMaxOffloadTiers] = {};
  // The first admission's hit by where it came from (the record's).
  int64_t gpu_hit_tokens = 0;
  int64_t tier_hit_tokens[kMaxOffloadTiers] = {};
  MissAttribution load_miss;  // the causes read at the load's lookup
  uint64_t id() const { return request->id; }
};
static_assert(offsetof(SimRequest, request) == 64, "a step's fields share one cache line");

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 8192;
  int64_t max_num_seqs = 256;
  int64_t max_model_len = 131072;
  int64_t long_prefill_token_threshold = 0;
  bool enable_chunked_prefill = true;
  bool enable_prefix_caching = true;
  // vLLM's scheduler_reserve_full_isl: admit only when the whole sequence fits.
  bool reserve_full_isl = true;
  // Lookahead slots reserved for drafts per step of a running request (docs/semantics.md §11
  // L_ahead).
  int64_t num_lookahead_tokens = 0;
  // Block size for mamba-aligned prefill splits (the mamba group's block size, docs/semantics.md
  // §11 and issue #54076); 0 = no split (no align-mode mamba group or no prefix caching).
  int64_t mamba_align_block_size = 0;
  bool use_eagle = false;  // the last cacheable mamba position moves back one block
  // Fine-grained (partial) hits with a mamba group: a prefill also stops at the prompt's last
  // hash boundary, where its partial state can be registered (0 = no such stop).
  int64_t mamba_partial_hit_unit = 0;
  // The most prefill tokens one step can give a request: the budget, or the long-prefill
  // threshold when lower. A mamba block larger than this is prefilled in sub-block chunks.
  int64_t MaxPrefillTokens() const {
    return long_prefill_token_threshold > 0
               ? std::min(max_num_batched_tokens, long_prefill_token_threshold)
               : max_num_batched_tokens;
  }
  int64_t hit_rate_window_requests = 1000;

  // Derives the scheduler settings of `engine` served with `plan`.
  static SchedulerConfig From(const KvPlan& plan, const EngineConfig& engine);
};

struct ScheduledSeq {
  SimRequest* req = nullptr;
  int64_t num_new_tokens = 0;  // incl. drafts
  int64_t context_tokens = 0;  // num_computed + num_new_tokens: what the step attends over
  int32_t num_drafts = 0;      // drafts among them
};

// Why the waiting queue stopped admitting in the last Schedule() call.
enum class AdmissionStop {
  kNone,              // queue drained or budget exhausted
  kMaxNumSeqs,        // running is full
  kPreempted,         // a preemption happened this step (vLLM admits nothing then)
  kAllocationFailed,  // not enough free blocks for the front request
  kTooBigUnchunked,   // chunked prefill off and the prompt exceeds the budget
  kZeroTokens,        // the mamba split left nothing to schedule
};

struct SchedulerCounters {
  PrefixCacheStats prefix_cache;
  int64_t alignment_loss_tokens = 0;
  int64_t preempted_alignment_loss_tokens = 0;
  int64_t lost_to_alignment_tokens = 0;  // PrefixHit::lost_to_alignment_tokens, non-preempted
  int64_t preemptions = 0;
  MissCauseStats miss_causes;
  // With offload tiers, the first admissions' hits by where they came from.
  int64_t gpu_hit_tokens = 0;
  int64_t tier_hit_tokens[kMaxOffloadTiers] = {};
};

// The prefill case of MambaAlignedSplit (scheduler.cc says which stops it makes).
int64_t MambaAlignedPrefillSplit(const SchedulerConfig& config, const SimRequest& req,
                                 int64_t num_new_tokens, int64_t num_computed);

// How many of `num_new_tokens` a request with `num_computed` computed tokens prefills this step
// under mamba align mode (vLLM's _mamba_block_aligned_split). num_new_tokens itself when
// config.mamba_align_block_size is 0 or the request decodes (num_tokens - 1 extends the prefill
// to a resumed request replaying its outputs). Inline: every step asks it for every running
// request, and nearly all of them decode.
inline int64_t MambaAlignedSplit(const SchedulerConfig& config, const SimRequest& req,
                                 int64_t num_new_tokens, int64_t num_computed) {
  if (config.mamba_align_block_size <= 0 ||
      num_computed >= std::max(req.prompt_tokens, req.num_tokens - 1)) {
    return num_new_tokens;
  }
  return MambaAlignedPrefillSplit(config, req, num_new_tokens, num_computed);
}

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCacheManager* kv);

  // A new arrival: appended to the waiting queue. The scheduler registers it with the KV
  // manager when it first tries to admit it.
  void AddWaiting(SimRequest* req) {
    waiting_.push_back(req);
    waiting_tokens_ += req->num_tokens;
  }

  // Offload tiers behind the KV cache (null: none). Not owned.
  void SetOffloadingConnector(kv::OffloadingConnector* offload) { offload_ = offload; }

  // Builds the next batch, for a step starting at `now`, into *batch (cleared first).
  void Schedule(std::vector<ScheduledSeq>* batch, int64_t now = 0);

  // Drops requests marked finished from the running list, keeping the order of the others.
  void RemoveFinished();
  // Forgets every waiting and running request (an interrupted replay; their KV state stays as
  // it is and dies with the KV manager).
  void Clear() {
    running_.clear();
    waiting_.clear();
    waiting_tokens_ = 0;
  }

  // Removes the front waiting request (it can never be scheduled) and returns it.
  SimRequest* PopWaitingFront();

  AdmissionStop last_admission_stop() const { return last_stop_; }
  size_t num_running() const { return running_.size(); }
  size_t num_waiting() const { return waiting_.size(); }
  const std::vector<SimRequest*>& running() const { return running_; }
  const std::deque<SimRequest*>& waiting() const { return waiting_; }
  // The tokens of the waiting requests, kept as they come and go (a router asks at every
  // arrival; the queue can be long). None of them is computed: a request enters the queue with
  // num_computed 0 and a preempted one is reset to 0, and a waiting request does not grow.
  int64_t waiting_tokens() const { return waiting_tokens_; }
  const SchedulerCounters& counters() const { return counters_; }
  double recent_hit_rate() const { return window_.hit_rate(); }
  int64_t window_queries() const { return window_.queries(); }
  int64_t window_hits() const { return window_.hits(); }

 private:
  void Preempt(SimRequest* req);
  // A waiting request whose lookup found a tier hit: blocks allocated and its load started.
  enum class LoadStart { kNone, kStarted, kDeferred, kNoRoom };
  LoadStart TryStartLoad(SimRequest* req, const PrefixHit& hit, int64_t now);
  MissAttribution AttributeAdmission(SimRequest* req, const PrefixHit& hit);

  SchedulerConfig config_;
  KvCacheManager* kv_;
  kv::OffloadingConnector* offload_ = nullptr;
  std::vector<SimRequest*> running_;
  std::deque<SimRequest*> waiting_;
  int64_t waiting_tokens_ = 0;  // sum of num_tokens over waiting_
  SchedulerCounters counters_;
  HitRateWindow window_;
  AdmissionStop last_stop_ = AdmissionStop::kNone;
};

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_SCHED_SCHEDULER_H_
