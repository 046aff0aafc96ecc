// `prefixsim regress` as a CI gate (issue 26): unknown metrics are bad input, every number of
// the summary can be gated, one-sided tolerances, the inclusive boundary, and the Markdown and
// JUnit reports.
#include "sim/grid/regress.h"

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"

namespace prefixsim::grid {
namespace {

namespace fs = std::filesystem;
using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;
using Json = nlohmann::ordered_json;

const std::string kTraces = std::string(PREFIXSIM_SOURCE_DIR) + "/traces";

void WriteFile(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// The output line that holds all of `parts` ("" when none does).
std::string LineWith(const std::string& output, const std::vector<std::string>& parts) {
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    bool all = true;
    for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
    if (all) return line;
  }
  return "";
}

class RegressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("prefixsim_regress_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    baseline_ = (dir_ / "baseline.json").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A suite of `axes` on the shared-document sample, with `tolerances` (a JSON object body).
  std::string Suite(const std::string& file, const std::string& axes,
                    const std::string& tolerances) {
    const fs::path p = dir_ / file;
    WriteFile(p, R"({"name": "gate", "base": {"model": "llama-3.1-8b", "engine": "llama-3.1-8b",
      "trace": ")" + kTraces +
                     R"(/sample_shared_doc.jsonl", "max_model_len": 32768,
      "policy": "new"}, "axes": )" +
                     axes + R"(, "tolerances": )" + tolerances + "}");
    return p.string();
  }
  ::prefixsim::testing::CliResult Regress(const std::string& suite, const std::string& extra = "") {
    return RunCli("regress --suite " + suite + " --baseline " + baseline_ + " " + extra);
  }
  // Runs --update and returns the baseline written.
  Json Update(const std::string& suite) {
    auto r = Regress(suite, "--update");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return Json::parse(ReadFile(baseline_));
  }
  void Save(const Json& b) { WriteFile(baseline_, b.dump(2)); }

  fs::path dir_;
  std::string baseline_;
};

