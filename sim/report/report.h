// Reports of a replay (DESIGN §4.5): the readable terminal summary, the JSON summary, the
// per-request CSV, and the side-by-side comparison of several policies (text, JSON, HTML).
#ifndef PREFIXSIM_SIM_REPORT_REPORT_H_
#define PREFIXSIM_SIM_REPORT_REPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "prefixsim/engine.h"
#include "prefixsim/kv_plan.h"

namespace prefixsim {

struct ReportOptions {
  // wall_time_s is the only field that differs between two runs with the same inputs and seed;
  // false omits it so that reports are byte-identical (CLI --no-wall-time).
  bool include_wall_time = true;
};

// Memory the plan wastes on padding: per block id, the padded bytes of real layers plus whole
// pages of virtual padding layers, averaged over groups (every group assumed to hold the same
// number of blocks).
struct PlanWaste {
  double padding_bytes_per_block = 0;
  double waste_fraction = 0;  // of bytes_per_block
};
PlanWaste ComputePlanWaste(const KvPlan& plan);

// The replay JSON summary (DESIGN §4.5).
nlohmann::ordered_json ReplayResultToJson(const ReplayResult& result,
                                          const ReportOptions& options = {});
// The readable summary printed by `prefixsim replay`.
std::string FormatReplaySummary(const ReplayResult& result, bool include_wall_time = true);
// One row per request: id, arrival, prompt tokens, hit tokens, loss to alignment, TTFT,
// end-to-end, preemptions (DESIGN §4.5), plus output tokens and why a request was skipped.
void WriteRequestsCsv(const ReplayResult& result, std::ostream& out);

// Comparison of several replays of one trace; deltas are against the first.
nlohmann::ordered_json ComparisonToJson(const std::vector<ReplayResult>& results,
                                        const ReportOptions& options = {});
std::string FormatComparison(const std::vector<ReplayResult>& results);
// A self-contained HTML page (inline CSS and SVG, no network).
std::string ComparisonHtml(const std::vector<ReplayResult>& results, const std::string& title);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_REPORT_REPORT_H_
