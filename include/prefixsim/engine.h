// The engine: a discrete-event replay of one vLLM v1 engine serving a trace (docs/design.md §2,
// §4.5; docs/semantics.md §11, §12). Continuous batching, chunked prefill, recompute preemption,
// speculative decoding and a step-time cost model drive a KvCacheManager; the result holds the
// prefix-cache statistics as vLLM logs them, the loss to the hit alignment, and latency.
//
// Decisions:
//  * Prompts longer than max_model_len are skipped and counted (vLLM rejects them at input
//    processing), and so is a prompt of exactly max_model_len (no room for an output token) and
//    an empty prompt. A request that cannot fit even in an otherwise empty KV cache is skipped
//    and counted as does_not_fit (vLLM would wait forever). Nothing is truncated.
//  * Outputs: at least 1 token (vLLM's max_tokens >= 1), at most max_model_len - prompt.
//  * Determinism: all randomness comes from one mt19937_64 stream (the standard's engine, drawn
//    the same on every platform) seeded with ReplayOptions::seed and drawn in batch order, so
//    equal inputs give equal results. wall_time_s is the one field that differs; reports omit
//    it on request (ReportOptions::include_wall_time).
//  * Timing: a step starts when the previous one ends (no async scheduling overlap); tokens of a
//    step are produced at its end (TTFT = end of the step that finishes the prefill - arrival).
//  * Preemption victim: FCFS (the last running request); priority scheduling is not modelled.
#ifndef PREFIXSIM_ENGINE_H_
#define PREFIXSIM_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/miss_causes.h"
#include "prefixsim/model.h"
#include "prefixsim/trace.h"

