// Subcommands of the prefixsim CLI. Each lives in its own file and registers itself on the app.
#ifndef PREFIXSIM_SIM_CLI_COMMANDS_H_
#define PREFIXSIM_SIM_CLI_COMMANDS_H_

#include "CLI/CLI.hpp"

namespace prefixsim::cli {

// Shared by all subcommands: the callback stores its exit code here (docs/design.md §4.1).
struct CommandContext {
  int exit_code = 0;
};

void AddResolveCommand(CLI::App& app, CommandContext& ctx);
void AddReplayCommand(CLI::App& app, CommandContext& ctx);
void AddCompareCommand(CLI::App& app, CommandContext& ctx);
void AddAnalyzeCommand(CLI::App& app, CommandContext& ctx);
void AddGenTraceCommand(CLI::App& app, CommandContext& ctx);
void AddSweepCommand(CLI::App& app, CommandContext& ctx);
void AddRegressCommand(CLI::App& app, CommandContext& ctx);
void AddKernelBenchCommand(CLI::App& app, CommandContext& ctx);
void AddParityCommand(CLI::App& app, CommandContext& ctx);

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_COMMANDS_H_
