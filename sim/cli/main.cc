#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "sim/cli/commands.h"
#include "sim/cli/exit_codes.h"
#include "sim/util/did_you_mean.h"
#include "sim/util/status_macros.h"

namespace {

// The subcommands of `app` that a user can name (option groups are unnamed subcommands).
std::vector<std::string> SubcommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (!sub->get_name().empty()) names.push_back(sub->get_name());
  }
  return names;
}

// Every flag `cmd` takes, its option groups' included ("--kv-cache-bytes", "-m").
void CollectFlags(const CLI::App& cmd, std::vector<std::string>* out) {
  for (const CLI::Option* opt : cmd.get_options()) {
    for (const std::string& l : opt->get_lnames()) out->push_back("--" + l);
    for (const std::string& s : opt->get_snames()) out->push_back("-" + s);
  }
  for (const CLI::App* sub : cmd.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name().empty()) CollectFlags(*sub, out);
  }
}

// Arguments the command does not take, one line each in place of CLI11's list: the closest flag
// or subcommand of the command being parsed (the innermost one named on the command line). A
// word right after an unknown flag is that flag's value ("--polcy new"), not a second error.
void ReportExtras(const CLI::App& app, int argc, char** argv) {
  const CLI::App* cmd = &app;
  while (true) {
    std::vector<CLI::App*> parsed = cmd->get_subcommands();
    if (parsed.empty()) break;
    cmd = parsed.front();
  }
  std::vector<std::string> flags;
  CollectFlags(*cmd, &flags);
  const std::vector<std::string> subcommands = SubcommandNames(*cmd);
  const std::string where = cmd == &app ? "prefixsim" : "prefixsim " + cmd->get_name();
  std::vector<std::string> extras = app.remaining(/*recurse=*/true);
  auto take = [&](const std::string& arg) {
    auto it = std::find(extras.begin(), extras.end(), arg);
    if (it == extras.end()) return false;
    extras.erase(it);
    return true;
  };
  bool after_unknown_flag = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool is_flag = arg.size() > 1 && arg[0] == '-';
    if (!take(arg)) {
      after_unknown_flag = false;
      continue;
    }
    if (!is_flag && after_unknown_flag) {
      after_unknown_flag = false;
      continue;
    }
    after_unknown_flag = is_flag && arg.find('=') == std::string::npos;
    // "--flag=value": the flag's name alone.
    const std::string name = is_flag ? arg.substr(0, arg.find('=')) : arg;
    std::cerr << where << ": unknown " << (is_flag ? "flag" : "argument") << " '" << name << "'"
              << prefixsim::DidYouMean(name, is_flag ? flags : subcommands) << " (" << where
              << " --help lists " << (is_flag ? "its flags" : "what it takes") << ")\n";
  }
}

}  // namespace

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
  prefixsim::cli::AddKernelBenchCommand(app, ctx);
  prefixsim::cli::AddParityCommand(app, ctx);
  prefixsim::cli::AddTuneCommand(app, ctx);
  // An unknown subcommand: CLI11 would only say that one is required.
  if (argc > 1 && argv[1][0] != '-') {
    const std::vector<std::string> commands = SubcommandNames(app);
    const std::string name = argv[1];
    if (std::find(commands.begin(), commands.end(), name) == commands.end()) {
      std::string list;
      for (const std::string& c : commands) list += (list.empty() ? "" : ", ") + c;
      std::cerr << "prefixsim: unknown command '" << name << "'"
                << prefixsim::DidYouMean(name, commands) << " (commands: " << list << ")\n";
      return prefixsim::kExitBadInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      ReportExtras(app, argc, argv);
      return prefixsim::kExitBadInput;
    }
    int rc = app.exit(e);
    // CLI11 uses 0 for --help/--version and 1..n for usage errors; usage errors are exit 2.
    return rc == 0 ? 0 : prefixsim::kExitBadInput;
  }
  return ctx.exit_code;
}
