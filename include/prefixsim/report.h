// The reports of a replay for programs that embed prefixsim (docs/embedding.md): the same text,
// JSON and CSV that `prefixsim replay` and `prefixsim compare` print, byte for byte (docs/design.md
// §4.5). JSON is returned as text so that no JSON library appears in the public headers.
#ifndef PREFIXSIM_REPORT_H_
#define PREFIXSIM_REPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "prefixsim/engine.h"

namespace prefixsim {

struct ReportOptions {
  // wall_time_s is the only field that differs between two runs with the same inputs and seed;
  // false omits it so that reports are byte-identical.
  bool include_wall_time = true;
};

// The readable summary `prefixsim replay` prints under its "model ... engine ... trace" line.
std::string ReplayReportText(const ReplayResult& result, const ReportOptions& options = {});
// The JSON summary: indented by 2, ending in a newline.
std::string ReplayReportJson(const ReplayResult& result, const ReportOptions& options = {});

// Several replays of one trace side by side, deltas against the first (`prefixsim compare`).
std::string ComparisonReportText(const std::vector<ReplayResult>& results);
std::string ComparisonReportJson(const std::vector<ReplayResult>& results,
                                 const ReportOptions& options = {});
// A self-contained HTML page (inline CSS and SVG, no network) of the comparison.
std::string ComparisonReportHtml(const std::vector<ReplayResult>& results,
                                 const std::string& title);

// The per-request CSV: one row per request of ReplayResult::per_request (kept only
// with ReplayOptions::record_requests).
void WriteRequestsCsv(const ReplayResult& result, std::ostream& out);

}  // namespace prefixsim

#endif  // PREFIXSIM_REPORT_H_