TEST_F(RegressTest, UnknownMetricIsBadInputNamingFileFieldAndSuggestion) {
  const std::string good =
      Suite("good.json", R"({"num_gpu_blocks": [2100]})", R"({"hit_rate": {"abs": 0.001}})");
  Update(good);
  // A typo, and a real metric misspelled: exit 2 (not "all within tolerance").
  struct Case {
    std::string name;
    std::string suggestion;
  };
  for (const Case& c :
       {Case{"hit_rat", "hit_rate"}, Case{"lost_to_alignment_token", "lost_to_alignment_tokens"},
        Case{"imbalance", "fleet.imbalance"}}) {
    const std::string suite = Suite("typo.json", R"({"num_gpu_blocks": [2100]})",
                                    R"({")" + c.name + R"(": {"abs": 0.001}})");
    auto r = Regress(suite);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(suite + ": field tolerances." + c.name + ":"), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("did you mean '" + c.suggestion + "'"), std::string::npos) << r.output;
    // The headline aliases are listed; the hundreds of dotted paths are not, after a good
    // suggestion (they would bury it).
    EXPECT_NE(r.output.find("ttft_p99_ms"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("latency.tpot.p90_ms"), std::string::npos) << r.output;
    EXPECT_LT(r.output.size(), 1000u) << r.output;
  }
  // Nothing close: no suggestion, still the list.
  const std::string far =
      Suite("far.json", R"({"num_gpu_blocks": [2100]})", R"({"zzzzzzzzzzzz": {"abs": 1}})");
  auto r = Regress(far);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(r.output.find("did you mean"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("prefix_cache.hit_rate"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("latency.tpot.p90_ms"), std::string::npos) << r.output;

  // Other bad tolerances, each naming its field.
  struct Bad {
    std::string tolerances;
    std::string field;
  };
  for (const Bad& b : {
           Bad{R"({"wall_time_s": {"rel": 0.1}})", "tolerances.wall_time_s"},
           Bad{R"({"hit_rate": {"abs": 0.1}, "prefix_cache.hit_rate": {"abs": 0.2}})",
               "tolerances.prefix_cache.hit_rate"},
           Bad{R"({"hit_rate": {"abs": 0.1, "direction": "up"}})", "tolerances.hit_rate.direction"},
           Bad{R"({"hit_rate": {"abs": 0.1, "max_increase": 1}})", "tolerances.hit_rate"},
           Bad{R"({"hit_rate": {"max_increase": {"abs": -1}}})",
               "tolerances.hit_rate.max_increase.abs"},
           Bad{R"({"hit_rate": {"direction": "higher_is_better"}})", "tolerances.hit_rate"},
           Bad{R"({"hit_rate": {"absolute": 1}})", "tolerances.hit_rate.absolute"},
       }) {
    const std::string suite = Suite("bad.json", R"({"num_gpu_blocks": [2100]})", b.tolerances);
    auto res = Regress(suite);
    EXPECT_EQ(res.exit_code, 2) << b.tolerances << "\n" << res.output;
    EXPECT_NE(res.output.find(suite + ": field " + b.field + ":"), std::string::npos)
        << b.tolerances << "\n"
        << res.output;
  }
}

// Every number of the summary is a metric: the baseline records them by dotted path, and a
// tolerance on a non-headline or nested one (or a fleet one on a fleet point) gates.
TEST_F(RegressTest, NestedAndNonHeadlineMetricsGate) {
  const std::string suite =
      Suite("nested.json", R"({"replicas": [1, 2]})",
            R"({"lost_to_alignment_tokens": {"abs": 0}, "latency.ttft.p90_ms": {"rel": 0.01},
                "fleet.imbalance": {"abs": 0.01}})");
  Json b = Update(suite);
  ASSERT_EQ(b["points"].size(), 2u);
  Json& single = b["points"].begin().value()["metrics"];
  Json& fleet = std::next(b["points"].begin()).value()["metrics"];
  for (const char* key : {"lost_to_alignment_tokens", "prefix_cache.hit_rate",
                          "latency.ttft.p90_ms", "lost_to_alignment_per_request.p99_tokens"}) {
    EXPECT_TRUE(single.contains(key)) << key << "\n" << single.dump(1);
  }
  EXPECT_FALSE(single.contains("fleet.imbalance"));
  EXPECT_TRUE(fleet.contains("fleet.imbalance")) << fleet.dump(1);
  EXPECT_FALSE(fleet.contains("wall_time_s"));
  // Every key the baseline records is a name a tolerance may use.
  for (const Json* m : {&single, &fleet}) {
    for (const auto& [key, value] : m->items()) {
      EXPECT_TRUE(ResolveMetric("s.json", key).ok()) << key;
    }
  }
  auto r = Regress(suite);
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // Each edit starts from the baseline as written.
  const Json original = b;
  auto edited = [&](bool fleet_point, const std::string& key, const Json& value) {
    Json e = original;
    auto it = e["points"].begin();
    if (fleet_point) ++it;
    it.value()["metrics"][key] = value;
    Save(e);
    return Regress(suite);
  };
  r = edited(false, "lost_to_alignment_tokens",
             single["lost_to_alignment_tokens"].get<int64_t>() + 100);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(LineWith(r.output, {"lost_to_alignment_tokens", "CHANGED"}), "") << r.output;

  r = edited(true, "fleet.imbalance", fleet["fleet.imbalance"].get<double>() + 0.5);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(LineWith(r.output, {"fleet.imbalance", "CHANGED"}), "") << r.output;

  r = edited(false, "latency.ttft.p90_ms", single["latency.ttft.p90_ms"].get<double>() * 1.2);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(LineWith(r.output, {"latency.ttft.p90_ms", "CHANGED"}), "") << r.output;
}

TEST_F(RegressTest, OneSidedToleranceLabelsImprovementsAndGatesTheOtherSide) {
  const std::string suite = Suite("one_sided.json", R"({"num_gpu_blocks": [2100]})",
                                  R"({"hit_rate": {"abs": 0.001, "direction": "higher_is_better"},
                "ttft_p99_ms": {"max_increase": {"rel": 0.05}},
                "hits": {"rel": 0.01, "direction": "higher_is_better"}})");
  Json b = Update(suite);
  const Json original = b;
  Json& m = b["points"].begin().value()["metrics"];
  const double hit_rate = m["prefix_cache.hit_rate"].get<double>();
  const double ttft = m["latency.ttft.p99_ms"].get<double>();
  ASSERT_GT(hit_rate, 0.02);
  // This run's hit rate is higher and its TTFT lower than the baseline's: improvements.
  m["prefix_cache.hit_rate"] = hit_rate - 0.02;
  m["latency.ttft.p99_ms"] = ttft * 2;
  Save(b);
  auto r = Regress(suite);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(LineWith(r.output, {"hit_rate", "improved"}), "") << r.output;
  EXPECT_NE(LineWith(r.output, {"ttft_p99_ms", "improved"}), "") << r.output;
  EXPECT_EQ(r.output.find("REGRESSED"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("all within tolerance"), std::string::npos) << r.output;
  // The same moves the other way regress.
  m["prefix_cache.hit_rate"] = hit_rate + 0.02;
  Save(b);
  r = Regress(suite);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(LineWith(r.output, {"hit_rate", "REGRESSED"}), "") << r.output;
  b = original;
  b["points"].begin().value()["metrics"]["latency.ttft.p99_ms"] = ttft / 2;
  Save(b);
  r = Regress(suite);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(LineWith(r.output, {"ttft_p99_ms", "REGRESSED"}), "") << r.output;
  // A small move the bad way stays within.
  b = original;
  b["points"].begin().value()["metrics"]["prefix_cache.hit_rate"] = hit_rate + 0.0005;
  Save(b);
  r = Regress(suite);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(LineWith(r.output, {"hit_rate", " ok"}), "") << r.output;
}

// "Within" is inclusive: a change equal to the tolerance holds, also for a decimal tolerance
// that binary doubles do not hold exactly (now - (now - 0.001) is not exactly 0.001).
TEST_F(RegressTest, ToleranceBoundaryIsInclusive) {
  const std::string suite = Suite("boundary.json", R"({"num_gpu_blocks": [2100]})",
                                  R"({"hits": {"abs": 5}, "hit_rate": {"abs": 0.001}})");
  Json b = Update(suite);
  Json& m = b["points"].begin().value()["metrics"];
  const int64_t hits = m["prefix_cache.hits"].get<int64_t>();
  const double hit_rate = m["prefix_cache.hit_rate"].get<double>();
  m["prefix_cache.hits"] = hits - 5;
  m["prefix_cache.hit_rate"] = hit_rate - 0.001;
  Save(b);
  auto r = Regress(suite);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(LineWith(r.output, {"hits", "+5", " ok"}), "") << r.output;
  EXPECT_NE(LineWith(r.output, {"hit_rate", "+0.0010", " ok"}), "") << r.output;
  // Just past the boundary fails.
  m["prefix_cache.hits"] = hits - 6;
  Save(b);
  r = Regress(suite);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(LineWith(r.output, {"hits", "+6", "CHANGED"}), "") << r.output;
  m["prefix_cache.hits"] = hits;
  m["prefix_cache.hit_rate"] = hit_rate - 0.0010001;
  Save(b);
  r = Regress(suite);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(LineWith(r.output, {"hit_rate", "CHANGED"}), "") << r.output;
}

// A minimal XML checker: a prolog, balanced tags, quoted attributes, known entities.
// Returns "" when well-formed, else what is wrong.
std::string XmlProblem(const std::string& xml) {
  size_t i = 0;
  if (xml.rfind("<?xml ", 0) == 0) {
    i = xml.find("?>");
    if (i == std::string::npos) return "unterminated prolog";
    i += 2;
  }
  std::vector<std::string> stack;
  bool root_seen = false;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      const size_t semi = xml.find(';', i);
      if (semi == std::string::npos) return "bare &";
      const std::string entity = xml.substr(i, semi - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" &&
          entity != "&apos;") {
        return "unknown entity " + entity;
      }
      i = semi + 1;
      continue;
    }
    if (xml[i] != '<') {
      if (stack.empty() && !std::isspace(static_cast<unsigned char>(xml[i]))) {
        return "text outside the root";
      }
      if (xml[i] == '>') return "bare >";
      ++i;
      continue;
    }
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return "unterminated tag";
    std::string tag = xml.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1)) return "mismatched </" + tag + ">";
      stack.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    if (self_closing) tag.pop_back();
    const size_t space = tag.find(' ');
    const std::string name = tag.substr(0, space);
    if (space != std::string::npos) {
      static const std::regex kAttrs(R"((\s+[A-Za-z_][\w.-]*="[^"<]*")*\s*)");
      if (!std::regex_match(tag.substr(space), kAttrs)) return "bad attributes in <" + tag + ">";
    }
    if (stack.empty()) {
      if (root_seen) return "two roots";
      root_seen = true;
    }
    if (!self_closing) stack.push_back(name);
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  return root_seen ? "" : "no root";
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST_F(RegressTest, MarkdownAndJUnitReportsAreWellFormed) {
  const std::string suite =
      Suite("formats.json", R"({"num_gpu_blocks": [2100, 100000]})",
            R"({"hit_rate": {"abs": 0.001}, "ttft_p99_ms": {"max_increase": {"rel": 0.05}},
          "preemptions": {"abs": 0}, "fleet.imbalance": {"abs": 0}})");
  Json b = Update(suite);
  Json& m0 = b["points"].begin().value()["metrics"];
  Json& m1 = std::next(b["points"].begin()).value()["metrics"];
  m0["prefix_cache.hit_rate"] = m0["prefix_cache.hit_rate"].get<double>() + 0.01;    // fails
  m1["prefix_cache.hit_rate"] = m1["prefix_cache.hit_rate"].get<double>() + 0.0005;  // holds
  m1["latency.ttft.p99_ms"] = m1["latency.ttft.p99_ms"].get<double>() * 2;           // improved
  Save(b);

  // Text: each point under its axes, not its hash id alone.
  auto r = Regress(suite);
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("#0 num_gpu_blocks=2100"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("#1 num_gpu_blocks=100000"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("delta"), std::string::npos) << r.output;

  const fs::path md = dir_ / "report.md";
  r = Regress(suite, "--format markdown --output " + md.string());
  EXPECT_EQ(r.exit_code, 3) << r.output;
  const std::string markdown = ReadFile(md);
  std::istringstream lines(markdown);
  std::string line;
  std::vector<std::string> table;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] == '|') table.push_back(line);
  }
  // Header, separator, and the three rows that moved.
  ASSERT_EQ(table.size(), 5u) << markdown;
  EXPECT_TRUE(std::regex_match(table[1], std::regex(R"(\|(\s*:?-+:?\s*\|){7})"))) << table[1];
  for (const std::string& row : table) {
    EXPECT_EQ(row.back(), '|') << row;
    int cells = 0;
    for (size_t k = 0; k < row.size(); ++k) {
      if (row[k] == '|' && (k == 0 || row[k - 1] != '\\')) ++cells;
    }
    EXPECT_EQ(cells, 8) << row;
  }
  EXPECT_NE(LineWith(markdown, {"num_gpu_blocks=2100", "hit_rate", "**CHANGED**"}), "") << markdown;
  EXPECT_NE(LineWith(markdown, {"num_gpu_blocks=100000", "ttft_p99_ms", "improved"}), "")
      << markdown;

  const fs::path xml_path = dir_ / "junit.xml";
  r = Regress(suite, "--format junit --output " + xml_path.string());
  EXPECT_EQ(r.exit_code, 3) << r.output;
  const std::string xml = ReadFile(xml_path);
  EXPECT_EQ(XmlProblem(xml), "") << xml;
  // One testcase per point x metric; failures counted in the attributes.
  EXPECT_EQ(Count(xml, "<testcase "), 2 * 4) << xml;
  EXPECT_EQ(Count(xml, "<failure "), 1) << xml;
  EXPECT_EQ(Count(xml, "<skipped "), 2) << xml;  // fleet.imbalance on one-engine points
  EXPECT_NE(xml.find("<testsuite name=\"gate\" tests=\"8\" failures=\"1\""), std::string::npos)
      << xml;
  std::smatch failed;
  ASSERT_TRUE(std::regex_search(
      xml, failed, std::regex(R"re(<testcase classname="([^"]*)" name="([^"]*)">\s*<failure )re")))
      << xml;
  EXPECT_NE(failed[1].str().find("num_gpu_blocks=2100"), std::string::npos) << failed[1];
  EXPECT_EQ(failed[2].str(), "hit_rate");

  // JUnit on stdout: the document alone on stdout (the verdict goes to stderr).
  const std::string command = std::string(PREFIXSIM_BINARY) + " regress --suite " + suite +
                              " --baseline " + baseline_ + " --format junit 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  pclose(pipe);
  EXPECT_EQ(out, xml);

  // An --output in a folder that does not exist is refused before any point runs.
  r = Regress(suite, "--format junit --output " + (dir_ / "no" / "such.xml").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--output"), std::string::npos) << r.output;
}

TEST(RegressFormatTest, ValuesShowTheDigitsThatTellThemApart) {
  EXPECT_EQ(FormatMetricValue(0.2273, 0.2168, false), "0.2273");
  EXPECT_EQ(FormatMetricValue(740.8, 1481.6, false), "740.8");
  EXPECT_EQ(FormatMetricValue(494523.2, 329682.1, false), "494523");
  EXPECT_EQ(FormatMetricValue(2721276, 2721270, true), "2721276");
  // Close values get the digits it takes to differ.
  EXPECT_EQ(FormatMetricValue(0.70950001, 0.7095, false), "0.70950001");
  EXPECT_EQ(FormatMetricValue(0.7095, 0.70950001, false), "0.70950000");
  EXPECT_EQ(MetricDecimals(5, 5, true), 0);
}

}  // namespace
}  // namespace prefixsim::grid
