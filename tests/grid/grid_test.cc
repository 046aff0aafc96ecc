// Scenario grids: expansion and ids, sweep resume after a kill, shard/merge equality, regress
// exit codes, and the bad-input errors (issue 12).
#include "sim/grid/grid.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "tests/cli_runner.h"

namespace prefixsim::grid {
namespace {

namespace fs = std::filesystem;
using ::prefixsim::testing::RunCli;

const std::string kSmallGrid = std::string(PREFIXSIM_SOURCE_DIR) + "/tests/data/grid/small.json";
const std::string kTraces = std::string(PREFIXSIM_SOURCE_DIR) + "/traces";

using ::prefixsim::testing::ReadFile;

void WriteFile(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

class GridTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("prefixsim_grid_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Writes a scenario file into the temp dir (traces by absolute path).
  std::string Scenario(const std::string& name, const std::string& body) {
    const fs::path p = dir_ / name;
    WriteFile(p, body);
    return p.string();
  }
  static void ExpectSameOutput(const fs::path& a, const fs::path& b) {
    EXPECT_EQ(ReadFile(a / "results.json"), ReadFile(b / "results.json"));
    EXPECT_EQ(ReadFile(a / "results.csv"), ReadFile(b / "results.csv"));
    std::set<std::string> fa, fb;
    for (const auto& e : fs::directory_iterator(a / "points")) fa.insert(e.path().filename());
    for (const auto& e : fs::directory_iterator(b / "points")) fb.insert(e.path().filename());
    ASSERT_EQ(fa, fb);
    for (const auto& f : fa) {
      EXPECT_EQ(ReadFile(a / "points" / f), ReadFile(b / "points" / f)) << f;
    }
  }
  fs::path dir_;
};

TEST_F(GridTest, ProductOrderAndStableIds) {
  const std::string body =
      R"({"name": "t", "base": {"model": "llama-3.1-8b", "engine": "llama-3.1-8b",
    "trace": "x.jsonl", "seed": 3},
    "axes": {"policy": ["old", "new"], "block_size": [16, 32, 64]}})";
  auto s = LoadScenario(Scenario("a.json", body));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->points.size(), 6u);
  EXPECT_EQ(s->axis_keys, (std::vector<std::string>{"policy", "block_size"}));
  // The last axis varies fastest.
  EXPECT_EQ(s->points[0].values["policy"], "old");
  EXPECT_EQ(s->points[0].values["block_size"], 16);
  EXPECT_EQ(s->points[2].values["block_size"], 64);
  EXPECT_EQ(s->points[3].values["policy"], "new");
  EXPECT_EQ(s->points[3].values["block_size"], 16);
  std::set<std::string> ids;
  for (const Point& p : s->points) {
    EXPECT_EQ(p.index, static_cast<int64_t>(ids.size()));
    EXPECT_TRUE(std::regex_match(p.id, std::regex("[0-9a-f]{12}"))) << p.id;
    ids.insert(p.id);
  }
  EXPECT_EQ(ids.size(), 6u);
  // Same values in another key order and another axis order: the same ids (canonical JSON).
  const std::string reordered = R"({"name": "t2", "base": {"seed": 3, "trace": "x.jsonl",
    "engine": "llama-3.1-8b", "model": "llama-3.1-8b"},
    "axes": {"block_size": [64, 32, 16], "policy": ["new", "old"]}})";
  auto r = LoadScenario(Scenario("b.json", reordered));
  ASSERT_TRUE(r.ok()) << r.status();
  std::set<std::string> rids;
  for (const Point& p : r->points) rids.insert(p.id);
  EXPECT_EQ(ids, rids);
  // A value change changes the id; the id is the hash of the canonical JSON.
  EXPECT_NE(s->points[0].id, s->points[1].id);
  EXPECT_EQ(HashHex(""), "cbf29ce484222325");
  EXPECT_EQ(s->points[0].id, HashHex(nlohmann::json(s->points[0].values).dump()).substr(0, 12));
}

TEST_F(GridTest, NoAxesIsOnePointAndGridsConcatenate) {
  auto one = LoadScenario(Scenario("one.json", R"({"name": "o", "base": {"model": "m",
    "engine": "e", "trace": "t"}})"));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->points.size(), 1u);
  auto two = LoadScenario(Scenario("two.json", R"({"name": "g", "base": {"model": "m",
    "engine": "e", "trace": "t"}, "grids": [{"axes": {"policy": ["old", "new"]}},
    {"base": {"model": "m2"}, "axes": {"replicas": [1, "auto"], "router": ["round_robin"]}}]})"));
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->points.size(), 4u);
  EXPECT_EQ(two->points[2].values["model"], "m2");
  EXPECT_EQ(two->points[3].values["replicas"], "auto");
  EXPECT_EQ(two->axis_keys, (std::vector<std::string>{"policy", "replicas", "router"}));
}

