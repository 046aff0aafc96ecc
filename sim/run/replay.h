// Running one replay the way `prefixsim replay`, `compare` and the grid's points do: open the
// trace (parsed ahead on a second thread), replay it under a plan, with or without a fleet.
// Prints nothing: progress goes to a callback, errors come back as a status.
#ifndef PREFIXSIM_SIM_RUN_REPLAY_H_
#define PREFIXSIM_SIM_RUN_REPLAY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prefixsim/engine.h"
#include "prefixsim/trace.h"
#include "sim/run/model_engine.h"

namespace prefixsim::run {

// Everything one replay runs with, as the replay flags (and a grid point's keys) set it.
struct ReplayConfig {
  ModelEngineOptions model_engine;
  std::string trace;
  TraceOptions trace_options;
  uint64_t seed = 0;
  double active_params = 0;
  bool check_invariants = false;
  int64_t check_invariants_every = 0;
  bool no_wall_time = false;
  bool no_miss_causes = false;  // ReplayOptions::attribute_misses off
  // ReplayOptions::miss_record_bytes, in MiB (0: no bound).
  int64_t miss_causes_memory_mb = ReplayOptions{}.miss_record_bytes >> 20;
  bool no_progress = false;  // read by the CLI's progress printer
  bool no_fast_path = false;
  int64_t hit_rate_window = 1000;
  int threads = 0;  // ReplayOptions::threads (0: the machine's cores)
  // ReplayOptions' thrashing limits (-1: the engine's default).
  int64_t max_preemptions_without_finish = ReplayOptions{}.max_preemptions_without_finish;
  int64_t max_steps_without_finish = -1;
  // Not a flag: ReplayTuning::skip_teardown, for the one replay (per policy) of a command that
  // exits right after it (replay, compare). Never for sweeps: their points would pile up.
  bool skip_teardown = false;
  // Not a flag: ReplayOptions::kv_event_sink (the KV event outputs, sim/events).
  std::function<KvEventSink*(int replica)> kv_event_sink;
  // Not a flag: opens the trace instead of OpenTrace(trace, ...) (the Python module's traces
  // given as records, sim/trace/trace_source.h); empty: `trace` is a path. Called once per
  // replay, with the options OpenTrace would get.
  std::function<absl::StatusOr<std::unique_ptr<TraceReader>>(const TraceOptions&)> open_trace;
};

// Opens the trace and replays it under `plan` (one thread; safe to call from several threads
// with different plans). `interrupt` (may be null): a replay stops at its next event once it
// reads non-zero, and the result is marked partial (ReplayOptions::interrupt). `progress` (may
// be empty): called as ReplayOptions::progress is.
// Per-request records: kept in ReplayResult::per_request (`keep_records`, what the HTML page
// needs), or streamed to `record_sink` in trace order as requests end (a CSV alone: memory stays
// bounded), or neither.
absl::StatusOr<ReplayResult> RunReplay(const ReplayConfig& config, const ModelSpec& model,
                                       const EngineConfig& engine, const KvPlan& plan,
                                       const std::atomic<int>* interrupt,
                                       std::function<void(const ReplayProgress&)> progress = {},
                                       bool keep_records = true,
                                       std::function<void(const RequestRecord&)> record_sink = {});

}  // namespace prefixsim::run

#endif  // PREFIXSIM_SIM_RUN_REPLAY_H_
