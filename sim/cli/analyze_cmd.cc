// Placeholder until the subcommand is implemented; it says so and fails.
#include <iostream>

#include "sim/cli/commands.h"
#include "prefixsim/status.h"

namespace prefixsim::cli {

void AddAnalyzeCommand(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("analyze", "(not implemented yet)");
  cmd->allow_extras();
  cmd->callback([&ctx] {
    std::cerr << "prefixsim analyze: not implemented yet\n";
    ctx.exit_code = kExitRuntimeFailure;
  });
}

}  // namespace prefixsim::cli
