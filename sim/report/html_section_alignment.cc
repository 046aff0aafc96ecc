// What the trace allows at each hit alignment: `analyze`'s upper-bound curve (an infinite cache,
// no concurrency) with each policy's A marked, so that a policy's distance from the ceiling shows.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prefixsim/analyze.h"
#include "sim/report/html_sections.h"

namespace prefixsim {
namespace html_report {
namespace {

std::string AlignmentCurve(const std::vector<ReplayResult>& results,
                           const HtmlReportOptions& options) {
  html::ChartSpec c;
  c.id = "alignment-curve";
  c.title = "Upper-bound hit rate vs hit alignment (analyze)";
  c.x_label = "hit alignment A (tokens, log scale)";
  c.y_label = "upper-bound hit rate (%)";
  c.log2_x = true;
  c.y_min = 0;
  if (options.analyze != nullptr) {
    html::Series s;
    s.name = "infinite cache, no concurrency";
    s.color = 6;
    s.dots = true;
    for (const AlignmentPoint& p : options.analyze->alignment_curve) {
      s.points.emplace_back(static_cast<double>(p.alignment), 100.0 * p.hit_rate);
    }
    c.series.push_back(std::move(s));
    for (size_t i = 0; i < results.size(); ++i) {
      const int64_t a = results[i].plan.hit_alignment;
      double rate = -1;
      for (const AlignmentPoint& p : options.analyze->alignment_curve) {
        if (p.alignment == a) rate = 100.0 * p.hit_rate;
      }
      c.markers.push_back({static_cast<double>(a),
                           absl::StrCat(results[i].policy, ": A = ", Thousands(a),
                                        rate >= 0 ? absl::StrCat(" → ", Number(rate, 1), "%") : ""),
                           static_cast<int>(i)});
    }
    c.note = absl::StrCat(
        "For each alignment A: the sum over requests of floor(min(shared prefix, L&minus;1) / A) "
        "&middot; A over all prompt tokens, ",
        Thousands(options.analyze->requests),
        " requests streamed in trace order (the ceiling any engine could reach at that A).");
  } else {
    c.note = "analyze did not run" +
             (options.analyze_error.empty() ? "" : ": " + Escape(options.analyze_error));
  }
  return html::LineChart(c);
}

}  // namespace

std::string AlignmentSection(const PageInputs& page, int number) {
  return absl::StrCat("<section><h2>", number, ". What the trace allows at each alignment</h2>\n",
                      AlignmentCurve(page.results, page.options), "</section>");
}

}  // namespace html_report
}  // namespace prefixsim