TEST_F(GridTest, ShardsPartitionTheGrid) {
  auto s = LoadScenario(kSmallGrid);
  ASSERT_TRUE(s.ok()) << s.status();
  std::multiset<int64_t> seen;
  for (int i = 0; i < 4; ++i) {
    for (const Point& p : ShardPoints(s->points, i, 4)) {
      EXPECT_EQ(p.index % 4, i);
      seen.insert(p.index);
    }
  }
  EXPECT_EQ(seen.size(), s->points.size());
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), s->points.size());
  int shard = -1, n = -1;
  EXPECT_TRUE(ParseShard("1/4", &shard, &n).ok());
  EXPECT_EQ(shard, 1);
  EXPECT_EQ(n, 4);
  for (const char* bad : {"3/2", "2/2", "-1/2", "1/0", "1", "a/b", "1/2/3"}) {
    EXPECT_FALSE(ParseShard(bad, &shard, &n).ok()) << bad;
  }
}

TEST_F(GridTest, BadInputExitsTwoNamingFileAndField) {
  const std::string unknown = Scenario("unknown.json", R"({"name": "u", "base": {"model": "m",
    "engine": "e", "trace": "t"}, "axes": {"blok_size": [16]}})");
  auto r = RunCli("sweep --grid " + unknown + " --out " + (dir_ / "o").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(unknown), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("axes.blok_size"), std::string::npos) << r.output;

  const std::string empty = Scenario("empty.json", R"({"name": "e", "base": {"model": "m",
    "engine": "e", "trace": "t"}, "axes": {"policy": []}})");
  r = RunCli("sweep --grid " + empty + " --out " + (dir_ / "o").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(empty), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("axes.policy"), std::string::npos) << r.output;

  const std::string typed = Scenario("typed.json", R"({"name": "t", "base": {"model": "m",
    "engine": "e", "trace": "t"}, "axes": {"block_size": [16, "x"]}})");
  r = RunCli("sweep --grid " + typed + " --out " + (dir_ / "o").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("axes.block_size[1]"), std::string::npos) << r.output;

  // A point that cannot run is found before any point runs.
  const std::string policy = Scenario("policy.json", R"({"name": "p", "base": {"model":
    "llama-3.1-8b", "engine": "llama-3.1-8b", "trace": ")" +
                                                         kTraces +
                                                         R"(/sample_tokens.jsonl"},
    "axes": {"policy": ["new", "nwe"]}})");
  r = RunCli("sweep --grid " + policy + " --out " + (dir_ / "o").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(policy + ": point 1"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "o"));

  r = RunCli("sweep --grid " + kSmallGrid + " --out " + (dir_ / "o").string() + " --shard 3/2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--shard"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("3/2"), std::string::npos) << r.output;

  r = RunCli("sweep --grid " + (dir_ / "missing.json").string() + " --out " +
             (dir_ / "o").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;

  // A baseline of another suite.
  const std::string other =
      Scenario("other_baseline.json", R"({"suite": "another", "points": {}})");
  const std::string suite = Scenario("suite.json", R"({"name": "mine", "base": {"model":
    "llama-3.1-8b", "engine": "llama-3.1-8b", "trace": ")" +
                                                       kTraces +
                                                       R"(/sample_tokens.jsonl"},
    "tolerances": {"hit_rate": {"abs": 0.001}}})");
  r = RunCli("regress --suite " + suite + " --baseline " + other);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(other), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("suite"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("another"), std::string::npos) << r.output;
}

