#include "sim/run/replay.h"

#include <memory>
#include <utility>

#include "prefixsim/kv_cache_manager.h"
#include "sim/fleet/replay.h"
#include "sim/trace/read_ahead.h"
#include "sim/util/status_macros.h"

namespace prefixsim::run {

absl::StatusOr<ReplayResult> RunReplay(const ReplayConfig& o, const ModelSpec& model,
                                       const EngineConfig& engine, const KvPlan& plan,
                                       const std::atomic<int>* interrupt,
                                       std::function<void(const ReplayProgress&)> progress,
                                       bool keep_records,
                                       std::function<void(const RequestRecord&)> record_sink) {
  TraceOptions trace_options = o.trace_options;
  trace_options.seed = o.seed;
  // The trace is parsed on a second thread, ahead of the simulation (same requests, same order),
  // which also hashes each prompt for the plan's KV managers.
  const TraceOpener open_trace = [&]() -> absl::StatusOr<std::unique_ptr<TraceReader>> {
    PREFIXSIM_ASSIGN_OR_RETURN(
        std::unique_ptr<TraceReader> reader,
        o.open_trace ? o.open_trace(trace_options) : OpenTrace(o.trace, trace_options));
    ReadAheadOptions read_ahead;
    read_ahead.prepare = [&plan](Request* r) { KvCacheManager::PrepareRequest(plan, r); };
    return ReadAhead(std::move(reader), read_ahead);
  };
  ReplayOptions options;
  options.seed = o.seed;
  options.check_invariants = o.check_invariants;
  options.check_invariants_every = o.check_invariants_every;
  options.attribute_misses = !o.no_miss_causes;
  options.miss_record_bytes = o.miss_causes_memory_mb << 20;
  options.record_requests = keep_records;
  options.record_sink = std::move(record_sink);
  options.hit_rate_window_requests = o.hit_rate_window;
  options.cost_active_params = o.active_params;
  options.interrupt = interrupt;
  ReplayTuning tuning;
  tuning.kv_fast_path = !o.no_fast_path;
  tuning.skip_teardown = o.skip_teardown;
  options.max_preemptions_without_finish = o.max_preemptions_without_finish;
  options.max_steps_without_finish = o.max_steps_without_finish;
  options.progress = std::move(progress);
  options.kv_event_sink = o.kv_event_sink;
  options.threads = o.threads;
  return ReplayWithFleetSizing(plan, model, engine, open_trace, options, tuning);
}

}  // namespace prefixsim::run
