// `prefixsim resolve`: the KV plan for a model, an engine and a block-size policy (docs/design.md
// §4.1).
#include <iostream>

#include "absl/strings/str_join.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/policy.h"
#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/cli/exit_codes.h"
#include "sim/plan/plan_format.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {
namespace {

struct ResolveCommandOptions {
  ModelEngineOptions model_engine;
  std::string policy = "new";
  bool json = false;
  bool strict = false;
};

absl::Status RunResolveCommand(const ResolveCommandOptions& options, CommandOutput& out) {
  PREFIXSIM_ASSIGN_OR_RETURN(const ModelAndEngine loaded, LoadModelAndEngine(options.model_engine));
  PREFIXSIM_ASSIGN_OR_RETURN(const KvPlan plan,
                             ResolveKvPlan(loaded.model, loaded.engine, options.policy));
  // The plan is always printed; the startup memory check (docs/semantics.md §1, §6.4) is reported
  // after it, as a warning unless --strict.
  if (options.json) {
    out.out << KvPlanToJson(plan).dump(2) << "\n";
  } else {
    out.out << "model " << loaded.model.name << "   engine " << loaded.engine.source << "\n";
    out.out << FormatKvPlan(plan);
  }
  const absl::Status startup = CheckStartupMemory(plan);
  if (!startup.ok()) {
    // Not a failure of the command: the plan it was asked for is printed, and without --strict
    // the exit code says so.
    out.err << "prefixsim resolve: " << (options.strict ? "error" : "warning")
            << ": startup check failed (replay and compare refuse this plan): " << startup.message()
            << "\n";
    out.exit_code = options.strict ? kExitBadInput : kExitOk;
  }
  return absl::OkStatus();
}

}  // namespace

void AddResolveCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<ResolveCommandOptions>();
  auto* cmd = app.add_subcommand(
      "resolve", "print the KV cache plan (groups, block sizes, S, H, A, num_blocks)");
  AddModelEngineOptions(cmd, &options->model_engine);
  cmd->add_option("--policy,-p", options->policy,
                  "block-size policy: " + absl::StrJoin(RegisteredPolicyNames(), ", "))
      ->capture_default_str();
  cmd->add_flag("--json", options->json, "print the kv_plan JSON instead of the table");
  cmd->add_flag("--strict", options->strict,
                "exit 2 when vLLM's startup memory check fails (default: a warning on stderr)");
  SetCommandRun(cmd, "resolve", ctx,
                [options](CommandOutput& out) { return RunResolveCommand(*options, out); });
}

}  // namespace prefixsim::cli
