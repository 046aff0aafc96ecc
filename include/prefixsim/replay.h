// Replaying a trace: one engine, or a fleet of them behind a router, and the search for the
// smallest fleet that keeps up. The inputs are a KvPlan (kv_plan.h), a ModelSpec (model.h), an
// EngineConfig (engine_config.h) and a trace (trace.h); the result and its options are in
// engine.h, its reports in report.h.
#ifndef PREFIXSIM_REPLAY_H_
#define PREFIXSIM_REPLAY_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "prefixsim/engine.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "prefixsim/trace.h"

namespace prefixsim {

// Replays the trace through engine.fleet.replicas engines behind engine.fleet.router (one
// replica is a single engine and reports no FleetSummary). Errors: bad trace records, bad
// acceptance, cost-model or router configuration (InvalidArgument / NotFound), or an engine
// that cannot make progress with this configuration (FailedPrecondition, e.g.
// max_num_batched_tokens below the mamba block size). REQUIRES: !engine.fleet.auto_replicas.
absl::StatusOr<ReplayResult> Replay(const KvPlan& plan, const ModelSpec& model,
                                    const EngineConfig& engine, TraceReader& trace,
                                    const ReplayOptions& options = {});

// Opens a fresh reader of the same trace (the fleet search replays it several times).
using TraceOpener = std::function<absl::StatusOr<std::unique_ptr<TraceReader>>()>;

// Replay with engine.fleet.auto_replicas honoured: the smallest fleet that keeps up, found by
// doubling then bisection (FleetSummary::probes lists every size tried); otherwise Replay.
absl::StatusOr<ReplayResult> ReplayWithFleetSizing(const KvPlan& plan, const ModelSpec& model,
                                                   const EngineConfig& engine,
                                                   const TraceOpener& open_trace,
                                                   const ReplayOptions& options = {});

}  // namespace prefixsim

#endif  // PREFIXSIM_REPLAY_H_
