// The A/B report page of `compare` and `replay`: one self-contained HTML file with
// inline CSS and SVG (html_charts.h) and a few lines of inline script that only verify the page
// (count each chart's drawn elements into data attributes). No network at view time.
//
// This file assembles the page: its head, the sections in order with their numbers, and the
// script. Each section renders in its own html_section_*.cc (html_sections.h lists them): the
// summary table (deltas against the first policy), the KV plan side by side with the LCM
// arithmetic, hit rate over time, CDFs of per-request hit fraction and of tokens lost to the
// alignment, the block-size cliff (hit fraction by prompt length, each policy's A and S marked),
// why tokens missed (the tokens by miss cause as stacked bars and tables, each cause's share over
// time; docs/design.md §7) when the replays attributed their misses, TTFT and E2E CDFs, hit rate
// vs KV cache bytes, `analyze`'s alignment curve with each policy's A marked, for fleet runs the
// router, the auto-sizing probes and the per-replica table with bar charts of load and hit rate,
// and for `prefixsim parity` the comparison against the measured run.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/report/html_charts.h"
#include "sim/report/html_sections.h"
#include "sim/report/report.h"

namespace prefixsim {
namespace {

using html::Escape;

constexpr const char* kStyle = R"css(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em 2em;color:#222;max-width:1340px}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.sub{color:#555;margin-top:0}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:3px 9px;text-align:right;font-variant-numeric:tabular-nums}
th:first-child,td:first-child,td.text,th.text{text-align:left}thead{background:#f3f3f3}
.pos{color:#1a7f37}.neg{color:#c62828}
.plans{display:flex;flex-wrap:wrap;gap:1.2em}.plan{box-sizing:border-box;border:1px solid #ddd;border-radius:6px;padding:.6em 1em;flex:1 1 0;min-width:520px;font-size:.92em}
.row{display:flex;flex-wrap:wrap;gap:0 1.5em}.row>section{flex:0 0 auto;max-width:660px}.row table{font-size:.9em}.plan ul{padding-left:1.2em;margin:.4em 0}
.plan h3{margin:.2em 0 .4em 0}.math{font-family:ui-monospace,Menlo,monospace;background:#f7f7f7;padding:.15em .4em;border-radius:3px}
.charts{display:flex;flex-wrap:wrap;gap:.5em 1.5em}figure.chart{margin:.5em 0}figcaption{font-weight:600;margin-bottom:.2em}
p.note{font-size:.85em;color:#555;max-width:640px;margin:.2em 0}
caption{text-align:left;font-weight:600;padding:.2em 0}.tables{display:flex;flex-wrap:wrap;gap:0 1.5em}ul.miss-cause-legend{padding-left:1.2em;font-size:.9em;max-width:600px}ul.miss-cause-legend li{margin:.25em 0}
.swatch{display:inline-block;width:.8em;height:.8em;border-radius:2px;margin-right:.3em;vertical-align:-1px}
)css";

// Counts drawn elements per chart into data attributes (the browser test reads them back).
constexpr const char* kVerifyScript = R"js(
<script>
(function(){
  var errors = 0;
  window.addEventListener('error', function(){ errors++; document.body.dataset.jsErrors = errors; });
  window.addEventListener('load', function(){
    var figs = document.querySelectorAll('figure.chart');
    var drawn = 0;
    figs.forEach(function(f){
      var n = f.querySelectorAll('svg .mark').length;
      f.dataset.drawn = n;
      if (n > 0) drawn++;
    });
    document.body.dataset.charts = figs.length;
    document.body.dataset.chartsDrawn = drawn;
    document.body.dataset.jsErrors = errors;
    document.body.dataset.verified = 'yes';
  });
})();
</script>
)js";

// The document's head, the title and the warnings that hold for the whole page.
std::string PageHead(const std::vector<ReplayResult>& results, const HtmlReportOptions& options) {
  std::string s =
      absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>",
                   Escape(options.title), "</title>\n<style>", kStyle,
                   "</style></head><body>\n<h1>", Escape(options.title), "</h1>\n");
  if (!options.subtitle.empty())
    absl::StrAppend(&s, "<p class=\"sub\">", Escape(options.subtitle), "</p>\n");
  for (const ReplayResult& r : results) {
    if (!r.partial) continue;
    absl::StrAppend(&s, "<p class=\"sub\"><strong>PARTIAL: interrupted by ",
                    Escape(SignalName(r.interrupt_signal)),
                    "; the figures cover what was simulated until then.</strong></p>\n");
    break;
  }
  for (const ReplayResult& r : results) {
    if (r.overloaded) {
      absl::StrAppend(&s, "<p class=\"sub\"><strong>", Escape(OverloadWarning(r)),
                      "</strong></p>\n");
    }
  }
  return s;
}

}  // namespace

std::string HtmlReport(const std::vector<ReplayResult>& results, const HtmlReportOptions& options) {
  std::string s = PageHead(results, options);
  if (results.empty()) return s + "<p>No results.</p></body></html>\n";
  const html_report::PageInputs page{results, options, options.deltas && results.size() > 1,
                                     html_report::BinArrivals(results)};
  // Sections are numbered in page order; the miss causes, the tiers, the fleet and the parity
  // appear only when some result (or the options) have them, so the numbers after them move.
  const bool misses = std::any_of(results.begin(), results.end(),
                                  [](const ReplayResult& r) { return r.miss_causes.enabled; });
  const bool fleet = std::any_of(results.begin(), results.end(),
                                 [](const ReplayResult& r) { return r.fleet.has_value(); });
  const bool offload = std::any_of(results.begin(), results.end(),
                                   [](const ReplayResult& r) { return r.offload.enabled; });
  int number = 0;
  const int tune = options.tune != nullptr ? ++number : 0;
  const int plan = ++number, hit_rate = ++number, per_request = ++number;
  const int miss_causes = misses ? ++number : 0;
  const int offload_number = offload ? ++number : 0;
  const int latency = ++number, capacity = ++number, alignment = ++number;
  const int fleet_number = fleet ? ++number : 0;
  const int parity = ++number;

  if (options.tune != nullptr) s += html_report::TuneSection(*options.tune, tune);
  s += html_report::SummarySection(page, fleet_number);
  s += html_report::PlanSection(page, plan);
  s += html_report::HitRateOverTimeSection(page, hit_rate);
  s += html_report::PerRequestSection(page, per_request);
  if (misses) s += html_report::MissCauseSection(page, miss_causes);
  if (offload) s += html_report::OffloadSection(page, offload_number);
  s += html_report::LatencySection(page, latency);
  absl::StrAppend(&s, "<div class=\"row\">", html_report::CapacitySection(page, capacity),
                  html_report::AlignmentSection(page, alignment), "</div>\n");
  if (fleet) s += html_report::FleetSection(page, fleet_number);
  if (options.parity != nullptr) s += html_report::ParitySection(*options.parity, parity);
  s += kVerifyScript;
  s += "</body></html>\n";
  return s;
}

std::string ComparisonReportHtml(const std::vector<ReplayResult>& results,
                                 const std::string& title) {
  HtmlReportOptions options;
  options.title = title;
  return HtmlReport(results, options);
}

CapacitySweepPoint SweepPointOf(const ReplayResult& result, int64_t kv_cache_bytes) {
  CapacitySweepPoint p;
  p.policy = result.policy;
  p.kv_cache_bytes = kv_cache_bytes;
  p.num_blocks = result.plan.num_blocks;
  p.hit_rate = result.prefix_cache.hit_rate();
  p.lost_to_alignment_tokens = result.lost_to_alignment_tokens;
  p.queries = result.prefix_cache.queries;
  return p;
}

std::vector<CapacitySweepJob> PlanCapacitySweep(const std::vector<ReplayResult>& results,
                                                const std::vector<int64_t>& capacities,
                                                bool sized_by_bytes, HtmlReportOptions* page) {
  const std::set<int64_t> distinct(capacities.begin(), capacities.end());
  const int64_t configured = sized_by_bytes ? page->configured_kv_cache_bytes : 0;
  std::vector<CapacitySweepJob> jobs;
  for (size_t i = 0; i < results.size(); ++i) {
    if (configured > 0) page->capacity_sweep.push_back(SweepPointOf(results[i], configured));
    for (const int64_t bytes : distinct) {
      if (bytes != configured) jobs.push_back({i, bytes});
    }
  }
  return jobs;
}

}  // namespace prefixsim
