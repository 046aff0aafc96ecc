// The sections of the A/B report page (HtmlReport, html_report.cc), one html_section_*.cc each,
// and what they share. Internal to sim/report: html_report.cc assembles the page from these.
//
// A section returns its HTML, heading included. Its heading's number comes from the page:
// sections are numbered in page order, and those that appear only when some result has them
// shift the numbers after them.
#ifndef PREFIXSIM_SIM_REPORT_HTML_SECTIONS_H_
#define PREFIXSIM_SIM_REPORT_HTML_SECTIONS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "prefixsim/engine.h"
#include "sim/report/html_charts.h"
#include "sim/report/report.h"

namespace prefixsim {
namespace html_report {

using html::Escape;
using html::Number;
using html::Thousands;

// Windows of arrival time over the served requests of every result, shared by every chart over
// time (hit rate, miss causes, routing regret) so that their x axes agree: about 10 requests a
// window (the largest result's), between 1 and 40 windows.
struct ArrivalBins {
  int64_t t0 = 0;
  int bins = 0;  // 0: no served request
  double width_ns = 1;
  int Of(int64_t arrival_ns) const {
    return std::min(bins - 1, static_cast<int>(static_cast<double>(arrival_ns - t0) / width_ns));
  }
  double MiddleS(int b) const { return (b + 0.5) * width_ns / 1e9; }
};

ArrivalBins BinArrivals(const std::vector<ReplayResult>& results);  // html_section_per_request.cc

// What every section reads.
struct PageInputs {
  const std::vector<ReplayResult>& results;  // in page order; deltas are against the first
  const HtmlReportOptions& options;
  bool deltas = false;  // a column of deltas against the first result
  ArrivalBins arrival_bins;
};

inline double Pct(int64_t a, int64_t b) { return b > 0 ? 100.0 * static_cast<double>(a) / b : 0.0; }

// A policy's colour (its index in the results), as in every chart.
inline std::string Swatch(int i) {
  return absl::StrFormat("<span class=\"swatch\" style=\"background:%s\"></span>", html::Color(i));
}

// One policy's line over the arrival windows: Σ num / Σ den (%) of each window's served
// requests; windows with no denominator get no point.
template <typename Num, typename Den>
html::Series WindowShareSeries(const ReplayResult& r, int color, const ArrivalBins& a, Num num,
                               Den den) {
  html::Series s;
  s.name = r.policy;
  s.color = color;
  s.dots = true;
  if (a.bins == 0) return s;
  std::vector<int64_t> part(a.bins, 0), whole(a.bins, 0);
  for (const RequestRecord& rec : r.per_request) {
    if (!rec.skipped.empty()) continue;
    const int b = a.Of(rec.arrival_ns);
    part[b] += num(rec);
    whole[b] += den(rec);
  }
  for (int b = 0; b < a.bins; ++b) {
    if (whole[b] > 0) s.points.emplace_back(a.MiddleS(b), Pct(part[b], whole[b]));
  }
  return s;
}

// The summary table and its note, which links to the fleet section when there is one; no heading
// (html_section_summary.cc).
std::string SummarySection(const PageInputs& page, int fleet_number);

// The KV plans side by side with the LCM arithmetic (html_section_plan.cc).
std::string PlanSection(const PageInputs& page, int number);

// From the per-request records: the hit rate over time; the CDFs of the per-request hit fraction
// and of the tokens lost to alignment, then the block-size cliff; the latency CDFs
// (html_section_per_request.cc).
std::string HitRateOverTimeSection(const PageInputs& page, int number);
std::string PerRequestSection(const PageInputs& page, int number);
std::string LatencySection(const PageInputs& page, int number);

// Why tokens missed, by miss cause (html_section_miss_causes.cc). Only the results with
// miss_causes.enabled take part; the page leaves the section out when none has.
std::string MissCauseSection(const PageInputs& page, int number);

// Hit rate vs KV cache bytes (html_section_capacity.cc), and analyze's alignment curve with each
// policy's A marked (html_section_alignment.cc): two halves of one row.
std::string CapacitySection(const PageInputs& page, int number);
std::string AlignmentSection(const PageInputs& page, int number);

// With offload tiers: each tier's share of the hit and its traffic, per policy, and the shares
// over time (html_section_offload.cc).
std::string OffloadSection(const PageInputs& page, int number);

// For fleet runs: the router, the auto-sizing probes and the per-replica tables and charts
// (html_section_fleet.cc).
std::string FleetSection(const PageInputs& page, int number);

// `prefixsim parity`: simulated against measured hit rate, and the recorded event log against the
// simulated one (html_section_parity.cc).
std::string ParitySection(const ParityFigures& parity, int number);
// `prefixsim tune`'s search: what was pruned, the ranked plans, hit rate against memory waste.
std::string TuneSection(const TuneFigures& tune, int number);

}  // namespace html_report
}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_REPORT_HTML_SECTIONS_H_