namespace prefixsim {

struct RequestRecord;
class KvEventSink;

struct ReplayProgress {
  int64_t requests_read = 0;      // arrivals so far
  int64_t requests_finished = 0;  // finished or skipped
  int64_t sim_time_ns = 0;
  bool done = false;  // the last call, after the replay finished
};

struct ReplayOptions {
  // Seeds the only random source (std::mt19937_64): the acceptance model.
  uint64_t seed = 0;
  // Runs the KV manager's invariant checker after every operation (tests; slow).
  bool check_invariants = false;
  // Runs the KV manager's whole invariant checker after every Nth engine step of each replica
  // (0: never). Cheap enough for long soak runs, unlike check_invariants.
  int64_t check_invariants_every = 0;
  // Keep one RequestRecord per request (the per-request CSV) in ReplayResult::per_request. Off
  // saves memory.
  bool record_requests = true;
  // Streams the records instead: each goes here, in trace order, as soon as it and every
  // earlier one are final; per_request stays empty and memory stays bounded by the requests in
  // flight. (ReplayWithFleetSizing calls it for the chosen fleet only.)
  std::function<void(const RequestRecord&)> record_sink;
  // Requests in the sliding window of vLLM's logged hit rate (docs/semantics.md §12,
  // CachingMetrics).
  int64_t hit_rate_window_requests = 1000;
  // Use Request::accepted_lengths when a request carries them, whatever the acceptance model.
  bool use_trace_accepted_lengths = true;
  // Split every admission's tokens into miss causes (ReplayResult::miss_causes,
  // RequestRecord::miss; docs/design.md §7). Needs prefix caching.
  bool attribute_misses = true;
  // The bound on what miss attribution remembers of prefixes the replicas computed and no
  // longer hold (the oracle behind `evicted`), which otherwise grows with every distinct prefix
  // of the trace (at most about 32 bytes per U-block). Split evenly
  // over a fleet's replicas; past it each forgets its oldest half, MissCauseStats::
  // forgotten_blocks counts what was forgotten, and some `evicted` tokens count as `elsewhere`
  // or `compulsory`. 0: no bound.
  int64_t miss_record_bytes = int64_t{4} << 30;
  // Called about every `progress_interval_requests` arrivals, every 1024 steps and once at the
  // end (may be empty).
  std::function<void(const ReplayProgress&)> progress;
  int64_t progress_interval_requests = 500;
  // Analytic cost model: active parameters per forward pass (all ranks); 0 = estimated from the
  // model's layer count.
  double cost_active_params = 0;
  // Null, or a flag that a signal handler sets to the signal's number (SIGINT, SIGTERM): once it
  // is non-zero the replay stops before its next event and returns what it simulated so far,
  // with ReplayResult::partial set. Read once per event and step (a relaxed load).
  const std::atomic<int>* interrupt = nullptr;
  // A replica that preempts this many times, or runs this many steps, without finishing a
  // request is thrashing (its KV cache cannot hold the requests it admits; vLLM would run that
  // way for ever): the replay stops with ResourceExhausted, naming the cause and the remedies.
  // 0 = no limit. The step limit's default, -1, is 2 x max_model_len + 10,000: without
  // preemptions the oldest running request finishes within max_model_len steps.
  int64_t max_preemptions_without_finish = 10000;
  int64_t max_steps_without_finish = -1;
  // The sink of replica r's KV cache events (vLLM's BlockStored / BlockRemoved, one batch per
  // step), called once per replica as it is built; null or empty: none. Not owned:
  // each sink must outlive the replay.
  std::function<KvEventSink*(int replica)> kv_event_sink;
  // The threads a fleet's replicas step on between two arrivals (conservative synchronisation:
  // every replica runs up to the next arrival, then the router decides). The report is the same
  // for every count. <= 0: the machine's cores. With kv_event_sink sinks the replicas run on one
  // thread unless every sink delivers in run order (KvEventSink::DeliversInRunOrder). The
  // threads are the process's one pool, shared by every replay the process runs at once.
  int threads = 1;
};

// vLLM's PrefixCacheStats (docs/semantics.md §12): token-level, recorded when a waiting request is
// admitted. Re-admissions of preempted requests go to the preempted_* fields.
struct PrefixCacheStats {
  int64_t requests = 0;
  int64_t queries = 0;
  int64_t hits = 0;
  int64_t preempted_requests = 0;
  int64_t preempted_queries = 0;
  int64_t preempted_hits = 0;
  // hits / queries over non-preempted admissions (0 when there were none).
  double hit_rate() const { return queries > 0 ? static_cast<double>(hits) / queries : 0.0; }
  // Adds another replica's stats: every field is a count.
  void Merge(const PrefixCacheStats& other) {
    requests += other.requests;
    queries += other.queries;
    hits += other.hits;
    preempted_requests += other.preempted_requests;
    preempted_queries += other.preempted_queries;
    preempted_hits += other.preempted_hits;
  }
};

// The offload tiers behind the GPU pool (docs/semantics.md §16): CPU first, then the secondary
// tiers in order. Bytes are what the links carry (all ranks).
inline constexpr int kMaxOffloadTiers = 1 + kMaxSecondaryTiers;
struct OffloadTierStats {
  std::string medium;  // vLLM's KV-event medium: CPU, FS, OBJ, P2P
  int64_t capacity_bytes = 0;
  int64_t capacity_blocks =
      0;                   // keys it can hold (CPU: slots; others: blocks of the largest group)
  int64_t hit_tokens = 0;  // prompt tokens its loads served at first admissions
  int64_t loaded_blocks = 0, loaded_bytes = 0;
  int64_t stored_blocks = 0, stored_bytes = 0;
  int64_t evicted_blocks = 0;
  int64_t never_loaded_blocks = 0;  // stored, then evicted or still held, never read by a load
  int64_t store_failures = 0;       // a step's stores refused: no room could be made
  int64_t peak_used_bytes = 0;
  void Merge(const OffloadTierStats& o);
};
struct OffloadStats {
  bool enabled = false;
  int64_t gpu_hit_tokens = 0;    // the GPU's share of the first admissions' hits
  int64_t loads = 0;             // admissions that waited for a load
  int64_t load_wait_ns = 0;      // summed over them: lookup to load end
  int64_t deferred_lookups = 0;  // lookups told to wait (a block being written or loaded)
  int64_t stores_skipped = 0;    // keys below store_threshold (vllm:kv_offload_stores_skipped)
  std::vector<OffloadTierStats> tiers;
  int64_t tier_hit_tokens() const {
    int64_t n = 0;
    for (const OffloadTierStats& t : tiers) n += t.hit_tokens;
    return n;
  }
  void Merge(const OffloadStats& o);
};

struct SpecDecodeStats {
  int64_t num_drafts = 0;                      // verification steps that carried at least one draft
  int64_t draft_tokens = 0;                    // draft tokens verified
  int64_t accepted_tokens = 0;                 // of which accepted
  std::vector<int64_t> accepted_per_position;  // accepted drafts at position 0..k-1
  // vLLM's mean acceptance length: 1 + accepted_tokens / num_drafts (1 without drafts).
  double mean_acceptance_length() const {
    return num_drafts > 0 ? 1.0 + static_cast<double>(accepted_tokens) / num_drafts : 1.0;
  }
  double acceptance_rate() const {
    return draft_tokens > 0 ? static_cast<double>(accepted_tokens) / draft_tokens : 0.0;
  }
  // Adds another replica's stats; accepted_per_position grows to the longer of the two.
  void Merge(const SpecDecodeStats& other) {
    num_drafts += other.num_drafts;
    draft_tokens += other.draft_tokens;
    accepted_tokens += other.accepted_tokens;
    if (other.accepted_per_position.size() > accepted_per_position.size()) {
      accepted_per_position.resize(other.accepted_per_position.size(), 0);
    }
    for (size_t i = 0; i < other.accepted_per_position.size(); ++i) {
      accepted_per_position[i] += other.accepted_per_position[i];
    }
  }
};

struct LatencySummary {
  int64_t count = 0;
  double mean_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
};

// One request's life (the per-request CSV, docs/design.md §4.5). Times in ns; -1 = did not happen.
struct RequestRecord {
  uint64_t id = 0;
  int64_t arrival_ns = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;             // generated
  int64_t hit_tokens = 0;                // prefix hit at the first admission
  int64_t alignment_loss_tokens = 0;     // at the first admission
  int64_t lost_to_alignment_tokens = 0;  // PrefixHit::lost_to_alignment_tokens, first admission
  int64_t first_token_ns = -1;
  int64_t finish_ns = -1;
  int32_t preemptions = 0;
  // Hit tokens of its re-admissions after preemptions, summed (prefix_cache.preempted_hits is
  // their sum over the requests).
  int64_t readmission_hit_tokens = 0;
  int32_t replica = 0;  // the fleet replica that served it
  // Fleets: the hit the best replica would have given at arrival minus the chosen one's (their
  // lookups on the exact view of the caches).
  int64_t routing_regret_tokens = 0;
  // With offload tiers: hit_tokens split into the GPU's share and each tier's (CPU first).
  int64_t gpu_hit_tokens = 0;
  int64_t tier_hit_tokens[kMaxOffloadTiers] = {};
  MissAttribution miss;  // at the first admission (all zero if not admitted or not attributed)
  // "" when served; otherwise why not: "prompt_too_long", "does_not_fit", "empty_prompt", or
  // "interrupted" (still waiting or running when an interrupted replay stopped).
  std::string skipped;
};

// One replica of a fleet (per_replica table of the report).
struct ReplicaSummary {
  int64_t requests = 0;  // routed to this replica
  int64_t finished_requests = 0;
  PrefixCacheStats prefix_cache;
  int64_t preemptions = 0;
  int64_t evicted_blocks = 0;
  double mean_kv_usage = 0;  // step-weighted
};

// One fleet size tried by ReplayWithFleetSizing.
struct AutoSizeProbe {
  int replicas = 0;
  int64_t sim_time_ns = 0;
  double ttft_p99_ms = 0;
  bool keeps_up = false;
  // The probe stopped thrashing (ReplayOptions::max_preemptions_without_finish): too small a
  // fleet; sim_time_ns and ttft_p99_ms are then unknown (0).
  bool thrashed = false;
  // The probe's own report would say OVERLOADED (ReplayResult::overloaded): it does not keep up
  // even where its span and p99 TTFT pass.
  bool overloaded = false;
};

// Present when the replay ran a fleet (more than one replica, or FleetConfig::auto_replicas).
struct FleetSummary {
  int replicas = 1;
  std::string router;
  double overlap_weight = 0;  // kv_aware routers only
  std::vector<ReplicaSummary> per_replica;
  double imbalance = 0;  // max / mean requests per replica (1 = perfectly even)
  // FleetConfig::auto_replicas: the smallest fleet with sim_time <= 1.1 x trace span and p99 TTFT
  // within the SLO, and every size tried, in the order tried.
  bool auto_sized = false;
  double ttft_slo_ms = 0;
  int64_t trace_span_ns = 0;  // first to last arrival
  std::vector<AutoSizeProbe> probes;
  // Routers with a cache view: its kind (RouterViewConfig::kind); "" for the others.
  std::string router_view;
  // With ReplayOptions::check_invariants: lookups on the fleet's exact index verified equal to
  // the replicas' own lookups.
  int64_t router_index_checks = 0;
  // Routing regret, summed over arrivals: for each request, the hit the best replica's lookup
  // would have given at arrival minus the hit the chosen replica's would (both on the exact
  // view); and the sum of the best hits, so the regret reads as a share of what was there.
  int64_t routing_regret_tokens = 0;
  int64_t best_replica_hit_tokens = 0;
  int64_t requests_with_regret = 0;
  // Requests the router's rule could not place and what it did with them (the router's
  // fallback); 0 and "" when it placed every one.
  int64_t router_fallback_requests = 0;
  std::string router_fallback;
};

// A new counter here is listed once in ForEachMergedCounter, which MergeCounters (the fleet's
// sum over replicas) follows.
struct ReplayResult {
  std::string policy;
  KvPlan plan;
  int64_t requests = 0;  // requests read from the trace
  int64_t finished_requests = 0;
  // Requests not served: the prompt exceeds max_model_len (vLLM rejects them at input), or the
  // request cannot fit in the whole KV cache (vLLM would wait forever).
  int64_t skipped_prompt_too_long = 0;
  int64_t skipped_does_not_fit = 0;
  int64_t skipped_empty_prompt = 0;
  int64_t out_of_order_arrivals = 0;  // arrivals earlier than the previous one (clamped)
  // An interrupted replay (ReplayOptions::interrupt): the counters cover what was simulated up
  // to the signal; requests read but not finished by then are counted here (their per-request
  // records say "interrupted"), so finished + skipped + interrupted = requests.
  bool partial = false;
  int interrupt_signal = 0;  // the signal's number
  // The trace's reader said it has no prefix identity (TraceReader::has_prefix_identity): the
  // hit rates below are 0 by construction, not a finding.
  bool trace_has_prefix_identity = true;
  int64_t interrupted_requests = 0;

