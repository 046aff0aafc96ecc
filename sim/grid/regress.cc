#include "sim/grid/regress.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "prefixsim/engine.h"
#include "sim/grid/merge.h"
#include "sim/grid/point_config.h"
#include "sim/report/html_charts.h"
#include "sim/report/report.h"
#include "sim/util/did_you_mean.h"
#include "sim/util/status_macros.h"

namespace prefixsim::grid {
namespace {

using Json = nlohmann::ordered_json;

// The metric wall_time_s stands for: not comparable, so not a metric (see regress.h).
constexpr std::string_view kWallTime = "wall_time_s";

void Walk(const Json& j, const std::string& prefix, bool finite_only, Json& out) {
  for (const auto& [key, value] : j.items()) {
    const std::string path = prefix.empty() ? key : absl::StrCat(prefix, ".", key);
    if (value.is_object()) {
      Walk(value, path, finite_only, out);
    } else if (value.is_number() && path != kWallTime) {
      if (finite_only && !std::isfinite(value.get<double>())) continue;
      out[path] = value;
    }
  }
}

std::string PointerToPath(const std::string& pointer) {
  std::string path = pointer.substr(1);
  std::replace(path.begin(), path.end(), '/', '.');
  return path;
}

// Headline name -> dotted path, without wall_time_s.
const std::vector<std::pair<std::string, std::string>>& Aliases() {
  static const auto* aliases = [] {
    auto* a = new std::vector<std::pair<std::string, std::string>>;
    for (const auto& [name, pointer] : HeadlineMetricPointers()) {
      if (name != kWallTime) a->emplace_back(name, PointerToPath(pointer));
    }
    return a;
  }();
  return *aliases;
}

// The closest known name, when close enough to be a typo; a bare last component
// ("imbalance") suggests its full path.
std::string Suggest(const std::string& name) {
  std::vector<std::string> candidates;
  for (const auto& [alias, path] : Aliases()) candidates.push_back(alias);
  for (const std::string& path : KnownMetricPaths()) candidates.push_back(path);
  std::string best;
  int best_distance = std::max<int>(2, static_cast<int>(name.size() / 4)) + 1;
  for (const std::string& c : candidates) {
    int d = EditDistance(name, c);
    const size_t dot = c.rfind('.');
    if (dot != std::string::npos) d = std::min(d, EditDistance(name, c.substr(dot + 1)));
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::optional<Json> Lookup(const Json& metrics, const std::string& path) {
  if (metrics.contains(path)) return metrics[path];
  for (const auto& [alias, alias_path] : Aliases()) {
    if (alias_path == path && metrics.contains(alias)) return metrics[alias];
  }
  return std::nullopt;
}

std::string Number(double v) { return absl::StrFormat("%g", v); }

std::string BoundText(const ToleranceBound& b) {
  const std::string rel = b.rel >= 0 ? absl::StrCat(Number(b.rel * 100), "%") : "";
  if (b.abs >= 0 && b.rel >= 0) return absl::StrCat("max(", Number(b.abs), ",", rel, ")");
  return b.abs >= 0 ? Number(b.abs) : rel;
}

std::string ToleranceText(const Tolerance& t) {
  const bool up = t.increase.bounded();
  const bool down = t.decrease.bounded();
  if (up && down) {
    const std::string u = BoundText(t.increase);
    const std::string d = BoundText(t.decrease);
    return u == d ? absl::StrCat("+/-", u) : absl::StrCat("+", u, " -", d);
  }
  return up ? absl::StrCat("+", BoundText(t.increase)) : absl::StrCat("-", BoundText(t.decrease));
}

double Allowed(const ToleranceBound& b, double baseline) {
  double allowed = 0;
  if (b.abs >= 0) allowed = std::max(allowed, b.abs);
  if (b.rel >= 0) allowed = std::max(allowed, b.rel * std::abs(baseline));
  return allowed;
}

RegressStatus Judge(const Tolerance& t, double baseline, double now) {
  const double delta = now - baseline;
  if (delta == 0) return RegressStatus::kSame;
  const ToleranceBound& side = delta > 0 ? t.increase : t.decrease;
  if (!side.bounded()) return RegressStatus::kImproved;
  // Inclusive, with a slack of a few ulps so that a value written as baseline + abs in decimal
  // (0.7105 = 0.7095 + 0.001) holds although its binary difference exceeds abs.
  const double slack = 1e-9 * std::max(std::abs(baseline), std::abs(now));
  if (std::abs(delta) <= Allowed(side, baseline) + slack) return RegressStatus::kWithin;
  const bool two_sided = t.increase.bounded() && t.decrease.bounded();
  return two_sided ? RegressStatus::kChanged : RegressStatus::kRegressed;
}

// Values that name a file are shown by their file name.
std::string AxisValueText(const std::string& key, const Json& v) {
  if (!v.is_string()) return v.dump();
  const std::string s = v.get<std::string>();
  if ((key == "trace" || key == "model" || key == "engine") && s.find('/') != std::string::npos) {
    return std::filesystem::path(s).filename().string();
  }
  return s;
}

std::vector<RegressPoint> DescribePoints(const Scenario& suite) {
  // Keys whose value differs between points, in first-seen order.
  std::vector<std::string> keys;
  for (const Point& p : suite.points) {
    for (const auto& [key, value] : p.values.items()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
  }
  std::vector<std::string> distinguishing;
  for (const std::string& key : keys) {
    const Point& first = suite.points.front();
    const bool same = std::all_of(suite.points.begin(), suite.points.end(), [&](const Point& p) {
      return p.values.contains(key) == first.values.contains(key) &&
             (!p.values.contains(key) || p.values[key] == first.values[key]);
    });
    if (!same) distinguishing.push_back(key);
  }
  std::vector<RegressPoint> out;
  for (const Point& p : suite.points) {
    RegressPoint rp;
    rp.index = p.index;
    rp.id = p.id;
    for (const std::string& key : distinguishing.empty() ? p.axes : distinguishing) {
      if (p.values.contains(key)) rp.axes.emplace_back(key, AxisValueText(key, p.values[key]));
    }
    out.push_back(std::move(rp));
  }
  return out;
}

absl::StatusOr<std::optional<double>> NumberOf(const std::optional<Json>& v,
                                               const std::string& file, const std::string& field) {
  if (!v.has_value()) return std::optional<double>();
  if (!v->is_number()) return FieldError(file, field, "expected a number");
  return std::optional<double>(v->get<double>());
}

absl::StatusOr<RegressReport> CompareUnchecked(const Scenario& suite,
                                               const std::vector<Json>& summaries,
                                               const std::string& baseline_path) {
  PREFIXSIM_ASSIGN_OR_RETURN(Json b, ReadJsonFile(baseline_path));
  if (!b.is_object() || !b.contains("suite") || !b["suite"].is_string()) {
    return FieldError(baseline_path, "suite", "missing (not a regress baseline)");
  }
  if (b["suite"].get<std::string>() != suite.name) {
    return FieldError(baseline_path, "suite",
                      absl::StrCat("baseline of suite '", b["suite"].get<std::string>(),
                                   "', not of '", suite.name, "' (", suite.path, ")"));
  }
  if (!b.contains("points") || !b["points"].is_object()) {
    return FieldError(baseline_path, "points", "expected an object of point id -> metrics");
  }
  std::vector<std::string> paths;
  for (const auto& [name, tol] : suite.tolerances) {
    PREFIXSIM_ASSIGN_OR_RETURN(std::string path, ResolveMetric(suite.path, name));
    paths.push_back(std::move(path));
  }
  RegressReport report;
  report.suite = suite.name;
  report.points = DescribePoints(suite);
  for (size_t i = 0; i < suite.points.size(); ++i) {
    const Point& p = suite.points[i];
    const Json now_metrics = FlattenMetrics(summaries[i]);
    const bool in_baseline = b["points"].contains(p.id);
    Json base_metrics = Json::object();
    if (in_baseline) {
      const Json& entry = b["points"][p.id];
      if (!entry.is_object() || !entry.contains("metrics") || !entry["metrics"].is_object()) {
        return FieldError(baseline_path, absl::StrCat("points.", p.id, ".metrics"),
                          "expected an object of metric -> number");
      }
      base_metrics = entry["metrics"];
    }
    for (size_t t = 0; t < suite.tolerances.size(); ++t) {
      const auto& [name, tol] = suite.tolerances[t];
      RegressRow row;
      row.point_index = p.index;
      row.metric = name;
      row.tolerance = ToleranceText(tol);
      const std::optional<Json> bj = Lookup(base_metrics, paths[t]);
      const std::optional<Json> nj = Lookup(now_metrics, paths[t]);
      PREFIXSIM_ASSIGN_OR_RETURN(
          row.baseline,
          NumberOf(bj, baseline_path, absl::StrCat("points.", p.id, ".metrics.", paths[t])));
      PREFIXSIM_ASSIGN_OR_RETURN(row.now, NumberOf(nj, suite.path, "(summary)"));
      row.integer = (bj.has_value() || nj.has_value()) &&
                    (!bj.has_value() || bj->is_number_integer()) &&
                    (!nj.has_value() || nj->is_number_integer());
      if (!in_baseline) {
        row.status = RegressStatus::kMissing;
        row.note = "point not in the baseline";
      } else if (!row.baseline.has_value() && !row.now.has_value()) {
        row.status = RegressStatus::kNotApplicable;
      } else if (!row.baseline.has_value() || !row.now.has_value()) {
        row.status = RegressStatus::kMissing;
        row.note = row.baseline.has_value()
                       ? "in the baseline, not in this run's summary"
                       : "not in the baseline (written before this metric existed? `update`)";
      } else {
        row.status = Judge(tol, *row.baseline, *row.now);
      }
      report.regressed |= IsFailure(row.status);
      report.rows.push_back(std::move(row));
    }
  }
  return report;
}

const RegressPoint* FindPoint(const RegressReport& r, int64_t index) {
  for (const RegressPoint& p : r.points) {
    if (p.index == index) return &p;
  }
  return nullptr;
}

bool Shown(const RegressRow& row) {
  return row.status != RegressStatus::kSame && row.status != RegressStatus::kNotApplicable;
}

struct Cells {
  std::string baseline, now, delta;
};

// Baseline, now and delta to the same number of decimals: enough for min. 4 significant
// digits and to tell the two values apart.
Cells FormatCells(const RegressRow& row) {
  if (!row.baseline.has_value() || !row.now.has_value()) {
    // A missing side shows as "-" (constructed, not assigned: GCC 12 warns falsely on
    // assigning a literal to a string here, -Wrestrict).
    auto cell = [&](const std::optional<double>& v) {
      return v.has_value() ? FormatMetricValue(*v, *v, row.integer) : std::string(1, '-');
    };
    return Cells{cell(row.baseline), cell(row.now), std::string(1, '-')};
  }
  Cells c;
  const double b = *row.baseline;
  const double n = *row.now;
  const int decimals = MetricDecimals(b, n, row.integer, 4);
  c.baseline = absl::StrFormat("%.*f", decimals, b);
  c.now = absl::StrFormat("%.*f", decimals, n);
  const double d = n - b;
  c.delta = absl::StrFormat("%+.*f", decimals, d);
  if (b != 0 && d != 0) c.delta += absl::StrFormat(" (%+.3g%%)", 100 * d / std::abs(b));
  return c;
}

std::string MarkdownCell(std::string_view s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|') out += '\\';
    out += ch == '\n' ? ' ' : ch;
  }
  return out;
}

}  // namespace

const std::vector<std::string>& KnownMetricPaths() {
  static const auto* paths = [] {
    // A result with every conditional part of the summary switched on.
    ReplayResult r;
    FleetSummary f;
    f.overlap_weight = 1;
    f.auto_sized = true;
    f.router_index_checks = 1;
    f.per_replica.resize(1);
    f.probes.resize(1);
    r.fleet = f;
    r.miss_causes.enabled = true;
    r.plan.retention_interval = 0;  // a number unless dense
    ReportOptions options;
    options.include_wall_time = false;
    Json flat = Json::object();
    Walk(ReplayResultToJson(r, options), "", /*finite_only=*/false, flat);
    auto* out = new std::vector<std::string>;
    for (const auto& [path, value] : flat.items()) out->push_back(path);
    return out;
  }();
  return *paths;
}

absl::StatusOr<std::string> ResolveMetric(const std::string& file, const std::string& name) {
  for (const auto& [alias, path] : Aliases()) {
    if (alias == name) return path;
  }
  const auto& known = KnownMetricPaths();
  if (std::find(known.begin(), known.end(), name) != known.end()) return name;
  const std::string field = absl::StrCat("tolerances.", name);
  if (name == kWallTime) {
    return FieldError(file, field,
                      "wall time differs between identical runs, so regress does not measure it");
  }
  std::vector<std::string> aliases;
  for (const auto& [alias, path] : Aliases()) aliases.push_back(alias);
  const std::string suggestion = Suggest(name);
  // A good suggestion is the answer; the hundreds of dotted paths would bury it, so they are
  // listed only when nothing is close.
  const std::string paths = suggestion.empty() ? absl::StrCat(" (", absl::StrJoin(known, ", "), ")")
                                               : " such as prefix_cache.hit_rate";
  return FieldError(
      file, field,
      absl::StrCat("unknown metric '", name, "'",
                   suggestion.empty() ? "" : absl::StrCat(" (did you mean '", suggestion, "'?)"),
                   "; a metric is a headline name (", absl::StrJoin(aliases, ", "),
                   ") or a dotted path to a number of the replay JSON summary", paths));
}

absl::Status CheckTolerances(const Scenario& suite) {
  std::map<std::string, std::string> seen;  // path -> name
  for (const auto& [name, tol] : suite.tolerances) {
    PREFIXSIM_ASSIGN_OR_RETURN(std::string path, ResolveMetric(suite.path, name));
    auto [it, inserted] = seen.emplace(path, name);
    if (!inserted) {
      return FieldError(suite.path, absl::StrCat("tolerances.", name),
                        absl::StrCat("the same metric (", path, ") as tolerances.", it->second));
    }
  }
  return absl::OkStatus();
}

Json FlattenMetrics(const Json& summary) {
  Json out = Json::object();
  Walk(summary, "", /*finite_only=*/true, out);
  return out;
}

Json BaselineJson(const Scenario& suite, const std::vector<Json>& summaries) {
  Json b;
  b["suite"] = suite.name;
  b["points"] = Json::object();
  for (size_t i = 0; i < suite.points.size(); ++i) {
    const Point& p = suite.points[i];
    Json e;
    e["index"] = p.index;
    e["values"] = p.values;
    e["metrics"] = FlattenMetrics(summaries[i]);
    b["points"][p.id] = e;
  }
  return b;
}

const char* RegressStatusName(RegressStatus status) {
  switch (status) {
    case RegressStatus::kSame:
      return "same";
    case RegressStatus::kWithin:
      return "ok";
    case RegressStatus::kImproved:
      return "improved";
    case RegressStatus::kRegressed:
      return "REGRESSED";
    case RegressStatus::kChanged:
      return "CHANGED";
    case RegressStatus::kMissing:
      return "MISSING";
    case RegressStatus::kNotApplicable:
      return "n/a";
  }
  return "?";
}

bool IsFailure(RegressStatus status) {
  return status == RegressStatus::kRegressed || status == RegressStatus::kChanged ||
         status == RegressStatus::kMissing;
}

std::string RegressPoint::Label() const {
  std::string label = absl::StrCat("#", index);
  for (const auto& [key, value] : axes) absl::StrAppend(&label, " ", key, "=", value);
  return label;
}

int64_t RegressReport::Count(RegressStatus status) const {
  return std::count_if(rows.begin(), rows.end(),
                       [&](const RegressRow& r) { return r.status == status; });
}

absl::StatusOr<RegressReport> CompareWithBaseline(const Scenario& suite,
                                                  const std::vector<Json>& summaries,
                                                  const std::string& baseline_path) {
  // Baselines are JSON written by us, but may have been edited: a field of the wrong type is
  // bad input, not a crash.
  try {
    return CompareUnchecked(suite, summaries, baseline_path);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(baseline_path, ": field points: malformed baseline: ", e.what()));
  }
}

int MetricDecimals(double value, double other, bool integer, int min_digits) {
  if (integer) return 0;
  constexpr int kMaxDecimals = 15;
  auto needed = [&](double v) {
    if (v == 0 || !std::isfinite(v)) return 0;
    const int magnitude = static_cast<int>(std::floor(std::log10(std::abs(v))));
    return std::clamp(min_digits - 1 - magnitude, 0, kMaxDecimals);
  };
  int decimals = std::max(needed(value), needed(other));
  while (decimals < kMaxDecimals && value != other &&
         absl::StrFormat("%.*f", decimals, value) == absl::StrFormat("%.*f", decimals, other)) {
    ++decimals;
  }
  return decimals;
}

std::string FormatMetricValue(double value, double other, bool integer, int min_digits) {
  return absl::StrFormat("%.*f", MetricDecimals(value, other, integer, min_digits), value);
}

std::string RegressVerdict(const RegressReport& r) {
  const int64_t failing = r.Count(RegressStatus::kRegressed) + r.Count(RegressStatus::kChanged) +
                          r.Count(RegressStatus::kMissing);
  std::string text = absl::StrCat(
      r.points.size(), " points x ", r.points.empty() ? 0 : r.rows.size() / r.points.size(),
      " metrics: ", r.Count(RegressStatus::kSame), " unchanged, ", r.Count(RegressStatus::kWithin),
      " within tolerance, ", r.Count(RegressStatus::kImproved), " improved, ", failing, " failing");
  if (r.Count(RegressStatus::kNotApplicable) > 0) {
    absl::StrAppend(&text, ", ", r.Count(RegressStatus::kNotApplicable), " not applicable");
  }
  absl::StrAppend(&text, r.regressed ? ": REGRESSED" : ": all within tolerance");
  return text;
}

std::string FormatRegressText(const RegressReport& r) {
  struct Line {
    const RegressRow* row;
    Cells cells;
  };
  std::vector<Line> lines;
  for (const RegressRow& row : r.rows) {
    if (Shown(row)) lines.push_back({&row, FormatCells(row)});
  }
  std::string out;
  if (!lines.empty()) {
    size_t w_metric = std::string_view("point / metric").size();
    size_t w_base = 8, w_now = 3, w_delta = 5, w_tol = 9;
    for (const Line& l : lines) {
      w_metric = std::max(w_metric, l.row->metric.size() + 2);
      w_base = std::max(w_base, l.cells.baseline.size());
      w_now = std::max(w_now, l.cells.now.size());
      w_delta = std::max(w_delta, l.cells.delta.size());
      w_tol = std::max(w_tol, l.row->tolerance.size());
    }
    auto line = [&](std::string_view metric, std::string_view base, std::string_view now,
                    std::string_view delta, std::string_view tol, std::string_view status) {
      std::string s = absl::StrFormat("%-*s  %*s  %*s  %*s  %-*s  %s", w_metric, metric, w_base,
                                      base, w_now, now, w_delta, delta, w_tol, tol, status);
      s.erase(s.find_last_not_of(' ') + 1);
      return s + "\n";
    };
    out += line("point / metric", "baseline", "now", "delta", "tolerance", "status");
    int64_t current = -1;
    for (const Line& l : lines) {
      if (l.row->point_index != current) {
        current = l.row->point_index;
        const RegressPoint* p = FindPoint(r, current);
        if (p != nullptr) absl::StrAppend(&out, p->Label(), "  (id ", p->id, ")\n");
      }
      std::string status = RegressStatusName(l.row->status);
      if (!l.row->note.empty()) absl::StrAppend(&status, ": ", l.row->note);
      out += line(absl::StrCat("  ", l.row->metric), l.cells.baseline, l.cells.now, l.cells.delta,
                  l.row->tolerance, status);
    }
  }
  return out;
}

std::string FormatRegressMarkdown(const RegressReport& r) {
  std::string out = absl::StrCat("### prefixsim regress: suite `", r.suite,
                                 "`: ", r.regressed ? "**REGRESSED**" : "all within tolerance",
                                 "\n\n", MarkdownCell(RegressVerdict(r)), "\n\n");
  bool any = false;
  for (const RegressRow& row : r.rows) {
    if (!Shown(row)) continue;
    if (!any) {
      out +=
          "| point | metric | baseline | now | delta | tolerance | status |\n"
          "|---|---|--:|--:|--:|---|---|\n";
      any = true;
    }
    const Cells c = FormatCells(row);
    const RegressPoint* p = FindPoint(r, row.point_index);
    std::string status = RegressStatusName(row.status);
    if (IsFailure(row.status)) status = absl::StrCat("**", status, "**");
    if (!row.note.empty()) absl::StrAppend(&status, ": ", row.note);
    absl::StrAppend(&out, "| ", MarkdownCell(p != nullptr ? p->Label() : ""), " | `",
                    MarkdownCell(row.metric), "` | ", c.baseline, " | ", c.now, " | ",
                    MarkdownCell(c.delta), " | ", MarkdownCell(row.tolerance), " | ",
                    MarkdownCell(status), " |\n");
  }
  if (!any) out += "No metric moved.\n";
  return out;
}

std::string FormatRegressJUnit(const RegressReport& r) {
  const int64_t failures = r.Count(RegressStatus::kRegressed) + r.Count(RegressStatus::kChanged) +
                           r.Count(RegressStatus::kMissing);
  const int64_t skipped = r.Count(RegressStatus::kNotApplicable);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  const std::string counts =
      absl::StrFormat("tests=\"%d\" failures=\"%d\" errors=\"0\"", r.rows.size(), failures);
  absl::StrAppend(&out, "<testsuites name=\"prefixsim regress\" ", counts, ">\n");
  absl::StrAppend(&out, "  <testsuite name=\"", html::Escape(r.suite), "\" ", counts,
                  absl::StrFormat(" skipped=\"%d\"", skipped), ">\n");
  for (const RegressRow& row : r.rows) {
    const RegressPoint* p = FindPoint(r, row.point_index);
    absl::StrAppend(&out, "    <testcase classname=\"",
                    html::Escape(absl::StrCat(r.suite, ".", p != nullptr ? p->Label() : "")),
                    "\" name=\"", html::Escape(row.metric), "\"");
    if (row.status == RegressStatus::kNotApplicable) {
      out += ">\n      <skipped message=\"not in this point's summary\"/>\n    </testcase>\n";
      continue;
    }
    const Cells c = FormatCells(row);
    std::string detail =
        absl::StrCat("baseline ", c.baseline, ", now ", c.now, ", delta ", c.delta, ", tolerance ",
                     row.tolerance, ": ", RegressStatusName(row.status));
    if (!row.note.empty()) absl::StrAppend(&detail, " (", row.note, ")");
    if (IsFailure(row.status)) {
      absl::StrAppend(&out, ">\n      <failure type=\"", RegressStatusName(row.status),
                      "\" message=\"", html::Escape(detail), "\"/>\n    </testcase>\n");
    } else {
      absl::StrAppend(&out, ">\n      <system-out>", html::Escape(detail),
                      "</system-out>\n    </testcase>\n");
    }
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace prefixsim::grid
