// The table step-time model: measured step times (from the CUDA backend or a real engine) on a
// grid of (batch tokens, summed context tokens), interpolated bilinearly. CSV format:
//   num_tokens,context_tokens,time_us
//   64,4096,2100.5
//   ...
// Every combination of the distinct num_tokens and context_tokens values must be present.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sim/cost/cost_model.h"

namespace prefixsim {
namespace {

// Index i with axis[i] <= x < axis[i+1] (clamped to [0, n-2]) and the fraction t in that cell;
// t < 0 never (clamped at the first point), t > 1 past the last point (extrapolation).
void Locate(const std::vector<double>& axis, double x, size_t* i, double* t) {
  if (axis.size() == 1) {
    *i = 0;
    *t = 0;
    return;
  }
  if (x <= axis.front()) {
    *i = 0;
    *t = 0;
    return;
  }
  size_t hi = std::upper_bound(axis.begin(), axis.end(), x) - axis.begin();
  if (hi >= axis.size()) hi = axis.size() - 1;
  *i = hi - 1;
  *t = (x - axis[*i]) / (axis[hi] - axis[*i]);
}

class TableCostModel : public CostModel {
 public:
  explicit TableCostModel(StepTimeTable table) : table_(std::move(table)) {}
  std::string_view name() const override { return "table"; }
  int64_t StepTimeNs(absl::Span<const SeqWork> batch) const override {
    double tokens = 0, context = 0;
    for (const SeqWork& s : batch) {
      tokens += static_cast<double>(s.new_tokens);
      context += static_cast<double>(s.context_tokens);
    }
    const double us = table_.Interpolate(tokens, context);
    return std::max<int64_t>(1, static_cast<int64_t>(std::llround(us * 1e3)));
  }

 private:
  StepTimeTable table_;
};

}  // namespace

double StepTimeTable::Interpolate(double x, double y) const {
  size_t i, j;
  double tx, ty;
  Locate(num_tokens, x, &i, &tx);
  Locate(context_tokens, y, &j, &ty);
  const size_t i1 = std::min(i + 1, num_tokens.size() - 1);
  const size_t j1 = std::min(j + 1, context_tokens.size() - 1);
  const double a = time_us[i][j] + (time_us[i][j1] - time_us[i][j]) * ty;
  const double b = time_us[i1][j] + (time_us[i1][j1] - time_us[i1][j]) * ty;
  return std::max(a + (b - a) * tx, 0.0);
}

absl::StatusOr<StepTimeTable> ParseStepTimeTable(std::string_view csv,
                                                 std::string_view source_view) {
  const std::string source(source_view);
  std::map<std::pair<double, double>, double> points;
  int line_no = 0;
  bool header_seen = false;
  for (absl::string_view line : absl::StrSplit(absl::string_view(csv.data(), csv.size()), '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    if (!header_seen) {
      header_seen = true;
      if (f.size() != 3 || absl::StripAsciiWhitespace(f[0]) != "num_tokens" ||
          absl::StripAsciiWhitespace(f[1]) != "context_tokens" ||
          absl::StripAsciiWhitespace(f[2]) != "time_us") {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ":", line_no, ": header must be num_tokens,context_tokens,time_us"));
      }
      continue;
    }
    if (f.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_no, ": expected 3 fields, got ", f.size()));
    }
    double v[3];
    static constexpr const char* kNames[] = {"num_tokens", "context_tokens", "time_us"};
    for (int k = 0; k < 3; ++k) {
      if (!absl::SimpleAtod(absl::StripAsciiWhitespace(f[k]), &v[k]) || !std::isfinite(v[k]) ||
          v[k] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ":", line_no, ": field ", kNames[k], ": not a number >= 0"));
      }
    }
    if (!points.emplace(std::make_pair(v[0], v[1]), v[2]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_no, ": duplicate point (", v[0], ", ", v[1], ")"));
    }
  }
  if (points.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no data rows"));
  }
  StepTimeTable table;
  for (const auto& [key, t] : points) {
    if (table.num_tokens.empty() || table.num_tokens.back() != key.first) {
      table.num_tokens.push_back(key.first);
    }
  }
  std::vector<double> ys;
  for (const auto& [key, t] : points) ys.push_back(key.second);
  std::sort(ys.begin(), ys.end());
  ys.erase(std::unique(ys.begin(), ys.end()), ys.end());
  table.context_tokens = ys;
  table.time_us.assign(table.num_tokens.size(), std::vector<double>(ys.size(), 0.0));
  for (size_t i = 0; i < table.num_tokens.size(); ++i) {
    for (size_t j = 0; j < ys.size(); ++j) {
      auto it = points.find({table.num_tokens[i], ys[j]});
      if (it == points.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": grid point missing: num_tokens=", table.num_tokens[i],
                         " context_tokens=", ys[j], " (every combination must be present)"));
      }
      table.time_us[i][j] = it->second;
    }
  }
  return table;
}

absl::StatusOr<std::unique_ptr<CostModel>> NewTableCostModel(const CostModelConfig& config,
                                                             const CostModelContext& /*context*/) {
  if (config.table_path.empty()) {
    return absl::InvalidArgumentError("cost_model.table_path: required for the table model");
  }
  std::ifstream in(config.table_path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(config.table_path, ": cannot open step-time table"));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<StepTimeTable> table = ParseStepTimeTable(ss.str(), config.table_path);
  if (!table.ok()) return table.status();
  return std::make_unique<TableCostModel>(*std::move(table));
}

}  // namespace prefixsim
