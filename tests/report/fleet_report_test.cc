// Fleet runs in every report (issue 26, "fleets visible everywhere"): the HTML page's fleet
// section (router, per-replica table, auto-sizing probes, bar charts), compare's per-policy fleet
// sections in text, and the fleet columns of a sweep's results.csv.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "prefixsim/engine.h"
#include "prefixsim/replay.h"
#include "sim/report/html_charts.h"
#include "sim/report/report.h"
#include "tests/cli_runner.h"
#include "tests/engine/engine_test_util.h"

namespace prefixsim {
namespace {

namespace fs = std::filesystem;
using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;
using testing_engine::Req;
using testing_engine::SmallEngine;
using testing_engine::VectorTrace;
using testing_kv::Iota;
using testing_kv::Unitary;

std::string Temp(const std::string& name) {
  return ::testing::TempDir() + "/" + std::to_string(getpid()) + "_fleet_report_" + name;
}

const std::string kChat = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_chat.jsonl";
const char kKimi[] = " --model kimi-k3-like --engine kimi-k3-dspark --no-progress --no-wall-time";

// The text between the first `open` at or after `from` and the next `close`.
std::string Between(const std::string& s, const std::string& open, const std::string& close,
                    size_t from = 0) {
  const size_t a = s.find(open, from);
  if (a == std::string::npos) return "";
  const size_t b = s.find(close, a + open.size());
  return b == std::string::npos ? "" : s.substr(a, b - a);
}

// The cells of each <tr> of an HTML table, markup stripped.
std::vector<std::vector<std::string>> Rows(const std::string& table) {
  std::vector<std::vector<std::string>> rows;
  const std::regex tr("<tr[^>]*>(.*?)</tr>"), td("<td[^>]*>(.*?)</td>"), tag("<[^>]*>");
  for (auto r = std::sregex_iterator(table.begin(), table.end(), tr); r != std::sregex_iterator();
       ++r) {
    const std::string row = (*r)[1];
    std::vector<std::string> cells;
    for (auto c = std::sregex_iterator(row.begin(), row.end(), td); c != std::sregex_iterator();
         ++c) {
      cells.push_back(std::regex_replace(std::string((*c)[1]), tag, ""));
    }
    if (!cells.empty()) rows.push_back(std::move(cells));
  }
  return rows;
}

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

TEST(FleetReportTest, HtmlPageOfATwoReplicaReplayHasTheFleetSection) {
  const std::string html = Temp("two.html"), json = Temp("two.json");
  const auto r =
      RunCli("replay --trace " + kChat + kKimi +
             " --policy new --replicas 2 --router kv_aware --html " + html + " --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string page = ReadFile(html);
  const auto j = nlohmann::json::parse(ReadFile(json));
  ASSERT_EQ(j["fleet"]["per_replica"].size(), 2u);

  const std::string card = Between(page, "<div class=\"plan fleet\" data-policy=\"new\"", "</div>");
  ASSERT_FALSE(card.empty()) << "no fleet section";
  EXPECT_NE(card.find("2 replicas behind router <span class=\"math\">kv_aware</span>"),
            std::string::npos)
      << card;
  EXPECT_NE(card.find("overlap weight 1.00"), std::string::npos) << card;
  EXPECT_NE(card.find(absl::StrCat("load imbalance ",
                                   absl::StrFormat("%.2f", j["fleet"]["imbalance"].get<double>()))),
            std::string::npos)
      << card;
  EXPECT_EQ(card.find("fleet-probes"), std::string::npos) << "not auto-sized: no probes";
  // One row per replica, each with the JSON's figures.
  const auto rows = Rows(Between(card, "<table class=\"fleet-replicas\"", "</table>"));
  ASSERT_EQ(rows.size(), 2u) << card;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& rep = j["fleet"]["per_replica"][i];
    ASSERT_EQ(rows[i].size(), 7u);
    EXPECT_EQ(rows[i][0], std::to_string(i));
    EXPECT_EQ(rows[i][1], std::to_string(rep["requests"].get<int64_t>()));
    EXPECT_EQ(rows[i][2], std::to_string(rep["finished_requests"].get<int64_t>()));
    EXPECT_EQ(rows[i][3], absl::StrFormat("%.2f", 100.0 * rep["hit_rate"].get<double>()));
  }
  // The summary table says it is a fleet, and both bar charts draw one bar per replica.
  EXPECT_NE(page.find("<tr><td>replicas</td><td>2</td></tr>"), std::string::npos);
  for (const char* id : {"fleet-load", "fleet-hit-rate"}) {
    const std::string chart = Between(page, absl::StrCat("data-chart=\"", id, "\""), "</figure>");
    ASSERT_FALSE(chart.empty()) << id;
    EXPECT_EQ(Count(chart, "<rect class=\"mark\""), 2) << id;
  }
  // One engine: no fleet section at all.
  const std::string plain = Temp("plain.html");
  ASSERT_EQ(RunCli("replay --trace " + kChat + kKimi + " --policy new --html " + plain).exit_code,
            0);
  EXPECT_EQ(ReadFile(plain).find("fleet"), std::string::npos);
}

// The routing regret over time: round_robin ignores the caches, so some window has regret (a
// point above 0: regret / prompt tokens of the window), and not every window does.
TEST(FleetReportTest, HtmlPageChartsTheRoutingRegretOverTime) {
  const std::string html = Temp("regret.html"), json = Temp("regret.json");
  const auto r =
      RunCli("replay --trace " + kChat + kKimi +
             " --policy new --replicas 3 --router round_robin --html " + html + " --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(ReadFile(json));
  const int64_t regret = j["fleet"]["routing_regret_tokens"].get<int64_t>();
  ASSERT_GT(regret, 0) << "round_robin on the chat sample misses some longer hit";
  const std::string chart =
      Between(ReadFile(html), "data-chart=\"routing-regret-over-time\"", "</figure>");
  ASSERT_FALSE(chart.empty());
  const std::regex point("<title>new: \\(([0-9.]+), ([0-9.]+)\\)</title>");
  int points = 0, positive = 0;
  for (auto m = std::sregex_iterator(chart.begin(), chart.end(), point);
       m != std::sregex_iterator(); ++m) {
    ++points;
    positive += std::stod((*m)[2]) > 0;
  }
  EXPECT_GT(points, 1) << chart;
  EXPECT_GT(positive, 0) << chart;
  EXPECT_LT(positive, points) << "some window routed every request to its best replica";
}

// 200 requests, one every 10 ms, each needing ~20 steps of 2 ms (max_num_seqs 1): one replica
// falls behind, so --replicas auto tries several sizes (the setup of FleetTest.AutoSizing...).
ReplayResult AutoSized(const std::string& policy) {
  std::vector<Request> reqs;
  for (int i = 0; i < 200; ++i) reqs.push_back(Req(i, i * 10.0, Iota(8, 1 + 100 * i), 20));
  EngineConfig e = SmallEngine(64, /*step_us=*/2000);
  e.max_num_seqs = 1;
  e.fleet.auto_replicas = true;
  e.fleet.router = "least_loaded";
  e.fleet.ttft_slo_ms = 100;
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 200);
  const TraceOpener open = [&]() -> absl::StatusOr<std::unique_ptr<TraceReader>> {
    return std::make_unique<VectorTrace>(reqs);
  };
  ReplayOptions options;
  options.record_requests = true;
  auto result = ReplayWithFleetSizing(plan, ModelSpec{}, e, open, options);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return {};
  result->policy = policy;
  return *std::move(result);
}

TEST(FleetReportTest, AutoSizedPageListsItsProbes) {
  const ReplayResult r = AutoSized("old");
  ASSERT_TRUE(r.fleet && r.fleet->auto_sized);
  ASSERT_GE(r.fleet->probes.size(), 2u);
  HtmlReportOptions options;
  options.title = "auto";
  const std::string page = HtmlReport({r}, options);
  const std::string table =
      Between(page, "<table class=\"fleet-probes\" data-policy=\"old\"", "</table>");
  ASSERT_FALSE(table.empty()) << "no probe table";
  const auto rows = Rows(table);
  ASSERT_EQ(rows.size(), r.fleet->probes.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const AutoSizeProbe& p = r.fleet->probes[i];
    ASSERT_EQ(rows[i].size(), 6u);
    EXPECT_EQ(rows[i][0], p.replicas == r.fleet->replicas ? absl::StrCat(p.replicas, " (chosen)")
                                                          : std::to_string(p.replicas));
    EXPECT_EQ(rows[i][1], html::Number(p.sim_time_ns / 1e9, 1));
    EXPECT_EQ(rows[i][2], html::Number(r.fleet->trace_span_ns / 1e9, 1));
    EXPECT_EQ(rows[i][4], html::Number(p.ttft_p99_ms, 1));
    EXPECT_EQ(rows[i][5], p.keeps_up ? "keeps up" : "falls behind");
  }
  EXPECT_EQ(Count(table, "(chosen)"), 1);
  // The chosen fleet's per-replica table.
  EXPECT_EQ(Rows(Between(page, "<table class=\"fleet-replicas\"", "</table>")).size(),
            static_cast<size_t>(r.fleet->replicas));
}

// The per-replica rows of each "Fleet of policy P" section of compare's text.
std::map<std::string, std::vector<std::string>> FleetRowsByPolicy(const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  std::string policy;
  const std::regex heading("^Fleet of policy ([a-z0-9_]+): "), row("^ +[0-9]+ +[0-9]+ +[0-9]+ ");
  for (const auto line : absl::StrSplit(text, '\n')) {
    const std::string l(line);
    std::smatch m;
    if (std::regex_search(l, m, heading)) {
      policy = m[1];
      out[policy];
    } else if (!policy.empty() && std::regex_search(l, row)) {
      out[policy].push_back(l);
    } else if (l.empty()) {
      policy.clear();
    }
  }
  return out;
}

TEST(FleetReportTest, CompareTextListsEveryPolicysReplicas) {
  const auto r = RunCli("compare --trace " + kChat + kKimi +
                        " --policies old,new --replicas 3 --router session");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = FleetRowsByPolicy(r.output);
  ASSERT_EQ(rows.size(), 2u) << r.output;
  for (const char* policy : {"old", "new"}) {
    ASSERT_TRUE(rows.count(policy)) << policy << "\n" << r.output;
    EXPECT_EQ(rows.at(policy).size(), 3u) << policy << "\n" << r.output;
  }
  EXPECT_NE(r.output.find("Fleet of policy old: 3 replicas, router session"), std::string::npos);
  // The fleet sections come after the comparison table.
  EXPECT_LT(r.output.find("throughput (req/s)"), r.output.find("Fleet of policy old"));
}

TEST(FleetReportTest, CompareTextListsTheSizesTriedUnderAuto) {
  const std::vector<ReplayResult> results = {AutoSized("old"), AutoSized("new")};
  const std::string text = ComparisonReportText(results);
  for (const ReplayResult& r : results) {
    std::string tried = " tried";
    for (const AutoSizeProbe& p : r.fleet->probes) {
      absl::StrAppend(&tried, " ", p.replicas, p.keeps_up ? "+" : p.thrashed ? "!" : "-");
    }
    const size_t at = text.find("Fleet of policy " + r.policy + ": ");
    ASSERT_NE(at, std::string::npos) << text;
    const size_t next = text.find("Fleet of policy", at + 1);
    const std::string section = text.substr(at, next == std::string::npos ? next : next - at);
    EXPECT_NE(section.find("`replicas=auto`"), std::string::npos) << section;
    EXPECT_NE(section.find(tried), std::string::npos) << tried << "\n" << section;
    // Every mark a probe can get is in the legend.
    for (const char* mark : {"+ keeps up", "~ overloaded", "! thrashed", "- too slow"}) {
      EXPECT_NE(section.find(mark), std::string::npos) << mark << "\n" << section;
    }
  }
  EXPECT_EQ(FleetRowsByPolicy(text).at("new").size(),
            static_cast<size_t>(results[1].fleet->replicas));
}

TEST(FleetReportTest, SweepResultsCsvHasTheFleetColumns) {
  const fs::path dir = fs::path(Temp("sweep"));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path grid = dir / "grid.json";
  std::ofstream(grid) << R"({"name": "fleet", "base": {"model": "kimi-k3-like",
    "engine": "kimi-k3-dspark", "trace": ")"
                      << kChat << R"(", "policy": "new", "router": "kv_aware"},
    "axes": {"replicas": [1, 2]}})";
  const fs::path out = dir / "out";
  const auto r = RunCli("sweep -q --grid " + grid.string() + " --out " + out.string() +
                        " --no-wall-time --jobs 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream csv(ReadFile(out / "results.csv"));
  std::string header_line;
  std::getline(csv, header_line);
  // The headline columns keep their place; the new ones come last.
  EXPECT_EQ(header_line.rfind("index,id,replicas,hit_rate,queries,", 0), 0u) << header_line;
  const std::string tail =
      ",sim_time_s,fleet_replicas,fleet_router,fleet_imbalance,lost_to_alignment_tokens,"
      "overloaded";
  ASSERT_GE(header_line.size(), tail.size());
  EXPECT_EQ(header_line.substr(header_line.size() - tail.size()), tail) << header_line;
  const std::vector<std::string> header = absl::StrSplit(header_line, ',');
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(csv, line);) rows.push_back(absl::StrSplit(line, ','));
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), header.size());
    // The point's own summary holds the values the columns must carry.
    const fs::path point =
        out / "points" / absl::StrFormat("%05d-%s.json", std::stoi(row[0]), row[1]);
    const auto s = nlohmann::json::parse(ReadFile(point))["result"];
    EXPECT_EQ(row[col["lost_to_alignment_tokens"]],
              std::to_string(s["lost_to_alignment_tokens"].get<int64_t>()));
    EXPECT_EQ(row[col["overloaded"]], s["overloaded"].get<bool>() ? "true" : "false");
    if (row[col["replicas"]] == "2") {
      EXPECT_EQ(row[col["fleet_replicas"]], "2");
      EXPECT_EQ(row[col["fleet_router"]], "kv_aware");
      EXPECT_DOUBLE_EQ(std::stod(row[col["fleet_imbalance"]]),
                       s["fleet"]["imbalance"].get<double>());
      EXPECT_GE(std::stod(row[col["fleet_imbalance"]]), 1.0);
    } else {
      // One engine: a fleet of one, no router.
      EXPECT_EQ(row[col["replicas"]], "1");
      EXPECT_EQ(row[col["fleet_replicas"]], "1");
      EXPECT_EQ(row[col["fleet_router"]], "");
      EXPECT_EQ(row[col["fleet_imbalance"]], "1.0");
    }
  }
  // results.json carries the same cells.
  const auto results = nlohmann::json::parse(ReadFile(out / "results.json"));
  // at(): a missing key fails the test instead of reading past a const object.
  EXPECT_EQ(results.at("rows").at(1).at("metrics").at("fleet_replicas"), 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace prefixsim
