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

void AddResolveCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    ModelEngineOptions model_engine;
    std::string policy = "new";
    bool json = false;
    bool strict = false;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "resolve", "print the KV cache plan (groups, block sizes, S, H, A, num_blocks)");
  AddModelEngineOptions(cmd, &options->model_engine);
  cmd->add_option("--policy,-p", options->policy,
                  "block-size policy: " + absl::StrJoin(RegisteredPolicyNames(), ", "))
      ->capture_default_str();
  cmd->add_flag("--json", options->json, "print the kv_plan JSON instead of the table");
  cmd->add_flag("--strict", options->strict,
                "exit 2 when vLLM's startup memory check fails (default: a warning on stderr)");
  cmd->callback([options, &ctx] {
    auto loaded = LoadModelAndEngine(options->model_engine);
    if (!loaded.ok()) {
      ctx.exit_code = ReportError("resolve", loaded.status());
      return;
    }
    auto plan = ResolveKvPlan(loaded->model, loaded->engine, options->policy);
    if (!plan.ok()) {
      ctx.exit_code = ReportError("resolve", plan.status());
      return;
    }
    // The plan is always printed; the startup memory check (docs/semantics.md §1, §6.4) is reported
    // after it, as a warning unless --strict.
    if (options->json) {
      std::cout << KvPlanToJson(*plan).dump(2) << "\n";
    } else {
      std::cout << "model " << loaded->model.name << "   engine " << loaded->engine.source << "\n";
      std::cout << FormatKvPlan(*plan);
    }
    const absl::Status startup = CheckStartupMemory(*plan);
    if (!startup.ok()) {
      std::cerr << "prefixsim resolve: " << (options->strict ? "error" : "warning")
                << ": startup check failed (replay and compare refuse this plan): "
                << startup.message() << "\n";
      ctx.exit_code = options->strict ? kExitBadInput : kExitOk;
      return;
    }
    ctx.exit_code = kExitOk;
  });
}

}  // namespace prefixsim::cli
