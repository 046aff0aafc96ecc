// `prefixsim regress`: runs a suite (a scenario file with tolerances) and compares every point
// with a stored baseline. Exit 0: all points hold; 3: a metric moved beyond its tolerance.
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "prefixsim/status.h"
#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/grid/grid.h"

namespace prefixsim::cli {

inline constexpr int kExitRegressed = 3;

void AddRegressCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string suite;
    std::string baseline;
    bool update = false;
    int jobs = 0;
  };
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "regress",
      "run a regression suite and compare it with its baseline under the suite's tolerances "
      "(exit 3 on a regression)");
  cmd->add_option("--suite,-s", o->suite, "suite: a scenario file with tolerances")->required();
  cmd->add_option("--baseline,-b", o->baseline, "baseline JSON (point id -> metrics)")->required();
  cmd->add_flag("--update", o->update, "rewrite the baseline with this run's metrics");
  cmd->add_option("--jobs,-j", o->jobs, "points run in parallel (default: cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([o, &ctx] {
    auto suite = grid::LoadScenario(o->suite);
    if (!suite.ok()) {
      ctx.exit_code = ReportError("regress", suite.status());
      return;
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
          grid::WriteFileAtomic(o->baseline, grid::BaselineJson(*suite, summaries).dump(2) + "\n");
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
    if (!report->rows.empty()) {
      std::cout << absl::StrFormat("%-20s %-28s %16s %16s %-18s %s\n", "point", "metric",
                                   "baseline", "now", "tolerance", "");
      for (const auto& r : report->rows) {
        std::cout << absl::StrFormat("%-20s %-28s %16s %16s %-18s %s\n", r.point, r.metric,
                                     r.baseline, r.now, r.tolerance,
                                     r.regressed ? "REGRESSED" : "ok");
      }
    }
    std::cout << "regress: " << suite->points.size() << " points, "
              << (report->regressed ? "REGRESSED" : "all within tolerance") << "\n";
    if (report->regressed) {
      std::cout << "regress: if the change is intended, update the baseline and commit it: "
                   "prefixsim regress --suite "
                << o->suite << " --baseline " << o->baseline << " --update\n";
    }
    ctx.exit_code = report->regressed ? kExitRegressed : kExitOk;
  });
}

}  // namespace prefixsim::cli