// vLLM's startup memory check is the library's (ResolvePlanForServing): a sweep and a regression
// suite refuse the point that `replay` refuses, with the same message, before any point runs.
TEST_F(GridTest, SweepAndRegressRefuseAPointReplayRefuses) {
  // 20 MiB of 2 MiB Llama-3.1-8B blocks: 9 usable, and one 4096-token request needs 256.
  const std::string trace = kTraces + "/sample_tokens.jsonl";
  const std::string grid = Scenario("tiny_pool.json", R"({"name": "tiny", "base": {"model":
    "llama-3.1-8b-layout", "engine": "llama-3.1-8b", "max_model_len": 4096, "policy": "new",
    "trace": ")" + trace + R"("}, "axes": {"kv_cache_bytes": [20971520]},
    "tolerances": {"hit_rate": {"abs": 0.001}}})");
  const auto replay = RunCli("replay --trace " + trace +
                             " --model llama-3.1-8b-layout --engine llama-3.1-8b --policy new "
                             "--max-model-len 4096 --kv-cache-bytes 20971520");
  ASSERT_EQ(replay.exit_code, 2) << replay.output;
  const size_t at = replay.output.find("to serve one request");
  ASSERT_NE(at, std::string::npos) << replay.output;
  const std::string message = replay.output.substr(at, replay.output.find('\n', at) - at);
  EXPECT_NE(message.find("more than the 9 usable blocks"), std::string::npos) << message;

  auto r = RunCli("sweep --grid " + grid + " --out " + (dir_ / "o").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(grid + ": point 0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "o" / "results.csv"));

  const std::string baseline = Scenario("tiny_baseline.json", R"({"suite": "tiny", "points": {}})");
  r = RunCli("regress --suite " + grid + " --baseline " + baseline);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
}

// A point's plan JSON carries the startup check, as `resolve --json` prints it.
TEST_F(GridTest, PointPlanJsonHasTheStartupCheck) {
  const fs::path out = dir_ / "o";
  auto r = RunCli("sweep -q --grid " + kSmallGrid + " --out " + out.string() +
                  " --no-wall-time --shard 0/4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int points = 0;
  for (const auto& e : fs::directory_iterator(out / "points")) {
    const std::string text = ReadFile(e.path());
    const size_t plan = text.find("\"kv_plan\"");
    ASSERT_NE(plan, std::string::npos) << e.path();
    const size_t check = text.find("\"startup_check\"", plan);
    ASSERT_NE(check, std::string::npos) << e.path();
    EXPECT_NE(text.find("\"performed\"", check), std::string::npos) << e.path();
    ++points;
  }
  EXPECT_GT(points, 0);
}

TEST_F(GridTest, ShardsMergeToTheUnshardedRunByteForByte) {
  const fs::path full = dir_ / "full";
  auto r = RunCli("sweep -q --grid " + kSmallGrid + " --out " + full.string() +
                  " --no-wall-time --jobs 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Same result with one job: order does not depend on --jobs.
  const fs::path serial = dir_ / "serial";
  r = RunCli("sweep -q --grid " + kSmallGrid + " --out " + serial.string() +
             " --no-wall-time --jobs 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectSameOutput(full, serial);
  // And with more jobs than cores (threads interleave differently on every run).
  const fs::path wide = dir_ / "wide";
  r = RunCli("sweep -q --grid " + kSmallGrid + " --out " + wide.string() +
             " --no-wall-time --jobs 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectSameOutput(full, wide);
  std::string shard_dirs;
  for (int i = 0; i < 4; ++i) {
    const fs::path d = dir_ / ("shard-" + std::to_string(i));
    r = RunCli("sweep -q --grid " + kSmallGrid + " --out " + d.string() +
               " --no-wall-time --shard " + std::to_string(i) + "/4");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    shard_dirs.append(" ").append(d.string());
  }
  // An incomplete set of shards does not merge.
  r = RunCli("sweep merge " + (dir_ / "shard-0").string() + " --out " +
             (dir_ / "partial").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("missing"), std::string::npos) << r.output;
  const fs::path merged = dir_ / "merged";
  r = RunCli("sweep merge" + shard_dirs + " --out " + merged.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectSameOutput(full, merged);
  // results.csv: a header and one row per point, with the axes and the hit rate.
  const std::string csv = ReadFile(full / "results.csv");
  EXPECT_EQ(csv.rfind("index,id,policy,num_gpu_blocks,hit_rate,", 0), 0u) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
}

// A point whose replay fell behind the trace says so where the sweep reports it done, and the
// final line counts them, as results.json's overloaded column does.
TEST_F(GridTest, OverloadedPointsAreMarkedAsTheyFinishAndCounted) {
  const fs::path out = dir_ / "overloaded";
  const auto r =
      RunCli("sweep --grid " + kSmallGrid + " --out " + out.string() + " --no-wall-time --jobs 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto results = nlohmann::json::parse(ReadFile(out / "results.json"));
  int overloaded = 0, rows = 0;
  for (const auto& row : results["rows"]) {
    ++rows;
    if (row["metrics"].value("overloaded", false)) ++overloaded;
  }
  ASSERT_EQ(rows, 6) << results.dump();
  ASSERT_GT(overloaded, 0) << "the small grid has overloaded points; this test needs one";
  std::istringstream lines(r.output);
  int marked = 0, done = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(") done") == std::string::npos) continue;
    ++done;
    if (line.find(") done: OVERLOADED") != std::string::npos) ++marked;
  }
  EXPECT_EQ(done, 6) << r.output;
  EXPECT_EQ(marked, overloaded) << r.output;
  EXPECT_NE(r.output.find("6 in the grid; " + std::to_string(overloaded) +
                          " of the points run OVERLOADED"),
            std::string::npos)
      << r.output;
}

// Starts `prefixsim sweep` in a child, kills it once a point is written, and resumes.
TEST_F(GridTest, ResumeAfterKillLosesNoPointAndRunsNoneTwice) {
  const fs::path ref = dir_ / "ref";
  auto r = RunCli("sweep -q --grid " + kSmallGrid + " --out " + ref.string() +
                  " --no-wall-time --jobs 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path out = dir_ / "killed";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    freopen("/dev/null", "w", stderr);
    execl(PREFIXSIM_BINARY, PREFIXSIM_BINARY, "sweep", "--grid", kSmallGrid.c_str(), "--out",
          out.string().c_str(), "--no-wall-time", "--jobs", "1", static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto count_points = [&] {
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out / "points", ec)) {
      if (e.path().extension() == ".json") ++n;
    }
    return n;
  };
  while (count_points() < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  const int done = count_points();
  ASSERT_GE(done, 1);
  if (WIFSIGNALED(status)) {
    EXPECT_LT(done, 6);  // killed mid-sweep
  }
  // A leftover temp file of a write in progress is not a finished point.
  WriteFile(out / "points" / "00005-000000000000.json.tmp.1.2", "{\"trunc");
  r = RunCli("sweep --grid " + kSmallGrid + " --out " + out.string() + " --no-wall-time --resume");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(std::to_string(6 - done) + " points run, " + std::to_string(done) +
                          " already done"),
            std::string::npos)
      << r.output;
  fs::remove(out / "points" / "00005-000000000000.json.tmp.1.2");
  ExpectSameOutput(ref, out);
  // Without --resume an existing output is refused.
  r = RunCli("sweep --grid " + kSmallGrid + " --out " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--resume"), std::string::npos) << r.output;
}

TEST_F(GridTest, RegressExitCodesOnAPerturbedBaseline) {
  const std::string suite =
      Scenario("suite.json", R"({"name": "perturb", "base": {"model":
    "llama-3.1-8b", "engine": "llama-3.1-8b", "trace": ")" +
                                 kTraces +
                                 R"(/sample_shared_doc.jsonl", "max_model_len": 32768},
    "axes": {"policy": ["new"], "num_gpu_blocks": [2100, 100000]},
    "tolerances": {"hit_rate": {"abs": 0.001}, "ttft_p99_ms": {"rel": 0.05}}})");
  const fs::path baseline = dir_ / "baseline.json";
  auto r = RunCli("regress --suite " + suite + " --baseline " + baseline.string() + " --update");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCli("regress --suite " + suite + " --baseline " + baseline.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  auto b = nlohmann::ordered_json::parse(ReadFile(baseline));
  ASSERT_EQ(b["suite"], "perturb");
  ASSERT_EQ(b["points"].size(), 2u);
  // The baseline keys metrics by their dotted path in the summary (hit_rate is an alias).
  auto& first = b["points"].begin().value()["metrics"];
  const double hit_rate = first["prefix_cache.hit_rate"].get<double>();
  const double ttft = first["latency.ttft.p99_ms"].get<double>();
  // Within tolerance: still 0, and the table shows what moved.
  first["prefix_cache.hit_rate"] = hit_rate + 0.0005;
  first["latency.ttft.p99_ms"] = ttft * 1.01;
  WriteFile(baseline, b.dump(2));
  r = RunCli("regress --suite " + suite + " --baseline " + baseline.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("hit_rate"), std::string::npos) << r.output;
  // Beyond tolerance: 3, naming the metric.
  first["prefix_cache.hit_rate"] = hit_rate + 0.01;
  WriteFile(baseline, b.dump(2));
  r = RunCli("regress --suite " + suite + " --baseline " + baseline.string());
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("REGRESSED"), std::string::npos) << r.output;
  first["prefix_cache.hit_rate"] = hit_rate;
  first["latency.ttft.p99_ms"] = ttft * 1.5 + 1;
  WriteFile(baseline, b.dump(2));
  r = RunCli("regress --suite " + suite + " --baseline " + baseline.string());
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("ttft_p99_ms"), std::string::npos) << r.output;
  // A point missing from the baseline is a regression too (until --update).
  b["points"].erase(b["points"].begin());
  WriteFile(baseline, b.dump(2));
  r = RunCli("regress --suite " + suite + " --baseline " + baseline.string());
  EXPECT_EQ(r.exit_code, 3) << r.output;
}

// The shipped suite against its committed baseline: a change in simulated behaviour fails here
// until the baseline is updated on purpose (README "Sweeps and regressions").
TEST(RegressionSuite, ShippedSuiteHoldsItsBaseline) {
  const std::string root = PREFIXSIM_SOURCE_DIR;
  auto r = RunCli("regress --suite " + root + "/configs/scenarios/regression.json --baseline " +
                  root + "/configs/scenarios/regression.baseline.json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace prefixsim::grid
