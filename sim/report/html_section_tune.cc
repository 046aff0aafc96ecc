// `prefixsim tune`'s section: what the search pruned, its ranked plans, and the replayed plans'
// hit rate against the memory their padding wastes.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/report/html_sections.h"

namespace prefixsim {
namespace html_report {
namespace {

// Rows shown in the table: the replayed plans, then the best-ranked others, at most this many.
constexpr size_t kTuneRows = 30;

std::string TuneCounts(const TuneFigures& t) {
  int64_t pruned = 0;
  for (const auto& [reason, count] : t.pruned) pruned += count;
  std::string s = absl::StrCat(
      "<p class=\"tune-counts\" data-considered=\"", t.considered, "\" data-distinct=\"",
      t.distinct, "\" data-replays=\"", t.replays, "\">", Thousands(t.considered),
      " combinations of the knobs: ", Thousands(pruned), " pruned, ", Thousands(t.duplicates),
      " giving a plan another already gave, ", Thousands(t.distinct),
      " distinct plans, ranked by "
      "the trace's hit at their alignment with an infinite cache (no replay exceeds it unless "
      "later prompts repeat earlier outputs); ",
      Thousands(t.replays), " replays on a trace of ", Thousands(t.trace_requests),
      " requests. Plans never replayed whose bound exceeds the recommended plan's hit: ",
      Thousands(t.unreplayed_above_best), ".</p>\n");
  if (!t.pruned.empty()) {
    s += "<ul class=\"tune-pruned\">";
    for (const auto& [reason, count] : t.pruned) {
      absl::StrAppend(&s, "<li>", Escape(reason), ": ", Thousands(count), "</li>");
    }
    s += "</ul>\n";
  }
  return s;
}

// Replayed plans on the whole trace: the front of hit rate against memory waste as a line, each
// baseline and the recommendation as a point of its own.
std::string FrontChart(const TuneFigures& t) {
  html::ChartSpec chart;
  chart.id = "tune-front";
  chart.title = "Replayed plans: hit rate against memory lost to padding";
  chart.x_label = "memory waste to padding (%)";
  chart.y_label = "prefix cache hit rate (%)";
  html::Series front{"front (no plan better on both)", {}, 0, "", false, true};
  std::vector<html::Series> points;
  int color = 1;
  for (const TuneFigures::Plan& p : t.plans) {
    if (p.replayed_requests != t.trace_requests) continue;
    const std::pair<double, double> xy{100 * p.memory_waste, 100 * p.hit_rate};
    if (p.pareto) front.points.push_back(xy);
    if (p.baseline || p.recommended) {
      points.push_back(html::Series{
          p.recommended ? p.label + " (recommended)" : p.label, {xy}, color++, "", false, true});
    }
  }
  std::sort(front.points.begin(), front.points.end());
  chart.series.push_back(std::move(front));
  for (html::Series& s : points) chart.series.push_back(std::move(s));
  chart.note =
      "Each replayed plan's hit rate on the whole trace against the share of a block its "
      "padding wastes; the line joins the plans no other beats on both.";
  return html::LineChart(chart);
}

std::string PlanTable(const TuneFigures& t) {
  const bool sized = t.objective == "replicas";
  std::string s =
      "<table class=\"tune\"><thead><tr><th>#</th><th class=\"text\">plan</th>"
      "<th class=\"text\">groups (block tokens)</th>"
      "<th>S</th><th>H</th><th>A</th><th>waste %</th><th>bound %</th><th>hit %</th>"
      "<th>requests</th>";
  if (sized) s += "<th>replicas</th><th>GPU-h per M requests</th>";
  s += "<th class=\"text\">vLLM</th></tr></thead><tbody>\n";
  for (size_t i = 0; i < t.plans.size() && i < kTuneRows; ++i) {
    const TuneFigures::Plan& p = t.plans[i];
    std::string label = Escape(p.label);
    if (p.recommended) label = absl::StrCat("<b>", label, "</b> (recommended)");
    if (p.baseline) absl::StrAppend(&label, " (baseline)");
    absl::StrAppend(
        &s, "<tr data-plan=\"", Escape(p.label), "\"><td>", i + 1, "</td><td class=\"text\">",
        label, p.pareto ? " &#9733;" : "", "</td><td class=\"text\">", Escape(p.groups),
        "</td><td>", Thousands(p.scheduler_block_size), "</td><td>", Thousands(p.hash_block_size),
        "</td><td>", Thousands(p.hit_alignment), "</td><td>", Number(100 * p.memory_waste, 2),
        "</td><td>", Number(100 * p.bound_hit_rate, 2), "</td><td>",
        p.replayed_requests > 0 ? Number(100 * p.hit_rate, 2) : std::string("-"), "</td><td>",
        p.replayed_requests > 0 ? Thousands(p.replayed_requests) : std::string("-"), "</td>");
    if (sized) {
      absl::StrAppend(
          &s, "<td>", p.replicas > 0 ? std::to_string(p.replicas) : std::string("-"), "</td><td>",
          p.replicas > 0 ? Number(p.gpu_hours_per_million, 1) : std::string("-"), "</td>");
    }
    absl::StrAppend(&s, "<td class=\"text\">", Escape(p.vllm), "</td></tr>\n");
  }
  s += "</tbody></table>\n";
  return s;
}

}  // namespace

std::string TuneSection(const TuneFigures& tune, int number) {
  std::string s = absl::StrCat("<h2 id=\"tune\">", number, ". The KV plan search</h2>\n");
  s += TuneCounts(tune);
  s += "<div class=\"charts\">";
  s += FrontChart(tune);
  s += "</div>\n";
  s += PlanTable(tune);
  s += "<p class=\"note\">&#9733;: on the front of replayed hit rate against memory waste. Plans "
       "with fewer requests were eliminated by successive halving on a prefix of the trace. The "
       "sections below compare the recommended plan with the baselines on the whole trace.</p>\n";
  return s;
}

}  // namespace html_report
}  // namespace prefixsim
