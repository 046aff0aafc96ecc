// Options and helpers shared by `prefixsim replay` and `prefixsim compare`.
#ifndef PREFIXSIM_SIM_CLI_REPLAY_COMMON_H_
#define PREFIXSIM_SIM_CLI_REPLAY_COMMON_H_

#include <cstdint>
#include <functional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "prefixsim/engine.h"
#include "prefixsim/trace.h"
#include "sim/cli/common.h"

namespace prefixsim::cli {

struct ReplayCliOptions {
  ModelEngineOptions model_engine;
  std::string trace;
  TraceOptions trace_options;
  uint64_t seed = 0;
  double active_params = 0;
  bool check_invariants = false;
  int64_t check_invariants_every = 0;
  bool no_wall_time = false;
  bool no_progress = false;
  bool no_fast_path = false;
  int64_t hit_rate_window = 1000;
  // ReplayOptions' thrashing limits (-1: the engine's default).
  int64_t max_preemptions_without_finish = ReplayOptions{}.max_preemptions_without_finish;
  int64_t max_steps_without_finish = -1;
  // Not a flag: ReplayTuning::skip_teardown, for the one replay (per policy) of a command that
  // exits right after it (replay, compare). Never for sweeps: their points would pile up.
  bool skip_teardown = false;
};

// Adds --trace, --model/--engine and the engine overrides, trace shaping, --seed, ...
void AddReplayCliOptions(CLI::App* cmd, ReplayCliOptions* options);

// Opens the trace and replays it under `plan` (one thread; safe to call from several threads
// with different plans). `progress_label` non-empty: progress on stderr once the run has lasted a
// second: a line rewritten in place on a terminal, otherwise a line every 10 s (so that a CI log
// shows a long run is alive).
// Per-request records: kept in ReplayResult::per_request (`keep_records`, what --html needs), or
// streamed to `record_sink` in trace order as requests end (--csv alone: memory stays bounded),
// or neither.
absl::StatusOr<ReplayResult> RunReplay(const ReplayCliOptions& options, const ModelSpec& model,
                                       const EngineConfig& engine, const KvPlan& plan,
                                       const std::string& progress_label, bool keep_records = true,
                                       std::function<void(const RequestRecord&)> record_sink = {});

// Writes `text` to `path` ("-" = stdout).
absl::Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_REPLAY_COMMON_H_
