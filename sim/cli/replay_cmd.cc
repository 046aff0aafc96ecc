// `prefixsim replay`: one simulation of a trace served by one engine (DESIGN §4.1, §4.5).
#include <iostream>
#include <memory>
#include <sstream>

#include "absl/strings/str_join.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/policy.h"
#include "prefixsim/status.h"
#include "sim/cli/commands.h"
#include "sim/cli/input_checks.h"
#include "sim/cli/replay_common.h"
#include "sim/cost/cost_model.h"
#include "sim/report/report.h"
#include "sim/spec/acceptance_model.h"

namespace prefixsim::cli {

void AddReplayCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    ReplayCliOptions replay;
    std::string policy = "new";
    std::string json_path;
    std::string csv_path;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "replay",
      "replay a trace through one simulated vLLM engine: prefix-cache hit rate, alignment loss, "
      "latency");
  cmd->footer("Acceptance models (speculative.acceptance.model): " +
              absl::StrJoin(RegisteredAcceptanceModels(), ", ") +
              "\nCost models (cost_model.kind): " + absl::StrJoin(RegisteredCostModels(), ", ") +
              "; GPU presets: " + absl::StrJoin(GpuPresetNames(), ", "));
  AddReplayCliOptions(cmd, &options->replay);
  cmd->add_option("--policy,-p", options->policy,
                  "block-size policy: " + absl::StrJoin(RegisteredPolicyNames(), ", "))
      ->capture_default_str();
  cmd->add_option("--json", options->json_path, "write the JSON summary here (- = stdout)");
  cmd->add_option("--csv", options->csv_path, "write the per-request CSV here (- = stdout)");
  cmd->callback([options, &ctx] {
    if (absl::Status s = CheckTraceInput(options->replay.trace, options->replay.trace_options);
        !s.ok()) {
      ctx.exit_code = ReportError("replay", s);
      return;
    }
    auto loaded = LoadModelAndEngine(options->replay.model_engine);
    if (!loaded.ok()) {
      ctx.exit_code = ReportError("replay", loaded.status());
      return;
    }
    auto plan = ResolvePlanForServing(loaded->model, loaded->engine, options->policy);
    if (!plan.ok()) {
      ctx.exit_code = ReportError("replay", plan.status());
      return;
    }
    auto result = RunReplay(options->replay, loaded->model, loaded->engine, *plan, "replay");
    if (!result.ok()) {
      ctx.exit_code = ReportError("replay", result.status());
      return;
    }
    const bool wall = !options->replay.no_wall_time;
    // With --json - or --csv - stdout carries the machine-readable output only.
    if (options->json_path != "-" && options->csv_path != "-") {
      std::cout << "model " << loaded->model.name << "   engine " << loaded->engine.source
                << "   trace " << options->replay.trace << "\n"
                << FormatReplaySummary(*result, wall);
    }
    if (!options->json_path.empty()) {
      ReportOptions report;
      report.include_wall_time = wall;
      absl::Status s =
          WriteTextFile(options->json_path, ReplayResultToJson(*result, report).dump(2) + "\n");
      if (!s.ok()) {
        ctx.exit_code = ReportError("replay", s);
        return;
      }
    }
    if (!options->csv_path.empty()) {
      std::ostringstream csv;
      WriteRequestsCsv(*result, csv);
      absl::Status s = WriteTextFile(options->csv_path, csv.str());
      if (!s.ok()) {
        ctx.exit_code = ReportError("replay", s);
        return;
      }
    }
    ctx.exit_code = kExitOk;
  });
}

}  // namespace prefixsim::cli
