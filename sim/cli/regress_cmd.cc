// `prefixsim regress`: runs a suite (a scenario file with tolerances) and compares every point
// with a stored baseline. Exit 0: all points hold; 3: a metric moved beyond its tolerance or is
// missing; 2: bad input (suite, tolerances, baseline, flags); 1: a runtime failure.
#include <filesystem>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/cli/exit_codes.h"
#include "sim/cli/replay_common.h"
#include "sim/grid/grid.h"
#include "sim/grid/regress.h"
#include "sim/grid/sweep.h"
#include "sim/run/option_flags.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {
namespace {

inline constexpr int kExitRegressed = 3;

struct RegressCommandOptions {
  std::string suite;
  std::string baseline;
  bool update = false;
  int jobs = 0;
  std::string format = "text";
  std::string output;
};

// Loads the suite and checks everything that can be checked before its points run: the
// tolerances, the --output directory, and that there is something to compare.
absl::StatusOr<grid::Scenario> LoadSuite(const RegressCommandOptions& options) {
  PREFIXSIM_ASSIGN_OR_RETURN(grid::Scenario suite, grid::LoadScenario(options.suite));
  PREFIXSIM_RETURN_IF_ERROR(grid::CheckTolerances(suite));
  if (!options.output.empty()) {
    const std::filesystem::path parent = std::filesystem::path(options.output).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --output: ", options.output, ": no such directory ", parent.string()));
    }
  }
  if (suite.tolerances.empty() && !options.update) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.suite, ": field tolerances: missing (nothing would be compared)"));
  }
  PREFIXSIM_RETURN_IF_ERROR(grid::ValidatePoints(suite));
  return suite;
}

// The JSON summary of every point; a point's error names the suite and the point.
absl::StatusOr<std::vector<nlohmann::ordered_json>> RunSuitePoints(
    const RegressCommandOptions& options, const grid::Scenario& suite) {
  auto results = grid::RunPoints(suite, suite.points, options.jobs, /*include_wall_time=*/false);
  std::vector<nlohmann::ordered_json> summaries;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) {
      return absl::Status(results[i].status().code(),
                          absl::StrCat(options.suite, ": point ", i, " (", suite.points[i].id,
                                       "): ", results[i].status().message()));
    }
    summaries.push_back(*std::move(results[i]));
  }
  return summaries;
}

std::string FormatRegressReport(const grid::RegressReport& report, const std::string& format) {
  if (format == "markdown") return run::SpellAsFlags(grid::FormatRegressMarkdown(report));
  if (format == "junit") return run::SpellAsFlags(grid::FormatRegressJUnit(report));
  return run::SpellAsFlags(grid::FormatRegressText(report));
}

// Writes the report and the verdict; out.exit_code says whether a point regressed.
absl::Status ReportComparison(const RegressCommandOptions& options,
                              const grid::RegressReport& report, CommandOutput& out) {
  const std::string text = FormatRegressReport(report, options.format);
  // The verdict goes to stdout with the text report; a Markdown or JUnit report on stdout
  // stays a document of its own, so the verdict goes to stderr.
  const bool report_on_stdout = options.output.empty();
  std::ostream& verdict = report_on_stdout && options.format != "text" ? out.err : out.out;
  if (report_on_stdout) {
    out.out << text;
  } else {
    PREFIXSIM_RETURN_IF_ERROR(WriteOutput(options.output, text, out.out));
  }
  verdict << "regress: " << grid::RegressVerdict(report) << "\n";
  if (report.regressed) {
    verdict << "regress: if the change is intended, update the baseline and commit it: "
               "prefixsim regress --suite "
            << options.suite << " --baseline " << options.baseline << " --update\n";
  }
  out.exit_code = report.regressed ? kExitRegressed : kExitOk;
  return absl::OkStatus();
}

absl::Status RunRegressCommand(const RegressCommandOptions& options, CommandOutput& out) {
  PREFIXSIM_ASSIGN_OR_RETURN(const grid::Scenario suite, LoadSuite(options));
  PREFIXSIM_ASSIGN_OR_RETURN(const std::vector<nlohmann::ordered_json> summaries,
                             RunSuitePoints(options, suite));
  if (options.update) {
    PREFIXSIM_RETURN_IF_ERROR(WriteOutput(
        options.baseline, grid::BaselineJson(suite, summaries).dump(2) + "\n", out.out));
    out.out << "regress: baseline " << options.baseline << " updated (" << summaries.size()
            << " points)\n";
    return absl::OkStatus();
  }
  PREFIXSIM_ASSIGN_OR_RETURN(const grid::RegressReport report,
                             grid::CompareWithBaseline(suite, summaries, options.baseline));
  return ReportComparison(options, report, out);
}

}  // namespace

void AddRegressCommand(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<RegressCommandOptions>();
  auto* cmd = app.add_subcommand(
      "regress",
      "run a regression suite and compare it with its baseline under the suite's tolerances. "
      "A tolerance names a metric by a headline name (hit_rate, ttft_p99_ms, ...) or a dotted "
      "path into the replay JSON summary (lost_to_alignment_tokens, latency.ttft.p90_ms, "
      "fleet.imbalance, ...); it is {abs, rel} on both sides, with direction "
      "higher_is_better|lower_is_better for one side, or max_increase/max_decrease; a change "
      "equal to the tolerance holds. Exit 0: all hold; 3: a regression (or a metric or point "
      "missing from the baseline); 2: bad input; 1: runtime failure (docs/scenarios.md)");
  cmd->add_option("--suite,-s", o->suite, "suite: a scenario file with tolerances")->required();
  cmd->add_option("--baseline,-b", o->baseline, "baseline JSON (point id -> metrics)")->required();
  CLI::Option* update =
      cmd->add_flag("--update", o->update,
                    "rewrite the baseline with every metric of this run (keyed by dotted path)");
  cmd->add_option("--jobs,-j", o->jobs, "points run in parallel (default: cores)")
      ->check(NonNegativeNumber());
  cmd->add_option("--format", o->format,
                  "report format: text (the rows that moved, under each point's axes), markdown "
                  "(a table for a pull-request comment) or junit (JUnit XML, one testcase per "
                  "point x metric)")
      ->check(CLI::IsMember({"text", "markdown", "junit"}))
      ->excludes(update);
  cmd->add_option("--output,-o", o->output, "write the report to FILE instead of stdout")
      ->excludes(update);
  SetCommandRun(cmd, "regress", ctx,
                [o](CommandOutput& out) { return RunRegressCommand(*o, out); });
}

}  // namespace prefixsim::cli
