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
#include "sim/cli/option_flags.h"
#include "sim/cli/replay_common.h"
#include "sim/grid/grid.h"
#include "sim/grid/regress.h"
#include "sim/grid/sweep.h"
#include "sim/util/status_macros.h"

namespace prefixsim::cli {

inline constexpr int kExitRegressed = 3;

void AddRegressCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string suite;
    std::string baseline;
    bool update = false;
    int jobs = 0;
    std::string format = "text";
    std::string output;
  };
  auto o = std::make_shared<Options>();
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
  cmd->callback([o, &ctx] {
    auto suite = grid::LoadScenario(o->suite);
    if (!suite.ok()) {
      ctx.exit_code = ReportError("regress", suite.status());
      return;
    }
    if (absl::Status s = grid::CheckTolerances(*suite); !s.ok()) {
      ctx.exit_code = ReportError("regress", s);
      return;
    }
    if (!o->output.empty()) {
      // Found before the points run, not after.
      const std::filesystem::path parent = std::filesystem::path(o->output).parent_path();
      if (!parent.empty() && !std::filesystem::is_directory(parent)) {
        ctx.exit_code = ReportError(
            "regress", absl::InvalidArgumentError(absl::StrCat(
                           "flag --output: ", o->output, ": no such directory ", parent.string())));
        return;
      }
    }
    if (suite->tolerances.empty() && !o->update) {
      ctx.exit_code = ReportError(
          "regress", absl::InvalidArgumentError(absl::StrCat(
                         o->suite, ": field tolerances: missing (nothing would be compared)")));
      return;
    }
    if (absl::Status valid = grid::ValidatePoints(*suite); !valid.ok()) {
      ctx.exit_code = ReportError("regress", valid);
      return;
    }
    auto results = grid::RunPoints(*suite, suite->points, o->jobs, /*include_wall_time=*/false);
    std::vector<nlohmann::ordered_json> summaries;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].ok()) {
        ctx.exit_code = ReportError(
            "regress", absl::Status(results[i].status().code(),
                                    absl::StrCat(o->suite, ": point ", i, " (", suite->points[i].id,
                                                 "): ", results[i].status().message())));
        return;
      }
      summaries.push_back(*std::move(results[i]));
    }
    if (o->update) {
      absl::Status s =
          WriteOutput(o->baseline, grid::BaselineJson(*suite, summaries).dump(2) + "\n");
      if (!s.ok()) {
        ctx.exit_code = ReportError("regress", s);
        return;
      }
      std::cout << "regress: baseline " << o->baseline << " updated (" << summaries.size()
                << " points)\n";
      ctx.exit_code = kExitOk;
      return;
    }
    auto report = grid::CompareWithBaseline(*suite, summaries, o->baseline);
    if (!report.ok()) {
      ctx.exit_code = ReportError("regress", report.status());
      return;
    }
    std::string text;
    if (o->format == "markdown") {
      text = grid::FormatRegressMarkdown(*report);
    } else if (o->format == "junit") {
      text = grid::FormatRegressJUnit(*report);
    } else {
      text = grid::FormatRegressText(*report);
    }
    text = SpellForCli(text);
    // The verdict goes to stdout with the text report; a Markdown or JUnit report on stdout
    // stays a document of its own, so the verdict goes to stderr.
    const bool report_on_stdout = o->output.empty();
    std::ostream& verdict = report_on_stdout && o->format != "text" ? std::cerr : std::cout;
    if (report_on_stdout) {
      std::cout << text;
    } else if (absl::Status s = WriteOutput(o->output, text); !s.ok()) {
      ctx.exit_code = ReportError("regress", s);
      return;
    }
    verdict << "regress: " << grid::RegressVerdict(*report) << "\n";
    if (report->regressed) {
      verdict << "regress: if the change is intended, update the baseline and commit it: "
                 "prefixsim regress --suite "
              << o->suite << " --baseline " << o->baseline << " --update\n";
    }
    ctx.exit_code = report->regressed ? kExitRegressed : kExitOk;
  });
}

}  // namespace prefixsim::cli
