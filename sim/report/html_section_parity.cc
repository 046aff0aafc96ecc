// `prefixsim parity`: simulated against measured hit rate, and the recorded event log against the
// simulated one (agreement over time, the first divergence, per replica and group).
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/report/html_sections.h"

namespace prefixsim {
namespace html_report {
namespace {

// Per step, the share of the replicas whose cached sets agree after it.
std::string AgreementChart(const ParityFigures& p) {
  html::ChartSpec chart;
  chart.id = "parity-agreement";
  chart.title = "Replicas whose cached sets agree, by step";
  chart.x_label = "engine step (batch index)";
  chart.y_label = "agreeing (%)";
  chart.y_min = 0;
  chart.y_max = 100;
  html::Series series;
  series.name = "agreeing";
  // At most 200 points: bins of consecutive steps.
  const size_t n = p.replicas_at_step.size();
  const size_t bin = std::max<size_t>(1, (n + 199) / 200);
  for (size_t start = 0; start < n; start += bin) {
    int64_t have = 0, agree = 0;
    for (size_t i = start; i < std::min(n, start + bin); ++i) {
      have += p.replicas_at_step[i];
      agree += p.agreeing_at_step[i];
    }
    if (have > 0) {
      series.points.push_back({static_cast<double>(start),
                               100.0 * static_cast<double>(agree) / static_cast<double>(have)});
    }
  }
  chart.series.push_back(std::move(series));
  chart.note = "Step i is each replica's i-th event batch on both sides.";
  return html::LineChart(chart);
}

// Per replica and KV cache group, the stored and removed blocks on each side.
std::string ParityGroupTable(const ParityFigures& p) {
  std::string s =
      "<table class=\"parity-groups\"><thead><tr><th>replica</th><th>group</th>"
      "<th>stored sim / measured</th><th>removed sim / measured</th>"
      "<th>stored only by sim / measured</th><th>steps agreeing</th></tr></thead><tbody>";
  for (const ParityFigures::Group& g : p.groups) {
    absl::StrAppend(
        &s, "<tr data-replica=\"", g.replica, "\" data-group=\"", g.group, "\"><td>", g.replica,
        "</td><td>", g.group, "</td><td>", Thousands(g.stored_simulated), " / ",
        Thousands(g.stored_measured), "</td><td>", Thousands(g.removed_simulated), " / ",
        Thousands(g.removed_measured), "</td><td>", Thousands(g.stored_simulated_only), " / ",
        Thousands(g.stored_measured_only), "</td><td>", Thousands(g.steps_agreeing), "</td></tr>");
  }
  s += "</tbody></table>\n";
  return s;
}

}  // namespace

std::string ParitySection(const ParityFigures& p, int number) {
  auto rate = [](double hits, double queries) {
    return queries > 0 ? 100.0 * hits / queries : 0.0;
  };
  const double sim_rate =
      rate(static_cast<double>(p.simulated_hits), static_cast<double>(p.simulated_queries));
  std::string s =
      absl::StrCat("<h2 id=\"parity\">", number,
                   ". Parity with the measured run</h2>\n<table class=\"parity\">"
                   "<thead><tr><th></th><th>prefix-cache hit rate</th><th>hit tokens</th>"
                   "<th>queried tokens</th></tr></thead><tbody>");
  absl::StrAppend(&s, "<tr data-side=\"simulated\"><td>simulated</td><td>", Number(sim_rate, 2),
                  "%</td><td>", Thousands(p.simulated_hits), "</td><td>",
                  Thousands(p.simulated_queries), "</td></tr>");
  if (p.has_measured) {
    const double measured_rate = rate(p.measured_hits, p.measured_queries);
    absl::StrAppend(&s, "<tr data-side=\"measured\"><td>measured (vLLM's counters)</td><td>",
                    Number(measured_rate, 2), "%</td><td>", Thousands(p.measured_hits), "</td><td>",
                    Thousands(p.measured_queries), "</td></tr><tr><td>difference</td><td>",
                    Number(sim_rate - measured_rate, 2), " points</td><td></td><td></td></tr>");
  }
  s += "</tbody></table>\n";
  if (!p.has_events) return s;
  absl::StrAppend(&s, "<p class=\"parity-agreement\" data-steps=\"", p.steps, "\" data-agreeing=\"",
                  p.steps_agreeing, "\">KV events: the cached sets of every group agree after ",
                  Thousands(p.steps_agreeing), " of ", Thousands(p.steps), " steps (",
                  Number(p.steps > 0 ? 100.0 * p.steps_agreeing / p.steps : 100.0, 1), "%).");
  if (p.first_divergent_step >= 0) {
    absl::StrAppend(&s, " <span class=\"first-divergence\">First divergence: step ",
                    p.first_divergent_step, ", replica ", p.first_divergent_replica, ", group ",
                    p.first_divergent_group, ".</span>");
  }
  s += "</p>\n";
  for (const std::string& w : p.cannot_compare) {
    absl::StrAppend(&s, "<p class=\"note cannot-compare\"><b>Cannot compare:</b> ", Escape(w),
                    ".</p>\n");
  }
  s += "<div class=\"charts\">";
  s += AgreementChart(p);
  s += "</div>\n";
  s += ParityGroupTable(p);
  return s;
}

}  // namespace html_report
}  // namespace prefixsim