  PrefixCacheStats prefix_cache;
  // vLLM's logged "Prefix cache hit rate": the last hit_rate_window_requests admissions.
  double recent_hit_rate = 0;
  int64_t recent_window_requests = 0;
  // PrefixHit::alignment_loss_tokens summed over non-preempted admissions: the lookup at the hash
  // granularity H minus the hit at A. It sees only loss at lookup time; in hybrid models the
  // cache is itself A-aligned (caching rounds down to S, mamba states sit on A boundaries), so
  // there it is usually 0 and the cost of A shows as a lower hit rate instead.
  int64_t alignment_loss_tokens = 0;
  int64_t preempted_alignment_loss_tokens = 0;  // preempted re-admissions
  // Where the cost of A does show in hybrid models: per finished request, the computed tokens
  // that the finest prefix-cacheable group could have published at its own block boundary but
  // that the hybrid round-down to S (docs/semantics.md §10.2) kept out of the cache:
  // round_down(n, B_min) - round_down(n, S) with n = computed tokens at the finish (H instead of S
  // with partial hits). 0 for unitary plans and whenever S == B_min.
  int64_t unpublished_alignment_tokens = 0;
  // PrefixHit::lost_to_alignment_tokens summed over non-preempted admissions: the hit a shadow
  // index would give (every computed block published at the finest group block size, never
  // rounded to S) minus the real hit. What users mean by "the prefix lost to the LCM".
  int64_t lost_to_alignment_tokens = 0;
  // Its per-request distribution over served requests (first admission): tokens lost -> number
  // of requests. Exact and small (losses are multiples of a block size); kept whether or not
  // per-request records are.
  std::map<int64_t, int64_t> lost_to_alignment_requests;
  // Why admissions missed: their tokens split into causes (docs/design.md §7).
  MissCauseStats miss_causes;
  int64_t evicted_blocks = 0;
  int64_t cached_blocks = 0;
  int64_t preemptions = 0;
  SpecDecodeStats spec_decode;
  OffloadStats offload;  // enabled only with kv_offloading_size

