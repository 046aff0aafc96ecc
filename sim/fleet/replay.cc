// The public entry points run the fleet (fleet.h) with ReplayTuning{}; ReplayWithFleetSizing's
// search is in auto_size.cc.
#include "sim/fleet/replay.h"

#include <memory>

#include "sim/fleet/fleet.h"
#include "sim/util/status_macros.h"

namespace prefixsim {

absl::StatusOr<ReplayResult> ReplayWithFleetSizing(const KvPlan& plan, const ModelSpec& model,
                                                   const EngineConfig& engine,
                                                   const TraceOpener& open_trace,
                                                   const ReplayOptions& options) {
  return ReplayWithFleetSizing(plan, model, engine, open_trace, options, ReplayTuning{});
}

absl::StatusOr<ReplayResult> Replay(const KvPlan& plan, const ModelSpec& model,
                                    const EngineConfig& engine, TraceReader& trace,
                                    const ReplayOptions& options) {
  return Replay(plan, model, engine, trace, options, ReplayTuning{});
}

absl::StatusOr<ReplayResult> Replay(const KvPlan& plan, const ModelSpec& model,
                                    const EngineConfig& engine, TraceReader& trace,
                                    const ReplayOptions& options, const ReplayTuning& tuning) {
  if (engine.fleet.auto_replicas) {
    return absl::InvalidArgumentError(
        "replicas 'auto' needs to replay the trace several times: use ReplayWithFleetSizing");
  }
  PREFIXSIM_RETURN_IF_ERROR(CheckStartupMemory(plan));
  PREFIXSIM_ASSIGN_OR_RETURN(std::unique_ptr<fleet::Fleet> f,
                             fleet::Fleet::Create(plan, model, engine, options, tuning,
                                                  engine.fleet.replicas, /*report_fleet=*/false));
  absl::StatusOr<ReplayResult> result = f->Run(trace);
  // LeakSanitizer would report what is left to the exit.
  if (tuning.skip_teardown && !kSanitizerBuild) static_cast<void>(f.release());
  return result;
}

}  // namespace prefixsim
