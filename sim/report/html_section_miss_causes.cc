// Why tokens missed (docs/design.md §7): the tokens of every admission by miss cause, as stacked
// bars and tables per policy, what each cause means and what recovers it, and each cause's share
// over time.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "prefixsim/miss_causes.h"
#include "sim/report/html_sections.h"

namespace prefixsim {
namespace html_report {
namespace {

// One colour per cause on the whole page, apart from the policies' palette: green for the hit,
// reds for what a block-size policy recovers (alignment, not_checkpointed), orange for what the
// retention interval recovers (sparse_retention), yellow for work in progress, purple for what
// memory recovers (evicted), teal for what a router recovers (elsewhere), greys for what nothing
// recovers (compulsory, tail). In MissCause order.
constexpr const char* kCauseColors[kNumMissCauses] = {"#4e9f50", "#b8312f", "#e8746a",
                                                      "#f28e2b", "#edc948", "#8f6bb3",
                                                      "#3fa3a6", "#7f7f7f", "#c7c7c7"};

// What each cause means, in MissCause order (docs/design.md §7 has the exact definitions).
constexpr const char* kCauseMeanings[kNumMissCauses] = {
    "served from the cache.",
    "what the LCM costs: computed on this replica, but the round-down to the scheduler block S "
    "kept it unpublished (the PR #53007 case), or every group has it cached at its own block "
    "boundary and the hit is cut back to a multiple of the hit alignment A, or another replica "
    "holds it but could not serve it either. A block-size policy recovers it.",
    "computed and published on this replica, but a group never cached what a hit there needs, "
    "under any retention interval: a mamba state between checkpoints (no step ended there) or "
    "skipped in a verify step, a sliding window never whole. No pool size recovers it; the plan "
    "can.",
    "computed and published on this replica, but the retention interval "
    "(prefix_cache_retention_interval) left unpublished a sliding window or mamba state that "
    "dense retention would have cached (vLLM's sparse-retention misses). Dense retention, or a "
    "smaller interval, recovers it.",
    "another request on this replica is computing it right now.",
    "computed before (in a hybrid plan: cached by every group) and evicted since; the table "
    "names the group kind whose lookup broke the chain (or other_replica). More KV memory "
    "recovers it.",
    "another replica's own lookup would have hit it when the request arrived: a routing miss, "
    "which a router recovers (the routing regret's definition).",
    "no replica had computed it when the request arrived: the prefix's first occurrence. "
    "Nothing recovers it.",
    "no lookup rule lets it hit: the last prompt token (always recomputed), the partial last "
    "block, an EAGLE drafter's drop. Nothing recovers it.",
};

std::string CauseName(int c) { return std::string(MissCauseName(static_cast<MissCause>(c))); }

std::string CauseSwatch(int c) {
  return absl::StrFormat("<span class=\"swatch\" style=\"background:%s\"></span>", kCauseColors[c]);
}

// Chart ids keep to [a-z0-9-]: "not_checkpointed" -> "not-checkpointed".
std::string CauseId(int c) {
  std::string id = CauseName(c);
  std::replace(id.begin(), id.end(), '_', '-');
  return id;
}

using MissTotals = MissCauseStats::Totals;
using MissTotalsOf = const MissTotals& (*)(const ReplayResult&);
const MissTotals& FirstAdmissions(const ReplayResult& r) { return r.miss_causes.first; }
const MissTotals& PreemptedAdmissions(const ReplayResult& r) { return r.miss_causes.preempted; }

// A delta cell of a miss-cause table: signed tokens, green when better (more hit, fewer misses),
// uncoloured for counts that are neither.
std::string MissDeltaCell(int64_t d, int better_sign) {
  const char* cls = d == 0 || better_sign == 0 ? "" : (d > 0) == (better_sign > 0) ? "pos" : "neg";
  return absl::StrCat("<td class=\"", cls, "\">", d > 0 ? "+" : "", Thousands(d), "</td>");
}

// Stacked bars of the tokens by cause: one bar per policy for the first admissions, and when
// some policy re-admitted preempted requests, one more per policy for those. `shown`: the results
// that attributed their misses.
std::string MissCauseBars(const std::vector<ReplayResult>& results,
                          const std::vector<size_t>& shown, bool preempted) {
  std::vector<std::string> labels;
  std::vector<const MissTotals*> bars;
  for (MissTotalsOf of : {&FirstAdmissions, &PreemptedAdmissions}) {
    if (of == &PreemptedAdmissions && !preempted) break;
    for (size_t i : shown) {
      labels.push_back(!preempted               ? results[i].policy
                       : of == &FirstAdmissions ? results[i].policy + ": first"
                                                : results[i].policy + ": preempted");
      bars.push_back(&of(results[i]));
    }
  }
  html::ChartSpec c;
  c.id = "miss-causes";
  c.title = preempted ? "Why tokens missed: first admissions and re-admissions after a preemption"
                      : "Why tokens missed: first admissions";
  c.x_label = "share of the tokens looked up (%)";
  c.x_tick = [labels](double v) { return labels[static_cast<size_t>(std::lround(v))]; };
  c.y_tick = [](double v) { return Thousands(std::llround(v)) + " tokens"; };
  for (int k = 0; k < kNumMissCauses; ++k) {
    html::Series s;
    s.name = CauseName(k);
    s.css_color = kCauseColors[k];
    for (size_t b = 0; b < bars.size(); ++b) {
      s.points.emplace_back(static_cast<double>(b), static_cast<double>(bars[b]->tokens[k]));
    }
    c.series.push_back(std::move(s));
  }
  c.note =
      "Each bar splits the tokens its admissions looked up (the prompt at a first admission; "
      "prompt and outputs at a re-admission after a preemption) into causes, left to right in "
      "the order they take tokens; a segment's tooltip gives its tokens.";
  return html::StackedShareBarChart(c);
}

// Per cause, tokens and share per policy and the deltas against the first shown policy, then
// the evicted tokens by the group kind that broke the chain, where some policy has any.
std::string MissCauseTable(const std::vector<ReplayResult>& results,
                           const std::vector<size_t>& shown, bool deltas, MissTotalsOf of,
                           const char* kind, const char* caption) {
  deltas = deltas && shown.size() > 1;
  const ReplayResult& base = results[shown[0]];
  std::string s = absl::StrCat("<table class=\"miss-causes\" data-admissions=\"", kind,
                               "\"><caption>", caption, "</caption><thead><tr><th>cause</th>");
  for (size_t i : shown) {
    absl::StrAppend(&s, "<th>", Swatch(static_cast<int>(i)), Escape(results[i].policy),
                    " (tokens)</th><th>", Escape(results[i].policy), " (%)</th>");
  }
  if (deltas) {
    for (size_t k = 1; k < shown.size(); ++k) {
      absl::StrAppend(&s, "<th>", Escape(results[shown[k]].policy), " &minus; ",
                      Escape(base.policy), " (tokens)</th>");
    }
  }
  s += "</tr></thead><tbody>\n";
  // One row: its name cell, then tokens and % per policy, then the deltas.
  auto row = [&](const std::string& head, auto get, bool with_share, int better_sign) {
    s += head;
    for (size_t i : shown) {
      const MissTotals& t = of(results[i]);
      absl::StrAppend(&s, "<td>", Thousands(get(t)), "</td><td>",
                      with_share ? Number(Pct(get(t), t.total_tokens()), 2) : "", "</td>");
    }
    if (deltas) {
      for (size_t k = 1; k < shown.size(); ++k) {
        s += MissDeltaCell(get(of(results[shown[k]])) - get(of(base)), better_sign);
      }
    }
    s += "</tr>\n";
  };
  for (int c = 0; c < kNumMissCauses; ++c) {
    row(
        absl::StrCat("<tr data-cause=\"", CauseName(c), "\"><td>", CauseSwatch(c), CauseName(c),
                     "</td>"),
        [c](const MissTotals& t) { return t.tokens[c]; }, true, c == 0 ? 1 : -1);
    if (static_cast<MissCause>(c) != MissCause::kEvicted) continue;
    for (int b = 0; b < kNumEvictionBreakers; ++b) {
      const bool any = std::any_of(shown.begin(), shown.end(), [&](size_t i) {
        return of(results[i]).evicted_tokens_by[b] > 0;
      });
      if (!any) continue;
      const std::string name(EvictionBreakerName(static_cast<EvictionBreaker>(b)));
      row(
          absl::StrCat("<tr data-breaker=\"", name, "\"><td>&emsp;evicted, broken by ", name,
                       "</td>"),
          [b](const MissTotals& t) { return t.evicted_tokens_by[b]; }, true, -1);
    }
    const bool tiers = std::any_of(shown.begin(), shown.end(),
                                   [&](size_t i) { return results[i].miss_causes.tiers; });
    if (!tiers) continue;
    row(
        "<tr data-tier-cause=\"evicted_from_tier\"><td>&emsp;evicted, stored and evicted from a "
        "tier</td>",
        [](const MissTotals& t) { return t.tier_evicted_tokens; }, true, -1);
    row(
        "<tr data-tier-cause=\"not_stored\"><td>&emsp;evicted, never stored in a tier</td>",
        [](const MissTotals& t) { return t.tier_not_stored_tokens; }, true, -1);
  }
  row(
      "<tr class=\"total\"><td>tokens looked up</td>",
      [](const MissTotals& t) { return t.total_tokens(); }, true, 0);
  row(
      "<tr class=\"admissions\"><td>admissions</td>",
      [](const MissTotals& t) { return t.admissions; }, false, 0);
  s += "</tbody></table>\n";
  return s;
}

// Per cause, its share of the first admissions' tokens in the windows of the hit rate over time.
// One chart per cause with a line per policy, rather than one per policy with a line per cause:
// the page compares policies, and a cause's lines on one axis show what a policy recovers and
// when (not_checkpointed growing with a conversation's turns under one policy and flat under the
// other); the policies keep the colours they have in every other chart; and each chart's axis
// fits its own cause, so a cause of a few percent is not flattened under one of sixty. Causes
// that are zero for every policy get no chart, and neither does hit: its share over time is the
// hit rate over time (hit tokens / prompt tokens of the same windows).
std::string MissCausesOverTime(const std::vector<ReplayResult>& results,
                               const std::vector<size_t>& shown, const ArrivalBins& a) {
  std::string out;
  for (int k = 1; k < kNumMissCauses; ++k) {
    const bool any = std::any_of(shown.begin(), shown.end(), [&](size_t i) {
      return results[i].miss_causes.first.tokens[k] > 0;
    });
    if (!any) continue;
    html::ChartSpec c;
    c.id = "miss-over-time-" + CauseId(k);
    c.title = absl::StrCat("Share of tokens missed as ", CauseName(k), " over time");
    c.x_label = "arrival time since the first request (s)";
    c.y_label = absl::StrCat(CauseName(k), " / tokens looked up (%)");
    c.y_min = 0;
    double top = 0;
    for (size_t i : shown) {
      html::Series s = WindowShareSeries(
          results[i], static_cast<int>(i), a,
          [k](const RequestRecord& r) { return r.miss.tokens[k]; },
          [](const RequestRecord& r) { return r.miss.total(); });
      for (const auto& p : s.points) top = std::max(top, p.second);
      c.series.push_back(std::move(s));
    }
    if (top > 80) c.y_max = 100;
    c.note = absl::StrCat(CauseSwatch(k), "<b>", CauseName(k),
                          "</b> tokens / tokens looked up at the first admissions of each "
                          "window's requests (the windows of the hit rate over time).");
    const bool same = std::all_of(c.series.begin(), c.series.end(), [&](const html::Series& s) {
      return s.points == c.series[0].points;
    });
    if (c.series.size() > 1 && same) c.note += " The policies' lines coincide.";
    out += html::LineChart(c);
  }
  return out;
}

}  // namespace

// The bars and the tables, what each cause means, and the causes over time.
std::string MissCauseSection(const PageInputs& page, int number) {
  const std::vector<ReplayResult>& results = page.results;
  std::vector<size_t> shown;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].miss_causes.enabled) shown.push_back(i);
  }
  const bool preempted = std::any_of(shown.begin(), shown.end(), [&](size_t i) {
    return results[i].miss_causes.preempted.admissions > 0;
  });
  // The bars beside what the causes mean, the tables under them (wider than a half-page section),
  // then the causes over time.
  std::string s = absl::StrCat("<h2 id=\"miss-causes\">", number,
                               ". Why tokens missed</h2>\n<div class=\"row\"><section>",
                               MissCauseBars(results, shown, preempted), "</section>\n<section>");
  s += "<p class=\"note\">Every admission's tokens are split into causes that add up to the "
       "tokens it looked up. Each cause takes the tokens past the previous one's end, up to how "
       "far a richer cache would have hit; the definitions and the oracles are in "
       "docs/design.md &sect;7.</p>\n<ul class=\"miss-cause-legend\">";
  for (int c = 0; c < kNumMissCauses; ++c) {
    absl::StrAppend(&s, "<li>", CauseSwatch(c), "<b>", CauseName(c), "</b>: ", kCauseMeanings[c],
                    "</li>");
  }
  s += "</ul></section></div>\n<div class=\"tables\">";
  s += MissCauseTable(results, shown, page.deltas, &FirstAdmissions, "first", "First admissions");
  if (preempted) {
    s += MissCauseTable(results, shown, page.deltas, &PreemptedAdmissions, "preempted",
                        "Re-admissions after a preemption");
  }
  s += "</div>\n<p class=\"note\">Shares are of the tokens looked up by the policy's "
       "admissions; the evicted rows split the evicted tokens by the group kind whose own lookup "
       "came back shortest (other_replica: only other replicas had computed them).</p>\n"
       "<div class=\"charts\">";
  s += MissCausesOverTime(results, shown, page.arrival_bins);
  s += "</div>\n";
  return s;
}

}  // namespace html_report
}  // namespace prefixsim
