// Subcommands of the prefixsim CLI. Each lives in its own file: an Add*Command that registers its
// flags, and a Run function that does the work and returns a Status; RunCommand turns that Status
// into stderr text and an exit code, for every command alike (docs/design.md §4.1).
#ifndef PREFIXSIM_SIM_CLI_COMMANDS_H_
#define PREFIXSIM_SIM_CLI_COMMANDS_H_

#include <functional>
#include <ostream>
#include <string_view>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "sim/cli/exit_codes.h"

namespace prefixsim::cli {

// Shared by all subcommands: the callback stores its exit code here (docs/design.md §4.1).
struct CommandContext {
  int exit_code = 0;
};

// Where a command writes, and what it reports besides its Status.
struct CommandOutput {
  std::ostream& out;  // the process's stdout
  std::ostream& err;  // the process's stderr
  // The exit code of a run that returns OK. Not every outcome worth a non-zero exit is an error:
  // regress's regressions (3), resolve --strict's failed startup check (2), an interrupted run
  // (130), the exit status of kernel-bench's measuring tool.
  int exit_code = kExitOk;
};

using CommandRun = std::function<absl::Status(CommandOutput&)>;

// Runs `run` on stdout and stderr and returns the process's exit code: out.exit_code if it returns
// OK, else the code of its Status, whose message ReportError (sim/cli/common.h) prints.
int RunCommand(std::string_view command, const CommandRun& run);

// Makes RunCommand(command, run) the callback of `cmd`, its exit code stored in `ctx`.
void SetCommandRun(CLI::App* cmd, std::string_view command, CommandContext& ctx, CommandRun run);

void AddResolveCommand(CLI::App& app, CommandContext& ctx);
void AddReplayCommand(CLI::App& app, CommandContext& ctx);
void AddCompareCommand(CLI::App& app, CommandContext& ctx);
void AddAnalyzeCommand(CLI::App& app, CommandContext& ctx);
void AddGenTraceCommand(CLI::App& app, CommandContext& ctx);
void AddSweepCommand(CLI::App& app, CommandContext& ctx);
void AddRegressCommand(CLI::App& app, CommandContext& ctx);
void AddKernelBenchCommand(CLI::App& app, CommandContext& ctx);
void AddParityCommand(CLI::App& app, CommandContext& ctx);
void AddTuneCommand(CLI::App& app, CommandContext& ctx);

}  // namespace prefixsim::cli

#endif  // PREFIXSIM_SIM_CLI_COMMANDS_H_
