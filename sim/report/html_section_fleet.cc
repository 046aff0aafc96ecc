// For fleet runs: per policy the router, the auto-sizing probes and the per-replica table, then
// the load and hit rate of each replica as bars and the routing regret over time.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sim/report/html_sections.h"

namespace prefixsim {
namespace html_report {
namespace {

// The router and how evenly and how well it routed, and how auto-sizing chose the size.
std::string FleetFacts(const FleetSummary& f) {
  std::string s = absl::StrCat("<ul><li>", f.replicas, f.replicas == 1 ? " replica" : " replicas",
                               " behind router <span class=\"math\">", Escape(f.router), "</span>");
  if (f.overlap_weight > 0)
    absl::StrAppend(&s, " (overlap weight ", Number(f.overlap_weight, 2), ")");
  if (!f.router_view.empty())
    absl::StrAppend(&s, " on the <span class=\"math\">", Escape(f.router_view),
                    "</span> view of the caches");
  absl::StrAppend(&s, "</li><li>load imbalance ", Number(f.imbalance, 2),
                  " (max / mean requests per replica; 1 is even)</li>");
  if (f.router_fallback_requests > 0) {
    absl::StrAppend(&s, "<li class=\"router-fallback\">router <span class=\"math\">",
                    Escape(f.router), "</span>: ", f.router_fallback_requests, " requests ",
                    Escape(f.router_fallback), "</li>");
  }
  if (f.replicas > 1) {
    absl::StrAppend(&s, "<li class=\"routing-regret\" data-tokens=\"", f.routing_regret_tokens,
                    "\">routing regret ", f.routing_regret_tokens, " tokens (",
                    Number(f.best_replica_hit_tokens > 0
                               ? 100.0 * static_cast<double>(f.routing_regret_tokens) /
                                     static_cast<double>(f.best_replica_hit_tokens)
                               : 0.0,
                           2),
                    "% of the ", f.best_replica_hit_tokens,
                    " tokens the best replicas would have hit), ", f.requests_with_regret,
                    " requests sent past a replica with a longer hit</li>");
  }
  if (f.auto_sized) {
    absl::StrAppend(&s,
                    "<li><span class=\"math\">`replicas=auto`</span>: the smallest fleet not "
                    "overloaded whose simulated span is at most 1.1 &times; the trace span (",
                    Number(static_cast<double>(f.trace_span_ns) / 1e9, 1),
                    " s) and whose p99 TTFT is within ", Number(f.ttft_slo_ms, 0),
                    " ms; sizes in the order tried:</li>");
  }
  s += "</ul>\n";
  return s;
}

// The fleet sizes auto-sizing tried, in order, and the verdict on each.
std::string ProbeTable(const std::string& policy, const FleetSummary& f) {
  std::string s = absl::StrCat("<table class=\"fleet-probes\" data-policy=\"", Escape(policy),
                               "\"><thead><tr><th>replicas tried</th><th>simulated span (s)</th>"
                               "<th>trace span (s)</th><th>span ratio</th><th>TTFT p99 (ms)</th>"
                               "<th>verdict</th></tr></thead><tbody>");
  const double span_s = static_cast<double>(f.trace_span_ns) / 1e9;
  for (const AutoSizeProbe& p : f.probes) {
    const double sim_s = static_cast<double>(p.sim_time_ns) / 1e9;
    const char* verdict = p.keeps_up     ? "keeps up"
                          : p.thrashed   ? "thrashed"
                          : p.overloaded ? "overloaded"
                                         : "falls behind";
    // A thrashed probe stopped early: its span and TTFT are unknown, not 0.
    absl::StrAppend(&s, "<tr data-replicas=\"", p.replicas, "\"",
                    p.replicas == f.replicas ? " class=\"chosen\"" : "", "><td>", p.replicas,
                    p.replicas == f.replicas ? " (chosen)" : "", "</td><td>",
                    p.thrashed ? "&ndash;" : Number(sim_s, 1), "</td><td>", Number(span_s, 1),
                    "</td><td>", p.thrashed || span_s <= 0 ? "&ndash;" : Number(sim_s / span_s, 2),
                    "</td><td>", p.thrashed ? "&ndash;" : Number(p.ttft_p99_ms, 1),
                    "</td><td class=\"", p.keeps_up ? "pos" : "neg", "\">", verdict, "</td></tr>");
  }
  s += "</tbody></table>\n";
  return s;
}

// Each replica's load and cache, by replica index.
std::string ReplicaTable(const std::string& policy, const FleetSummary& f) {
  std::string s;
  absl::StrAppend(&s, "<table class=\"fleet-replicas\" data-policy=\"", Escape(policy),
                  "\"><thead><tr><th>replica</th><th>requests</th><th>finished</th>"
                  "<th>hit rate (%)</th><th>preemptions</th><th>evicted blocks</th>"
                  "<th>KV use (%)</th></tr></thead><tbody>");
  for (size_t i = 0; i < f.per_replica.size(); ++i) {
    const ReplicaSummary& rep = f.per_replica[i];
    absl::StrAppend(&s, "<tr data-replica=\"", i, "\"><td>", i, "</td><td>",
                    Thousands(rep.requests), "</td><td>", Thousands(rep.finished_requests),
                    "</td><td>", Number(100.0 * rep.prefix_cache.hit_rate(), 2), "</td><td>",
                    Thousands(rep.preemptions), "</td><td>", Thousands(rep.evicted_blocks),
                    "</td><td>", Number(100.0 * rep.mean_kv_usage, 1), "</td></tr>");
  }
  s += "</tbody></table>";
  return s;
}

// One policy's fleet. The tables carry data attributes (policy, replica) so that tests and
// scripts can find the rows.
std::string FleetCard(const ReplayResult& r, int index) {
  const FleetSummary& f = *r.fleet;
  std::string s =
      absl::StrCat("<div class=\"plan fleet\" data-policy=\"", Escape(r.policy), "\"><h3>",
                   Swatch(index), Escape(r.policy), "</h3>\n", FleetFacts(f));
  if (f.auto_sized) s += ProbeTable(r.policy, f);
  absl::StrAppend(&s, ReplicaTable(r.policy, f), "</div>\n");
  return s;
}

// Requests and hit rate per replica, one bar per policy.
std::string FleetCharts(const std::vector<ReplayResult>& results) {
  html::ChartSpec load, hits;
  load.id = "fleet-load";
  load.title = "Requests routed to each replica";
  load.y_label = "requests";
  hits.id = "fleet-hit-rate";
  hits.title = "Prefix cache hit rate of each replica";
  hits.y_label = "hit rate, token-weighted (%)";
  hits.y_max = 100;
  for (html::ChartSpec* c : {&load, &hits}) {
    c->x_label = "replica";
    c->y_min = 0;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].fleet) continue;
    html::Series l, h;
    l.name = h.name = results[i].policy;
    l.color = h.color = static_cast<int>(i);
    const auto& per_replica = results[i].fleet->per_replica;
    for (size_t k = 0; k < per_replica.size(); ++k) {
      l.points.emplace_back(static_cast<double>(k), static_cast<double>(per_replica[k].requests));
      h.points.emplace_back(static_cast<double>(k), 100.0 * per_replica[k].prefix_cache.hit_rate());
    }
    load.series.push_back(std::move(l));
    hits.series.push_back(std::move(h));
  }
  load.note =
      "An even router gives bars of one height; load imbalance is the tallest bar over "
      "the mean.";
  hits.note =
      "Each replica's own cache: hit tokens / prompt tokens of the requests it served "
      "(first admission).";
  return html::BarChart(load) + html::BarChart(hits);
}

// Per request, the routing regret: the tokens the best replica would have hit at arrival beyond
// what the chosen one hit. Over time, because a router's view goes stale or fills up as the
// trace goes on (a lossy view's losses add up; an approximate view's bound starts to forget).
std::string RoutingRegretOverTime(const std::vector<ReplayResult>& results, const ArrivalBins& a) {
  html::ChartSpec c;
  c.id = "routing-regret-over-time";
  c.title = "Routing regret over time";
  c.x_label = "arrival time since the first request (s)";
  c.y_label = "regret / prompt tokens (%)";
  c.y_min = 0;
  if (a.bins > 0) {
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].fleet) continue;
      c.series.push_back(WindowShareSeries(
          results[i], static_cast<int>(i), a,
          [](const RequestRecord& r) { return r.routing_regret_tokens; },
          [](const RequestRecord& r) { return r.prompt_tokens; }));
    }
    c.note = absl::StrCat(
        "Per window of ", Number(a.width_ns / 1e9, 1),
        " s by arrival: the tokens the best replica would have hit at each request's arrival "
        "beyond what the router's choice hit, over the window's prompt tokens. Zero: the router "
        "always found the longest hit.");
  }
  return html::LineChart(c);
}

}  // namespace

std::string FleetSection(const PageInputs& page, int number) {
  const std::vector<ReplayResult>& results = page.results;
  std::string s = absl::StrCat("<h2 id=\"fleet\">", number,
                               ". Fleet: replicas behind a router</h2>\n<div class=\"plans\">\n");
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].fleet) s += FleetCard(results[i], static_cast<int>(i));
  }
  s += "</div>\n<div class=\"charts\">";
  s += FleetCharts(results);
  s += RoutingRegretOverTime(results, page.arrival_bins);
  s += "</div>\n";
  return s;
}

}  // namespace html_report
}  // namespace prefixsim
