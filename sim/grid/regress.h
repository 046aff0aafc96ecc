// `prefixsim regress` (docs/scenarios.md): the metrics a suite's tolerances may name, the
// comparison of a suite's points with a stored baseline, and the report in text, Markdown or
// JUnit XML.
#ifndef PREFIXSIM_SIM_GRID_REGRESS_H_
#define PREFIXSIM_SIM_GRID_REGRESS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/grid/grid.h"

namespace prefixsim::grid {

// Metric names: the dotted path to a number of the replay JSON summary (docs/design.md §4.5), e.g.
// `prefix_cache.hit_rate`, `lost_to_alignment_tokens`, `latency.ttft.p99_ms`,
// `fleet.imbalance`; the headline names of results.csv (`hit_rate`, `ttft_p99_ms`, ...) are
// aliases of their paths. Lists and booleans are not metrics; neither is `wall_time_s`, which
// differs between identical runs.
//
// The dotted paths of every number the summary writer emits, fleet and conditional fields
// included, in summary order. Taken from the writer itself, so a new summary field is a metric
// without a second list to update.
const std::vector<std::string>& KnownMetricPaths();

// The dotted path `name` stands for, or InvalidArgument naming `file` and field
// `tolerances.<name>`, listing the known names with a did-you-mean suggestion when one is close.
absl::StatusOr<std::string> ResolveMetric(const std::string& file, const std::string& name);

// Every tolerance names a known metric, and no two name the same one. Bad input: InvalidArgument
// naming the suite file and the field.
absl::Status CheckTolerances(const Scenario& suite);

// Every number of `summary` that is a metric, keyed by dotted path, in summary order.
nlohmann::ordered_json FlattenMetrics(const nlohmann::ordered_json& summary);

// The baseline document an update writes: every metric of every point, keyed by dotted path.
nlohmann::ordered_json BaselineJson(const Scenario& suite,
                                    const std::vector<nlohmann::ordered_json>& summaries);

enum class RegressStatus {
  kSame,           // equal to the baseline
  kWithin,         // moved, within its tolerance
  kImproved,       // moved towards the unbounded side of a one-sided tolerance
  kRegressed,      // moved beyond a one-sided tolerance
  kChanged,        // moved beyond a two-sided tolerance (which side is worse is not known)
  kMissing,        // the point or the metric is in only one of the baseline and this run
  kNotApplicable,  // the metric is in neither (e.g. fleet metrics of a one-engine point)
};
// "same", "ok", "improved", "REGRESSED", "CHANGED", "MISSING", "n/a".
const char* RegressStatusName(RegressStatus status);
// Whether the status fails the suite (exit 3).
bool IsFailure(RegressStatus status);

struct RegressRow {
  int64_t point_index = 0;
  std::string metric;  // as written in the suite
  std::optional<double> baseline;
  std::optional<double> now;
  bool integer = false;  // both values are JSON integers
  std::string tolerance;
  RegressStatus status = RegressStatus::kSame;
  std::string note;  // why, for MISSING rows
};

struct RegressPoint {
  int64_t index = 0;
  std::string id;
  // The point's distinguishing values (those that differ between the suite's points), in file
  // order, path-like values shortened to their file name.
  std::vector<std::pair<std::string, std::string>> axes;
  std::string Label() const;  // "#3 policy=old num_gpu_blocks=3000"
};

struct RegressReport {
  std::string suite;
  std::vector<RegressPoint> points;
  std::vector<RegressRow> rows;  // one per point x tolerance, in point then suite order
  bool regressed = false;        // some row fails
  int64_t Count(RegressStatus status) const;
};

// Compares every point's summary with the baseline under the suite's tolerances (already
// checked by CheckTolerances). A baseline written by an older version (headline names as keys)
// is read through the aliases.
absl::StatusOr<RegressReport> CompareWithBaseline(
    const Scenario& suite, const std::vector<nlohmann::ordered_json>& summaries,
    const std::string& baseline_path);

// The one-line verdict: "N points x M metrics: ..., all within tolerance" or "... REGRESSED".
std::string RegressVerdict(const RegressReport& report);

// Reports. Text and Markdown list the rows that moved, each point under its axes, numbers
// aligned; JUnit XML has one testcase per point x metric and a failure per failing row.
std::string FormatRegressText(const RegressReport& report);
std::string FormatRegressMarkdown(const RegressReport& report);
std::string FormatRegressJUnit(const RegressReport& report);

// Decimals that show `value` and `other` with at least `min_digits` significant digits and
// tell them apart (0 for integers), and `value` formatted to them.
int MetricDecimals(double value, double other, bool integer, int min_digits = 4);
std::string FormatMetricValue(double value, double other, bool integer, int min_digits = 4);

}  // namespace prefixsim::grid

#endif  // PREFIXSIM_SIM_GRID_REGRESS_H_
