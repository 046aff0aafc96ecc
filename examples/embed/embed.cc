// Replays a trace through one engine with the public API only and prints the JSON report that
// `prefixsim replay --json - --no-wall-time` prints for the same inputs (docs/embedding.md).
//
//   embed <model preset or JSON> <engine preset or JSON> <trace> [policy]
//
// Presets are found like the binary finds them: $PREFIXSIM_CONFIG_DIR, then the installed
// share/prefixsim next to this program's bin/ (none here: see docs/embedding.md), then the source
// tree prefixsim was built from.
#include <iostream>
#include <memory>
#include <string>

#include "prefixsim/engine.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "prefixsim/replay.h"
#include "prefixsim/report.h"
#include "prefixsim/trace.h"

namespace {

int Fail(const absl::Status& status) {
  std::cerr << "embed: " << status.message() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::cerr << "usage: embed <model> <engine> <trace> [policy]\n";
    return 2;
  }
  const std::string trace_path = argv[3];
  const std::string policy = argc == 5 ? argv[4] : "new";

  // The engine first: its tensor parallelism and KV dtype shape the model's layers.
  absl::StatusOr<prefixsim::EngineConfig> engine = prefixsim::LoadEngine(argv[2]);
  if (!engine.ok()) return Fail(engine.status());
  prefixsim::ModelLoadOptions load;
  load.tensor_parallel_size = engine->tensor_parallel_size;
  load.kv_dtype = engine->kv_cache_dtype;
  absl::StatusOr<prefixsim::ModelSpec> model = prefixsim::LoadModel(argv[1], load);
  if (!model.ok()) return Fail(model.status());

  absl::StatusOr<prefixsim::KvPlan> plan = prefixsim::ResolveKvPlan(*model, *engine, policy);
  if (!plan.ok()) return Fail(plan.status());
  if (absl::Status s = prefixsim::CheckStartupMemory(*plan); !s.ok()) return Fail(s);

  // A fleet with auto-sizing replays the trace several times, so the replay opens it itself.
  const prefixsim::TraceOpener open_trace =
      [&]() -> absl::StatusOr<std::unique_ptr<prefixsim::TraceReader>> {
    return prefixsim::OpenTrace(trace_path, prefixsim::TraceOptions{});
  };
  prefixsim::ReplayOptions options;
  options.record_requests = false;  // the JSON summary does not need per-request records
  absl::StatusOr<prefixsim::ReplayResult> result =
      prefixsim::ReplayWithFleetSizing(*plan, *model, *engine, open_trace, options);
  if (!result.ok()) return Fail(result.status());

  prefixsim::ReportOptions report;
  report.include_wall_time = false;  // byte-identical from run to run
  std::cout << prefixsim::ReplayReportJson(*result, report);
  return 0;
}
