// The HTML report's helpers (number formatting, the SVG chart) and the --capacities parser.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/cli/html_page.h"
#include "sim/report/html_charts.h"
#include "sim/report/report.h"
#include "tests/cli_runner.h"
#include "tests/engine/engine_test_util.h"
#include "tests/report/html_test_util.h"

namespace prefixsim {
namespace {

TEST(HtmlReportTest, NumbersHaveThousandsSeparators) {
  EXPECT_EQ(html::Thousands(0), "0");
  EXPECT_EQ(html::Thousands(999), "999");
  EXPECT_EQ(html::Thousands(13824), "13,824");
  EXPECT_EQ(html::Thousands(1234567), "1,234,567");
  EXPECT_EQ(html::Thousands(-1774080), "-1,774,080");
  EXPECT_EQ(html::Number(1234.56, 1), "1,234.6");
  EXPECT_EQ(html::Number(-12288, 0), "-12,288");
  EXPECT_EQ(html::Number(-0.001, 2), "0.00");
  EXPECT_EQ(html::Number(0.5, 3), "0.500");
  EXPECT_EQ(html::Bytes(68719476736.0), "64 GiB");
  EXPECT_EQ(html::Bytes(1.5 * 1099511627776.0), "1.5 TiB");
  EXPECT_EQ(html::Escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
}

TEST(HtmlReportTest, ChartHasAxesLegendAndMarks) {
  html::ChartSpec c;
  c.id = "t";
  c.title = "T";
  c.x_label = "x (s)";
  c.y_label = "y (%)";
  c.series.push_back(html::CdfSeries("old", {1, 2, 2, 3}, 0));
  c.markers.push_back({2, "A", 1});
  const std::string svg = html::LineChart(c);
  EXPECT_NE(svg.find("data-chart=\"t\""), std::string::npos);
  EXPECT_NE(svg.find("x (s)"), std::string::npos);
  EXPECT_NE(svg.find("y (%)"), std::string::npos);
  EXPECT_NE(svg.find(">old</text>"), std::string::npos);  // legend
  EXPECT_NE(svg.find("class=\"mark\""), std::string::npos);
  EXPECT_EQ(c.series[0].points.size(), 3u);  // one point per distinct value
  EXPECT_DOUBLE_EQ(c.series[0].points[1].second, 0.75);
  html::ChartSpec empty;
  empty.id = "e";
  EXPECT_NE(html::LineChart(empty).find("no data"), std::string::npos);
}

TEST(HtmlReportTest, EmptyAndPlainResultsRender) {
  EXPECT_NE(HtmlReport({}, {}).find("No results"), std::string::npos);
  ReplayResult r;
  r.policy = "p";
  const std::string page = ComparisonReportHtml({r}, "title");
  EXPECT_NE(page.find("<h1>title</h1>"), std::string::npos);
  EXPECT_NE(page.find("data-chart=\"capacity-sweep\""), std::string::npos);
  EXPECT_NE(page.find("analyze did not run"), std::string::npos);
}

TEST(HtmlReportTest, ParseCapacities) {
  auto c = cli::ParseCapacities("16GiB, 1TiB,4096,512MiB");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, (std::vector<int64_t>{17179869184, 1099511627776, 4096, 536870912}));
  EXPECT_TRUE(cli::ParseCapacities("").ok());
  EXPECT_FALSE(cli::ParseCapacities("16XiB").ok());
  EXPECT_FALSE(cli::ParseCapacities("-1GiB").ok());
  EXPECT_FALSE(cli::ParseCapacities("0").ok());
}

// --capacities is checked before any replay runs: it needs --html and valid sizes (exit 2).
TEST(HtmlReportTest, CapacitiesFlagErrors) {
  const std::string base = "compare --trace " PREFIXSIM_SOURCE_DIR
                           "/traces/sample_chat.jsonl --model kimi-k3-like --engine "
                           "kimi-k3-dspark --no-progress";
  const auto no_html = testing::RunCli(base + " --capacities 4GiB");
  EXPECT_EQ(no_html.exit_code, 2) << no_html.output;
  EXPECT_NE(no_html.output.find("--html"), std::string::npos) << no_html.output;
  const auto bad = testing::RunCli(base + " --capacities 4XB --html /dev/null");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("'4XB' is not a size"), std::string::npos) << bad.output;
  EXPECT_EQ(bad.output.find("hit rate"), std::string::npos) << "replayed before failing";
}

using testing_html::Section;

RequestRecord Served(uint64_t id, int64_t prompt_tokens, int64_t hit_tokens) {
  RequestRecord r;
  r.id = id;
  r.prompt_tokens = prompt_tokens;
  r.hit_tokens = hit_tokens;
  r.finish_ns = 1;
  return r;
}

// The block-size cliff chart from hand-made records: power-of-two bins (token-weighted, served
// requests only, empty bins shown as such in the table), each policy's A and S marked.
TEST(HtmlReportTest, CliffChartBinsAndMarksEachPolicy) {
  ReplayResult old_r, new_r;
  old_r.policy = "old";
  old_r.plan.hit_alignment = old_r.plan.scheduler_block_size = 48;
  new_r.policy = "new";
  new_r.plan.hit_alignment = 16;  // fine-grained hits: A = H below S
  new_r.plan.scheduler_block_size = 48;
  old_r.per_request = {Served(0, 10, 0), Served(1, 100, 48), Served(2, 120, 96),
                       Served(3, 1000, 960)};
  new_r.per_request = {Served(0, 10, 0), Served(1, 100, 96), Served(2, 120, 112),
                       Served(3, 1000, 992)};
  for (ReplayResult* r : {&old_r, &new_r}) {
    RequestRecord skipped = Served(4, 50, 0);
    skipped.skipped = "does_not_fit";  // not admitted: not in the chart
    r->per_request.push_back(skipped);
  }
  const std::string page = ComparisonReportHtml({old_r, new_r}, "cliff");
  EXPECT_EQ(page, ComparisonReportHtml({old_r, new_r}, "cliff"));  // deterministic

  const std::string chart =
      Section(page, "<figure class=\"chart\" data-chart=\"block-size-cliff\"", "</figure>");
  ASSERT_FALSE(chart.empty()) << page;
  EXPECT_NE(chart.find(">old</text>"), std::string::npos);  // one series per policy
  EXPECT_NE(chart.find(">new</text>"), std::string::npos);
  EXPECT_NE(chart.find(">old: A = S = 48</text>"), std::string::npos) << chart;
  EXPECT_NE(chart.find(">new: A = 16</text>"), std::string::npos) << chart;
  EXPECT_NE(chart.find(">new: S = 48</text>"), std::string::npos) << chart;
  // 3 non-empty bins per policy, one dot each.
  size_t dots = 0;
  for (size_t at = chart.find("<circle class=\"mark\""); at != std::string::npos;
       at = chart.find("<circle class=\"mark\"", at + 1)) {
    ++dots;
  }
  EXPECT_EQ(dots, 6u);

  // The table: bins [8,15] to [512,1023]; [64,127] holds 100 + 120 prompt tokens.
  const std::string table = Section(page, "<table class=\"cliff\">", "</table>");
  EXPECT_NE(table.find("<tr data-min-tokens=\"8\"><td>8&ndash;15</td><td>1</td><td>0.0</td>"
                       "<td>1</td><td>0.0</td></tr>"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("<tr data-min-tokens=\"64\"><td>64&ndash;127</td><td>2</td><td>65.5</td>"
                       "<td>2</td><td>94.5</td></tr>"),
            std::string::npos)
      << table;  // (48 + 96) / 220 and (96 + 112) / 220
  EXPECT_NE(table.find("<tr data-min-tokens=\"128\"><td>128&ndash;255</td><td>0</td>"
                       "<td>&ndash;</td><td>0</td><td>&ndash;</td></tr>"),
            std::string::npos)
      << table;  // an empty bin
  EXPECT_EQ(table.find("data-min-tokens=\"4\""), std::string::npos);
  EXPECT_EQ(table.find("data-min-tokens=\"1024\""), std::string::npos);
  // Per policy: the served requests of at most A tokens (the skipped 50-token one not counted).
  EXPECT_NE(page.find("<li data-policy=\"old\" data-hit-alignment=\"48\" "
                      "data-scheduler-block=\"48\" data-never-hit-short-requests=\"1\">"),
            std::string::npos);
  EXPECT_NE(page.find("<li data-policy=\"new\" data-hit-alignment=\"16\" "
                      "data-scheduler-block=\"48\" data-never-hit-short-requests=\"1\">"),
            std::string::npos);
}

// A replay on a hybrid plan: full attention with 16-token blocks and sliding window with 24-token
// blocks give S = lcm(16, 24) = 48 and, without fine-grained hits, A = S = 48 (docs/semantics.md
// §7). The hit is at most floor((L-1) / A) * A (§9.1, §9.3), so the prompts of 40 and 48 tokens
// never hit although an earlier prompt holds them whole, where full attention alone (A = 16) hits
// 32 of each; the chart and its per-policy line say so.
TEST(HtmlReportTest, CliffOnAHybridPlanReplay) {
  // One at a time (a second apart): each finds the earlier prompts cached.
  const std::vector<int> lengths = {100, 40, 48, 49, 100, 300};
  const std::vector<ReplayResult> results = testing_html::HybridAndFullReplays(lengths);
  const ReplayResult& h = results[0];
  const ReplayResult& f = results[1];
  ASSERT_EQ(h.per_request.size(), lengths.size());
  ASSERT_EQ(f.per_request.size(), lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t L = lengths[i];
    EXPECT_LE(h.per_request[i].hit_tokens, (L - 1) / 48 * 48) << L;
    if (L < 48 + 1) {
      EXPECT_EQ(h.per_request[i].hit_tokens, 0) << L;
    }
  }
  EXPECT_EQ(f.per_request[1].hit_tokens, 32);  // L 40 under A = 16
  EXPECT_EQ(f.per_request[2].hit_tokens, 32);  // L 48
  EXPECT_EQ(h.per_request[3].hit_tokens, 48);  // L 49 = A + 1: past the cliff

  const std::string page = ComparisonReportHtml({h, f}, "hybrid");
  EXPECT_NE(page.find("data-chart=\"block-size-cliff\""), std::string::npos);
  EXPECT_NE(page.find(">hybrid: A = S = 48</text>"), std::string::npos);
  EXPECT_NE(page.find(">full: A = S = 16</text>"), std::string::npos);
  // Shorter than A + 1: 40 and 48 under the hybrid plan; none under A = 16.
  EXPECT_NE(page.find("<li data-policy=\"hybrid\" data-hit-alignment=\"48\" "
                      "data-scheduler-block=\"48\" data-never-hit-short-requests=\"2\">"),
            std::string::npos);
  EXPECT_NE(page.find("<li data-policy=\"full\" data-hit-alignment=\"16\" "
                      "data-scheduler-block=\"16\" data-never-hit-short-requests=\"0\">"),
            std::string::npos);
  // The [32,63] bin (40, 48, 49 tokens): hybrid hits only the 49-token prompt's 48 of 137.
  EXPECT_NE(page.find("<tr data-min-tokens=\"32\"><td>32&ndash;63</td><td>3</td><td>35.0</td>"),
            std::string::npos)
      << Section(page, "<table class=\"cliff\">", "</table>");
}

}  // namespace
}  // namespace prefixsim
