// The HTML report's "Why tokens missed" section (docs/design.md §7): stacked bars of the first
// admissions' tokens by cause per policy (and of the re-admissions after a preemption, when there
// are any), the table of tokens, shares and deltas with the evicted tokens by breaker, and each
// non-zero cause's share over time; absent when no replay attributed its misses.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prefixsim/miss_causes.h"
#include "sim/report/html_charts.h"
#include "sim/report/report.h"
#include "tests/engine/engine_test_util.h"
#include "tests/report/html_test_util.h"

namespace prefixsim {
namespace {

constexpr int kHit = static_cast<int>(MissCause::kHit);
constexpr int kNotCheckpointed = static_cast<int>(MissCause::kNotCheckpointed);

std::string Name(int cause) { return std::string(MissCauseName(static_cast<MissCause>(cause))); }

using testing_html::Section;

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

// The cells of the table row that starts with `open` (e.g. "<tr data-cause=\"tail\">").
std::vector<std::string> Cells(const std::string& table, const std::string& open) {
  const std::string row = Section(table, open, "</tr>");
  std::vector<std::string> cells;
  const std::regex cell("<td[^>]*>(.*?)</td>");
  for (auto it = std::sregex_iterator(row.begin(), row.end(), cell); it != std::sregex_iterator();
       ++it) {
    cells.push_back((*it)[1]);
  }
  return cells;
}

// A served request of `tokens[c]` tokens per cause c at `arrival_s`, attributed at its first
// admission.
RequestRecord Attributed(uint64_t id, double arrival_s,
                         std::array<int64_t, kNumMissCauses> tokens) {
  RequestRecord r;
  r.id = id;
  r.arrival_ns = static_cast<int64_t>(arrival_s * 1e9);
  r.miss.tokens = tokens;
  r.prompt_tokens = r.miss.total();
  r.hit_tokens = tokens[kHit];
  r.finish_ns = r.arrival_ns + 1;
  return r;
}

// Two policies over 20 requests of 50 tokens, one a second (two windows of 9.5 s: requests 0-9
// and 10-19). The first ten miss the same way under both; of the last ten, old leaves 15 tokens
// each unpublished (not_checkpointed) where new hits them, but one of new's requests finds 10 of
// its tokens evicted (broken at a sliding-window group). alignment, in_flight and elsewhere stay
// zero. Totals are the records' sums.
std::vector<ReplayResult> HandMade() {
  ReplayResult old_r, new_r;
  old_r.policy = "old";
  new_r.policy = "new";
  for (int i = 0; i < 20; ++i) {
    const double t = i;
    if (i < 10) {
      old_r.per_request.push_back(Attributed(i, t, {0, 0, 0, 0, 0, 0, 0, 45, 5}));
      new_r.per_request.push_back(Attributed(i, t, {0, 0, 0, 0, 0, 0, 0, 45, 5}));
    } else {
      old_r.per_request.push_back(Attributed(i, t, {20, 0, 15, 0, 0, 0, 0, 10, 5}));
      new_r.per_request.push_back(
          Attributed(i, t,
                     i == 15 ? std::array<int64_t, kNumMissCauses>{25, 0, 0, 0, 0, 10, 0, 10, 5}
                             : std::array<int64_t, kNumMissCauses>{35, 0, 0, 0, 0, 0, 0, 10, 5}));
    }
  }
  new_r.per_request[15].miss.evicted_by = EvictionBreaker::kSlidingWindow;
  for (ReplayResult* r : {&old_r, &new_r}) {
    r->miss_causes.enabled = true;
    for (const RequestRecord& rec : r->per_request) r->miss_causes.first.Add(rec.miss);
  }
  return {old_r, new_r};
}

TEST(HtmlMissCausesTest, HandMadeTotalsAreWhatTheTestSays) {
  const std::vector<ReplayResult> r = HandMade();
  EXPECT_EQ(r[0].miss_causes.first.tokens,
            (std::array<int64_t, kNumMissCauses>{200, 0, 150, 0, 0, 0, 0, 550, 100}));
  EXPECT_EQ(r[1].miss_causes.first.tokens,
            (std::array<int64_t, kNumMissCauses>{340, 0, 0, 0, 0, 10, 0, 550, 100}));
  EXPECT_EQ(r[0].miss_causes.first.admissions, 20);
  EXPECT_EQ(r[1].miss_causes.first.evicted_tokens_by,
            (std::array<int64_t, kNumEvictionBreakers>{0, 0, 10, 0, 0, 0}));
}

// One bar per policy, one segment per non-zero cause, each with the result's tokens and share.
TEST(HtmlMissCausesTest, BarsHaveTheResultsTokensPerCause) {
  const std::vector<ReplayResult> results = HandMade();
  const std::string page = ComparisonReportHtml(results, "misses");
  EXPECT_NE(page.find("<h2 id=\"miss-causes\">4. Why tokens missed</h2>"), std::string::npos);
  EXPECT_NE(page.find("<h2>5. Latency</h2>"), std::string::npos);
  const std::string chart =
      Section(page, "<figure class=\"chart\" data-chart=\"miss-causes\"", "</figure>");
  ASSERT_FALSE(chart.empty()) << page;
  int nonzero = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const MissCauseStats::Totals& t = results[i].miss_causes.first;
    for (int c = 0; c < kNumMissCauses; ++c) {
      const std::string segment =
          absl::StrCat("<rect class=\"mark\" data-series=\"", Name(c), "\" data-category=\"", i,
                       "\" data-value=\"", t.tokens[c], "\"");
      if (t.tokens[c] == 0) {
        EXPECT_EQ(
            chart.find(absl::StrCat("data-series=\"", Name(c), "\" data-category=\"", i, "\"")),
            std::string::npos)
            << Name(c);
        continue;
      }
      ++nonzero;
      const std::string rect = Section(chart, segment, "</rect>");
      ASSERT_FALSE(rect.empty()) << segment << "\n" << chart;
      // The tooltip: the bar, the cause, the tokens and the share of the bar's 1,000 tokens.
      EXPECT_NE(rect.find(absl::StrCat("<title>", results[i].policy, " &middot; ", Name(c), ": ",
                                       html::Thousands(t.tokens[c]), " tokens (",
                                       html::Number(100.0 * t.tokens[c] / 1000, 2), "%)</title>")),
                std::string::npos)
          << rect;
    }
  }
  EXPECT_EQ(nonzero, 8);
  EXPECT_EQ(Count(chart, "<rect class=\"mark\""), nonzero);
  // Bars labelled by policy alone (no re-admissions), a legend entry per cause in MissCause order.
  EXPECT_NE(chart.find(">old</text>"), std::string::npos);
  EXPECT_NE(chart.find(">new</text>"), std::string::npos);
  EXPECT_EQ(chart.find("preempted"), std::string::npos);
  size_t at = 0;
  for (int c = 0; c < kNumMissCauses; ++c) {
    const size_t found = chart.find(absl::StrCat(">", Name(c), "</text>"), at);
    ASSERT_NE(found, std::string::npos) << Name(c);
    at = found;
  }
  // The share written on a wide segment: compulsory, 55% of old's bar.
  EXPECT_NE(chart.find(">55.0%</text>"), std::string::npos);
  // One colour per cause: the legend's swatch, the segments and the caption's swatch agree.
  const std::string fill = "fill=\"#e8746a\"";  // not_checkpointed
  EXPECT_NE(Section(chart, "data-series=\"not_checkpointed\"", ">").find(fill), std::string::npos);
  EXPECT_NE(page.find("<span class=\"swatch\" style=\"background:#e8746a\"></span><b>"
                      "not_checkpointed</b>"),
            std::string::npos);
  // The caption explains every cause and points to the definitions.
  const std::string caption = Section(page, "<ul class=\"miss-cause-legend\">", "</ul>");
  for (int c = 0; c < kNumMissCauses; ++c) {
    EXPECT_NE(caption.find(absl::StrCat("<b>", Name(c), "</b>: ")), std::string::npos) << Name(c);
  }
  EXPECT_NE(page.find("docs/design.md &sect;7"), std::string::npos);
}

// The table: per cause, tokens and % per policy and the delta against the first; the evicted
// tokens by breaker where some policy has any; the totals.
TEST(HtmlMissCausesTest, TableHasTokensSharesDeltasAndBreakers) {
  const std::string page = ComparisonReportHtml(HandMade(), "misses");
  const std::string table =
      Section(page, "<table class=\"miss-causes\" data-admissions=\"first\">", "</table>");
  ASSERT_FALSE(table.empty()) << page;
  EXPECT_NE(table.find("<th>new &minus; old (tokens)</th>"), std::string::npos) << table;
  using V = std::vector<std::string>;
  EXPECT_EQ(Cells(table, "<tr data-cause=\"hit\">").size(), 6u);
  EXPECT_EQ(Cells(table, "<tr data-cause=\"hit\">")[1], "200");
  EXPECT_EQ(Cells(table, "<tr data-cause=\"not_checkpointed\">"),
            (V{Cells(table, "<tr data-cause=\"not_checkpointed\">")[0], "150", "15.00", "0", "0.00",
               "-150"}));
  EXPECT_NE(table.find("<td class=\"pos\">-150</td>"), std::string::npos);  // fewer misses
  EXPECT_NE(table.find("<td class=\"pos\">+140</td>"), std::string::npos);  // more hits
  const V hit = Cells(table, "<tr data-cause=\"hit\">");
  EXPECT_EQ(V(hit.begin() + 1, hit.end()), (V{"200", "20.00", "340", "34.00", "+140"}));
  const V evicted = Cells(table, "<tr data-cause=\"evicted\">");
  EXPECT_EQ(V(evicted.begin() + 1, evicted.end()), (V{"0", "0.00", "10", "1.00", "+10"}));
  const V compulsory = Cells(table, "<tr data-cause=\"compulsory\">");
  EXPECT_EQ(V(compulsory.begin() + 1, compulsory.end()), (V{"550", "55.00", "550", "55.00", "0"}));
  for (const char* zero : {"alignment", "in_flight", "elsewhere"}) {  // listed, all zero
    const V row = Cells(table, absl::StrCat("<tr data-cause=\"", zero, "\">"));
    EXPECT_EQ(V(row.begin() + 1, row.end()), (V{"0", "0.00", "0", "0.00", "0"})) << zero;
  }
  // Breakers: only the one with tokens, right after the evicted row.
  const V sliding = Cells(table, "<tr data-breaker=\"sliding_window\">");
  ASSERT_EQ(sliding.size(), 6u) << table;
  EXPECT_EQ(sliding[0], "&emsp;evicted, broken by sliding_window");
  EXPECT_EQ(V(sliding.begin() + 1, sliding.end()), (V{"0", "0.00", "10", "1.00", "+10"}));
  EXPECT_GT(table.find("<tr data-breaker=\"sliding_window\">"),
            table.find("<tr data-cause=\"evicted\">"));
  EXPECT_LT(table.find("<tr data-breaker=\"sliding_window\">"),
            table.find("<tr data-cause=\"elsewhere\">"));
  EXPECT_EQ(Count(table, "data-breaker="), 1);
  const V total = Cells(table, "<tr class=\"total\">");
  EXPECT_EQ(V(total.begin() + 1, total.end()), (V{"1,000", "100.00", "1,000", "100.00", "0"}));
  const V admissions = Cells(table, "<tr class=\"admissions\">");
  EXPECT_EQ(V(admissions.begin() + 1, admissions.end()), (V{"20", "", "20", "", "0"}));
  EXPECT_EQ(page.find("data-admissions=\"preempted\""), std::string::npos);

  // replay --html (no deltas): the same rows without the delta column.
  HtmlReportOptions options;
  options.deltas = false;
  const std::string single = HtmlReport({HandMade()[0]}, options);
  const std::string one = Section(single, "<table class=\"miss-causes\"", "</table>");
  EXPECT_EQ(one.find("&minus;"), std::string::npos);
  EXPECT_EQ(Cells(one, "<tr data-cause=\"not_checkpointed\">").size(), 3u);
}

// A policy with re-admissions after a preemption: a second bar per policy (an empty one for the
// policy without) and a second table.
TEST(HtmlMissCausesTest, PreemptedReadmissionsGetASecondBarPerPolicy) {
  std::vector<ReplayResult> results = HandMade();
  MissAttribution again;
  again.tokens = {60, 0, 0, 0, 0, 30, 0, 0, 10};
  results[1].miss_causes.preempted.Add(again);
  const std::string page = ComparisonReportHtml(results, "misses");
  const std::string chart =
      Section(page, "<figure class=\"chart\" data-chart=\"miss-causes\"", "</figure>");
  for (const char* label : {">old: first</text>", ">new: first</text>", ">old: preempted</text>",
                            ">new: preempted</text>"}) {
    EXPECT_NE(chart.find(label), std::string::npos) << label;
  }
  // Bars 0, 1: first admissions; 2: old's re-admissions (none); 3: new's.
  EXPECT_EQ(Count(chart, "<rect class=\"mark\""), 8 + 3);
  EXPECT_EQ(Count(chart, "data-category=\"2\""), 0);
  EXPECT_NE(chart.find(">none</text>"), std::string::npos);
  EXPECT_NE(chart.find("data-series=\"evicted\" data-category=\"3\" data-value=\"30\""),
            std::string::npos);
  EXPECT_NE(chart.find("<title>new: preempted &middot; hit: 60 tokens (60.00%)</title>"),
            std::string::npos)
      << chart;
  const std::string table =
      Section(page, "<table class=\"miss-causes\" data-admissions=\"preempted\">", "</table>");
  ASSERT_FALSE(table.empty());
  const std::vector<std::string> evicted = Cells(table, "<tr data-cause=\"evicted\">");
  EXPECT_EQ(std::vector<std::string>(evicted.begin() + 1, evicted.end()),
            (std::vector<std::string>{"0", "0.00", "30", "30.00", "+30"}));
}

// Per cause, its share in the windows of the hit rate over time, a line per policy; all-zero causes
// (and hit, which the hit rate over time shows) get no chart.
TEST(HtmlMissCausesTest, OverTimeChartsSkipAllZeroCauses) {
  const std::string page = ComparisonReportHtml(HandMade(), "misses");
  for (const char* absent : {"miss-over-time-hit", "miss-over-time-alignment",
                             "miss-over-time-in-flight", "miss-over-time-elsewhere"}) {
    EXPECT_EQ(page.find(absl::StrCat("data-chart=\"", absent, "\"")), std::string::npos) << absent;
  }
  for (const char* id : {"not-checkpointed", "evicted", "compulsory", "tail"}) {
    const std::string chart =
        Section(page, absl::StrCat("data-chart=\"miss-over-time-", id, "\""), "</figure>");
    ASSERT_FALSE(chart.empty()) << id;
    EXPECT_NE(chart.find(">old</text>"), std::string::npos) << id;  // a series per policy
    EXPECT_NE(chart.find(">new</text>"), std::string::npos) << id;
    EXPECT_EQ(Count(chart, "<circle class=\"mark\""), 4) << id;  // 2 windows each
  }
  // Windows of 9.5 s, drawn at 4.75 s and 14.25 s: not_checkpointed is 0 then 15 of 50 under old,
  // 0 under new; evicted 10 of 500 in new's second window; compulsory 45 of 50 then 10 of 50.
  const std::string nc =
      Section(page, "data-chart=\"miss-over-time-not-checkpointed\"", "</figure>");
  EXPECT_NE(nc.find("<title>old: (4.8, 0)</title>"), std::string::npos) << nc;
  EXPECT_NE(nc.find("<title>old: (14.3, 30)</title>"), std::string::npos) << nc;
  EXPECT_NE(nc.find("<title>new: (14.3, 0)</title>"), std::string::npos) << nc;
  const std::string ev = Section(page, "data-chart=\"miss-over-time-evicted\"", "</figure>");
  EXPECT_NE(ev.find("<title>new: (14.3, 2)</title>"), std::string::npos) << ev;
  const std::string co = Section(page, "data-chart=\"miss-over-time-compulsory\"", "</figure>");
  // Equal shares under both policies (compulsory, tail) are said to coincide, since one line
  // hides the other.
  EXPECT_NE(Section(page, "data-chart=\"miss-over-time-compulsory\"", "</p>").find("coincide"),
            std::string::npos);
  EXPECT_EQ(
      Section(page, "data-chart=\"miss-over-time-not-checkpointed\"", "</p>").find("coincide"),
      std::string::npos);
  EXPECT_NE(co.find("<title>old: (4.8, 90)</title>"), std::string::npos) << co;
  EXPECT_NE(co.find("<title>new: (14.3, 20)</title>"), std::string::npos) << co;
  // The same windows as the hit rate over time.
  EXPECT_NE(Section(page, "data-chart=\"hit-rate-over-time\"", "</figure>")
                .find("<title>old: (14.3, 40)</title>"),
            std::string::npos);
}

// No policy attributed its misses (--no-miss-causes, or prefix caching off): no section at all,
// and the sections after it keep their numbers.
TEST(HtmlMissCausesTest, SectionAbsentWhenNotEnabled) {
  std::vector<ReplayResult> results = HandMade();
  for (ReplayResult& r : results) r.miss_causes.enabled = false;
  const std::string page = ComparisonReportHtml(results, "misses");
  for (const char* absent :
       {"id=\"miss-causes\"", "data-chart=\"miss-causes\"", "class=\"miss-causes\"",
        "class=\"miss-cause-legend\"", "data-chart=\"miss-over-time"}) {
    EXPECT_EQ(page.find(absent), std::string::npos) << absent;
  }
  EXPECT_EQ(page.find("Why tokens missed"), std::string::npos);
  EXPECT_NE(page.find("<h2>4. Latency</h2>"), std::string::npos);
  EXPECT_NE(page.find("<h2>6. What the trace allows at each alignment</h2>"), std::string::npos);
  // One of two enabled: only that one takes part.
  results[1].miss_causes.enabled = true;
  const std::string one = ComparisonReportHtml(results, "misses");
  const std::string chart =
      Section(one, "<figure class=\"chart\" data-chart=\"miss-causes\"", "</figure>");
  EXPECT_EQ(chart.find(">old</text>"), std::string::npos);
  EXPECT_NE(chart.find(">new</text>"), std::string::npos);
  EXPECT_EQ(Count(chart, "<rect class=\"mark\""), 4);
  EXPECT_EQ(one.find("data-chart=\"miss-over-time-not-checkpointed\""), std::string::npos);
}

// The section takes number 4; the sections after it, and the summary's link to the fleet's, follow.
TEST(HtmlMissCausesTest, LaterSectionsAreNumberedAfterIt) {
  std::vector<ReplayResult> results = HandMade();
  for (ReplayResult& r : results) {
    r.fleet.emplace();
    r.fleet->replicas = 2;
    r.fleet->router = "round_robin";
    r.fleet->per_replica.resize(2);
  }
  const std::string with = ComparisonReportHtml(results, "misses");
  EXPECT_NE(with.find("<h2>7. What the trace allows at each alignment</h2>"), std::string::npos);
  EXPECT_NE(with.find("<h2 id=\"fleet\">8. Fleet: replicas behind a router</h2>"),
            std::string::npos);
  EXPECT_NE(with.find("<a href=\"#fleet\">section 8</a>"), std::string::npos);
  for (ReplayResult& r : results) r.miss_causes.enabled = false;
  const std::string without = ComparisonReportHtml(results, "misses");
  EXPECT_NE(without.find("<h2 id=\"fleet\">7. Fleet: replicas behind a router</h2>"),
            std::string::npos);
  EXPECT_NE(without.find("<a href=\"#fleet\">section 7</a>"), std::string::npos);
}

TEST(HtmlMissCausesTest, PageIsDeterministic) {
  const std::string a = ComparisonReportHtml(HandMade(), "misses");
  EXPECT_EQ(a, ComparisonReportHtml(HandMade(), "misses"));
}

// A real replay on a hybrid plan (full attention with 16-token blocks, sliding window with 24:
// S = A = 48) against full attention alone (A = 16), a request a second: each finds the earlier
// prompts cached, but under the hybrid plan only up to a multiple of 48, the rest computed and
// never published. The bars carry the replays' own totals, the over-time charts the causes that
// are non-zero, and a second replay gives the same page byte for byte.
TEST(HtmlMissCausesTest, RealReplayBarsMatchItsTotals) {
  const std::vector<int> lengths = {100, 40, 48, 49, 100, 300, 70, 130};
  auto run = [&] { return testing_html::HybridAndFullReplays(lengths); };
  const std::vector<ReplayResult> results = run();
  const std::string page = ComparisonReportHtml(results, "replay");
  EXPECT_EQ(page, ComparisonReportHtml(run(), "replay"));
  const std::string chart =
      Section(page, "<figure class=\"chart\" data-chart=\"miss-causes\"", "</figure>");
  ASSERT_FALSE(chart.empty());
  int nonzero = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const MissCauseStats& m = results[i].miss_causes;
    ASSERT_TRUE(m.enabled);
    EXPECT_EQ(m.first.admissions, static_cast<int64_t>(lengths.size()));
    // The records' sums are the totals (what the over-time charts divide up).
    std::array<int64_t, kNumMissCauses> sums{};
    for (const RequestRecord& rec : results[i].per_request) {
      for (int c = 0; c < kNumMissCauses; ++c) sums[c] += rec.miss.tokens[c];
    }
    EXPECT_EQ(sums, m.first.tokens);
    for (int c = 0; c < kNumMissCauses; ++c) {
      const std::string segment = absl::StrCat("data-series=\"", Name(c), "\" data-category=\"", i,
                                               "\" data-value=\"", m.first.tokens[c], "\"");
      if (m.first.tokens[c] > 0) {
        ++nonzero;
        EXPECT_NE(chart.find(segment), std::string::npos) << segment;
      } else {
        EXPECT_EQ(
            chart.find(absl::StrCat("data-series=\"", Name(c), "\" data-category=\"", i, "\"")),
            std::string::npos)
            << Name(c);
      }
    }
  }
  EXPECT_EQ(Count(chart, "<rect class=\"mark\""), nonzero);
  // The hybrid plan leaves prefixes unpublished that full attention hits.
  EXPECT_GT(results[0].miss_causes.first.tokens[kNotCheckpointed] +
                results[0].miss_causes.first.tokens[static_cast<int>(MissCause::kAlignment)],
            0);
  EXPECT_GT(results[1].miss_causes.first.tokens[kHit], results[0].miss_causes.first.tokens[kHit]);
  for (int c = 1; c < kNumMissCauses; ++c) {
    const bool any =
        results[0].miss_causes.first.tokens[c] > 0 || results[1].miss_causes.first.tokens[c] > 0;
    std::string id = Name(c);
    std::replace(id.begin(), id.end(), '_', '-');
    EXPECT_EQ(
        page.find(absl::StrCat("data-chart=\"miss-over-time-", id, "\"")) != std::string::npos, any)
        << Name(c);
  }
  EXPECT_NE(page.find("data-chart=\"miss-over-time-compulsory\""), std::string::npos);
  EXPECT_NE(page.find("data-chart=\"miss-over-time-tail\""), std::string::npos);
}

