// The replay entry points under a ReplayTuning (sim/engine/replay_tuning.h): the tests and
// benchmarks that compare the fast paths with the reference ones, and the CLI's skip_teardown.
#ifndef PREFIXSIM_SIM_FLEET_REPLAY_H_
#define PREFIXSIM_SIM_FLEET_REPLAY_H_

#include "absl/status/statusor.h"
#include "prefixsim/replay.h"
#include "sim/engine/replay_tuning.h"

namespace prefixsim {

// Replay and ReplayWithFleetSizing (prefixsim/replay.h) under `tuning`; the public overloads run
// with ReplayTuning{}.
absl::StatusOr<ReplayResult> Replay(const KvPlan& plan, const ModelSpec& model,
                                    const EngineConfig& engine, TraceReader& trace,
                                    const ReplayOptions& options, const ReplayTuning& tuning);
absl::StatusOr<ReplayResult> ReplayWithFleetSizing(const KvPlan& plan, const ModelSpec& model,
                                                   const EngineConfig& engine,
                                                   const TraceOpener& open_trace,
                                                   const ReplayOptions& options,
                                                   const ReplayTuning& tuning);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_FLEET_REPLAY_H_