  int64_t num_steps = 0;
  int64_t prompt_tokens = 0;    // of served requests
  int64_t output_tokens = 0;    // generated
  int64_t computed_tokens = 0;  // tokens run through the model (prefill + decode + drafts)
  int64_t max_running = 0;      // peak batch size (requests)
  double mean_kv_usage = 0;     // step-weighted KV cache usage

  LatencySummary ttft, tpot, e2e;
  int64_t sim_time_ns = 0;  // first arrival to last finish
  // The simulated steps' durations summed (a fleet: over its replicas), and the part of it the
  // cost model spends in attention kernels (the measured model; 0 for the others).
  int64_t step_time_ns = 0;
  int64_t kernel_time_ns = 0;
  int64_t trace_span_ns = 0;  // first to last arrival
  // The engine fell behind the trace: the replay ran past the last arrival by more than 60 s, or
  // the median request waited more than 60 s for its first token (fleet.cc, IsOverloaded).
  // Requests then queue, and the hit rate reflects the queue and its preemptions as much as the
  // block-size policy.
  bool overloaded = false;
  double requests_per_s = 0, prompt_tokens_per_s = 0, output_tokens_per_s = 0;  // simulated
  double wall_time_s = 0;  // host time of the replay (not deterministic)

  std::vector<RequestRecord> per_request;  // in trace order, if ReplayOptions::record_requests
  std::optional<FleetSummary> fleet;