// The chart helper on its own: zero segments are not drawn, an empty bar says so, the legend
// wraps, and the shares fill the bar.
TEST(HtmlMissCausesTest, StackedShareBarChartHelper) {
  html::ChartSpec c;
  c.id = "s";
  c.title = "S";
  c.x_label = "share (%)";
  c.x_tick = [](double v) { return v == 0 ? std::string("a") : std::string("b"); };
  for (int k = 0; k < 6; ++k) {
    html::Series s;
    s.name = absl::StrCat("a_rather_long_series_name_", k);
    s.css_color = k == 0 ? "#123456" : "";
    s.color = k;
    s.points = {{0, k == 1 ? 0.0 : 1.0}, {1, 0.0}};
    c.series.push_back(std::move(s));
  }
  const std::string svg = html::StackedShareBarChart(c);
  EXPECT_EQ(Count(svg, "<rect class=\"mark\""), 5);
  EXPECT_NE(svg.find("data-series=\"a_rather_long_series_name_0\" data-category=\"0\" "
                     "data-value=\"1\""),
            std::string::npos);
  EXPECT_NE(svg.find("fill=\"#123456\""), std::string::npos);
  EXPECT_NE(svg.find(absl::StrCat("fill=\"", html::Color(2), "\"")), std::string::npos);
  EXPECT_NE(svg.find(">none</text>"), std::string::npos);  // bar "b" is empty
  EXPECT_NE(svg.find("(20.00%)</title>"), std::string::npos);
  // Six names of ~32 characters do not fit one 640-px row: the legend takes several rows.
  EXPECT_NE(svg.find("<text x=\"95.0\" y=\"38.0\">"), std::string::npos) << svg;
  html::ChartSpec empty;
  empty.id = "e";
  EXPECT_NE(html::StackedShareBarChart(empty).find("no data"), std::string::npos);
}

}  // namespace
}  // namespace prefixsim
