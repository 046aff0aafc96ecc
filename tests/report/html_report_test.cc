// The HTML report's helpers (number formatting, the SVG chart) and the --capacities parser.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/cli/html_page.h"
#include "sim/report/html_charts.h"
#include "sim/report/report.h"
#include "tests/cli_runner.h"

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
  const std::string page = ComparisonHtml({r}, "title");
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

}  // namespace
}  // namespace prefixsim