  // How a counter combines over the replicas of a fleet.
  enum class CounterMerge { kSum, kMax };
  // Calls f(name, &ReplayResult::field, merge) for each counter that a fleet combines over its
  // replicas, each listed once: the int64_t counts, prefix_cache and spec_decode (their own
  // Merge), lost_to_alignment_requests (summed per key). Not listed, because the fleet derives
  // them from its own view or from latency sketches: policy, plan, out_of_order_arrivals,
  // partial, interrupt_signal, trace_has_prefix_identity (read off the trace), recent_*,
  // mean_kv_usage, latencies,
  // times, rates, overloaded, per_request, fleet.
  template <typename F>
  static void ForEachMergedCounter(F&& f) {
    constexpr CounterMerge kSum = CounterMerge::kSum;
    f("requests", &ReplayResult::requests, kSum);
    f("finished_requests", &ReplayResult::finished_requests, kSum);
    f("interrupted_requests", &ReplayResult::interrupted_requests, kSum);
    f("skipped_prompt_too_long", &ReplayResult::skipped_prompt_too_long, kSum);
    f("skipped_does_not_fit", &ReplayResult::skipped_does_not_fit, kSum);
    f("skipped_empty_prompt", &ReplayResult::skipped_empty_prompt, kSum);
    f("prefix_cache", &ReplayResult::prefix_cache, kSum);
    f("alignment_loss_tokens", &ReplayResult::alignment_loss_tokens, kSum);
    f("preempted_alignment_loss_tokens", &ReplayResult::preempted_alignment_loss_tokens, kSum);
    f("unpublished_alignment_tokens", &ReplayResult::unpublished_alignment_tokens, kSum);
    f("lost_to_alignment_tokens", &ReplayResult::lost_to_alignment_tokens, kSum);
    f("lost_to_alignment_requests", &ReplayResult::lost_to_alignment_requests, kSum);
    f("miss_causes", &ReplayResult::miss_causes, kSum);
    f("evicted_blocks", &ReplayResult::evicted_blocks, kSum);
    f("cached_blocks", &ReplayResult::cached_blocks, kSum);
    f("preemptions", &ReplayResult::preemptions, kSum);
    f("spec_decode", &ReplayResult::spec_decode, kSum);
    f("offload", &ReplayResult::offload, kSum);
    f("num_steps", &ReplayResult::num_steps, kSum);
    f("step_time_ns", &ReplayResult::step_time_ns, kSum);
    f("kernel_time_ns", &ReplayResult::kernel_time_ns, kSum);
    f("prompt_tokens", &ReplayResult::prompt_tokens, kSum);
    f("output_tokens", &ReplayResult::output_tokens, kSum);
    f("computed_tokens", &ReplayResult::computed_tokens, kSum);
    f("max_running", &ReplayResult::max_running, CounterMerge::kMax);
  }
  // Combines another replica's counters (ForEachMergedCounter) into these; the rest is left
  // alone.
  void MergeCounters(const ReplayResult& other);
};

}  // namespace prefixsim

#endif  // PREFIXSIM_ENGINE_H_
