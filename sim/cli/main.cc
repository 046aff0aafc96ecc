#include <iostream>

#include "CLI/CLI.hpp"
#include "prefixsim/status.h"
#include "sim/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "prefixsim: trace-driven simulator of prefix-cache hit rates in LLM serving engines with "
      "hybrid attention"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "prefixsim 0.1.0");
  prefixsim::cli::CommandContext ctx;
  prefixsim::cli::AddResolveCommand(app, ctx);
  prefixsim::cli::AddReplayCommand(app, ctx);
  prefixsim::cli::AddCompareCommand(app, ctx);
  prefixsim::cli::AddAnalyzeCommand(app, ctx);
  prefixsim::cli::AddGenTraceCommand(app, ctx);
  prefixsim::cli::AddSweepCommand(app, ctx);
  prefixsim::cli::AddRegressCommand(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    // CLI11 uses 0 for --help/--version and 1..n for usage errors; usage errors are exit 2.
    return rc == 0 ? 0 : prefixsim::kExitBadInput;
  }
  return ctx.exit_code;
}
