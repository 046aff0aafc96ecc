// SIGINT/SIGTERM during replay, compare and sweep (sim/cli/interrupt.h): the real binary is
// started on a trace long enough to be still running, signalled by pid, and must exit 130 with a
// summary marked partial, whole output files (JSON "partial": true, every request read in the
// CSV) and no temporary file left behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr int64_t kRequests = 400000;  // a replay of this takes tens of seconds

using ::prefixsim::testing::ReadFile;

// Starts the binary with `args`, stdout and stderr to files in `dir`; returns its pid.
pid_t Spawn(const std::vector<std::string>& args, const fs::path& dir) {
  const std::string out = (dir / "stdout.txt").string(), err = (dir / "stderr.txt").string();
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> argv;
    static std::string binary = PREFIXSIM_BINARY;
    argv.push_back(binary.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// Waits until `ready` holds (polling), at most `seconds`.
template <typename F>
bool WaitFor(F ready, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Whether the process is still running (not yet reaped).
bool Running(pid_t pid) { return waitpid(pid, nullptr, WNOHANG) == 0; }

int WaitExit(pid_t pid, int* signal_out = nullptr) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status) && signal_out != nullptr) *signal_out = WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> FilesIn(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class InterruptTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::path(::testing::TempDir()) /
                        ("prefixsim_interrupt_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    trace_ = new std::string((*dir_ / "chat.jsonl").string());
    const auto r = testing::RunCli("gen-trace --kind chat --seed 1 --requests " +
                                   std::to_string(kRequests) + " --out " + *trace_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
    delete trace_;
  }
  fs::path NewDir(const std::string& name) {
    const fs::path d = *dir_ / name;
    fs::create_directories(d / "out");
    return d;
  }
  static fs::path* dir_;
  static std::string* trace_;
};
fs::path* InterruptTest::dir_ = nullptr;
std::string* InterruptTest::trace_ = nullptr;

void ExpectPartialReplayJson(const Json& j, const char* signal) {
  EXPECT_EQ(j.value("partial", false), true);
  EXPECT_EQ(j.value("interrupted_by", ""), signal);
  const int64_t requests = j["requests"].get<int64_t>();
  EXPECT_GT(requests, 0);
  EXPECT_LT(requests, kRequests);
  const Json& skipped = j["skipped_requests"];
  // Every request read is accounted for.
  EXPECT_EQ(j["finished_requests"].get<int64_t>() + skipped["prompt_too_long"].get<int64_t>() +
                skipped["does_not_fit"].get<int64_t>() + skipped["empty_prompt"].get<int64_t>() +
                j["interrupted_requests"].get<int64_t>(),
            requests);
}

TEST_F(InterruptTest, ReplayStopsOnSigintWithAPartialSummaryAndWholeFiles) {
  const fs::path d = NewDir("replay");
  const fs::path out = d / "out";
  const pid_t pid = Spawn({"replay", "--trace", *trace_, "--model", "kimi-k3-like", "--engine",
                           "kimi-k3-dspark", "--policy", "new", "--no-progress", "--json",
                           (out / "r.json").string(), "--csv", (out / "r.csv").string()},
                          d);
  ASSERT_GT(pid, 0);
  // Running for real: the streamed CSV has rows in its temporary file.
  const bool streaming = WaitFor(
      [&] {
        for (const auto& e : fs::directory_iterator(out)) {
          if (e.path().filename().string().find(".tmp") != std::string::npos &&
              fs::file_size(e.path()) > 10000) {
            return true;
          }
        }
        return false;
      },
      120);
  ASSERT_TRUE(streaming) << "the replay did not start streaming rows";
  ASSERT_TRUE(Running(pid)) << "finished before the signal: make the trace longer";
  ASSERT_EQ(kill(pid, SIGINT), 0);
  EXPECT_EQ(WaitExit(pid), 130) << ReadFile(d / "stderr.txt");

  const std::string stdout_text = ReadFile(d / "stdout.txt");
  EXPECT_NE(stdout_text.find("PARTIAL: interrupted by SIGINT"), std::string::npos) << stdout_text;
  // Only the two outputs, complete: no temporary file.
  EXPECT_EQ(FilesIn(out), (std::vector<std::string>{"r.csv", "r.json"}));
  const Json j = Json::parse(ReadFile(out / "r.json"));
  ExpectPartialReplayJson(j, "SIGINT");
  // The CSV has one row per request read (interrupted ones say so), plus the header.
  std::ifstream csv(out / "r.csv");
  std::string line;
  int64_t rows = -1, interrupted = 0;
  while (std::getline(csv, line)) {
    ++rows;
    if (line.find("interrupted") != std::string::npos) ++interrupted;
  }
  EXPECT_EQ(rows, j["requests"].get<int64_t>());
  EXPECT_EQ(interrupted, j["interrupted_requests"].get<int64_t>());
}

TEST_F(InterruptTest, ReplayStopsOnSigtermToo) {
  const fs::path d = NewDir("replay_term");
  const fs::path out = d / "out";
  const pid_t pid = Spawn({"replay", "--trace", *trace_, "--model", "kimi-k3-like", "--engine",
                           "kimi-k3-dspark", "--policy", "old", "--no-progress", "--json",
                           (out / "r.json").string(), "--csv", (out / "r.csv").string()},
                          d);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& e : fs::directory_iterator(out)) {
          if (fs::file_size(e.path()) > 10000) return true;
        }
        return false;
      },
      120));
  ASSERT_TRUE(Running(pid)) << "finished before the signal: make the trace longer";
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(WaitExit(pid), 130);
  EXPECT_EQ(FilesIn(out), (std::vector<std::string>{"r.csv", "r.json"}));
  ExpectPartialReplayJson(Json::parse(ReadFile(out / "r.json")), "SIGTERM");
}

TEST_F(InterruptTest, CompareStopsEveryPolicy) {
  const fs::path d = NewDir("compare");
  const fs::path out = d / "out";
  const pid_t pid =
      Spawn({"compare", "--trace", *trace_, "--model", "kimi-k3-like", "--engine", "kimi-k3-dspark",
             "--policies", "old,new", "--no-progress", "--json", (out / "c.json").string()},
            d);
  ASSERT_GT(pid, 0);
  // Nothing is written before the end: give it time to be well into the replays.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  ASSERT_TRUE(Running(pid)) << "finished before the signal: make the trace longer";
  ASSERT_EQ(kill(pid, SIGINT), 0);
  EXPECT_EQ(WaitExit(pid), 130) << ReadFile(d / "stderr.txt");
  EXPECT_NE(ReadFile(d / "stdout.txt").find("PARTIAL: interrupted by SIGINT"), std::string::npos);
  EXPECT_EQ(FilesIn(out), (std::vector<std::string>{"c.json"}));
  const Json j = Json::parse(ReadFile(out / "c.json"));
  EXPECT_EQ(j.value("partial", false), true);
  ASSERT_EQ(j["policies"].size(), 2u);
  for (const Json& p : j["policies"]) ExpectPartialReplayJson(p, "SIGINT");
}

TEST_F(InterruptTest, SweepKeepsFinishedPointsOnly) {
  const fs::path d = NewDir("sweep");
  const fs::path out = d / "out";
  const std::string sample = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_chat.jsonl";
  const fs::path grid = d / "grid.json";
  std::ofstream(grid)
      << Json{{"name", "interrupt"},
              {"base", {{"seed", 0}, {"model", "kimi-k3-like"}, {"engine", "kimi-k3-dspark"}}},
              {"grids",
               Json::array(
                   {Json{{"base", {{"trace", sample}}}, {"axes", {{"policy", {"old", "new"}}}}},
                    Json{{"base", {{"trace", *trace_}}}, {"axes", {{"policy", {"old", "new"}}}}}})}}
             .dump();
  const pid_t pid = Spawn(
      {"sweep", "--grid", grid.string(), "--out", out.string(), "--jobs", "1", "--no-wall-time"},
      d);
  ASSERT_GT(pid, 0);
  // The two sample points finish in seconds; the third is then running.
  const fs::path points = out / "points";
  ASSERT_TRUE(
      WaitFor([&] { return fs::is_directory(points) && FilesIn(points).size() >= 2; }, 120));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_TRUE(Running(pid)) << "finished before the signal: make the trace longer";
  ASSERT_EQ(kill(pid, SIGINT), 0);
  EXPECT_EQ(WaitExit(pid), 130) << ReadFile(d / "stderr.txt");
  EXPECT_NE(ReadFile(d / "stderr.txt").find("PARTIAL: interrupted by SIGINT"), std::string::npos);
  // The finished points, nothing of the stopped one, no temporary file; results cover 2 of 4.
  const std::vector<std::string> files = FilesIn(points);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].substr(0, 6), "00000-");
  EXPECT_EQ(files[1].substr(0, 6), "00001-");
  EXPECT_EQ(FilesIn(out), (std::vector<std::string>{"points", "results.csv", "results.json"}));
  const Json results = Json::parse(ReadFile(out / "results.json"));
  EXPECT_EQ(results["grid_size"].get<int>(), 4);
  EXPECT_EQ(results["points"].get<int>(), 2);
}

// `tune` stopped mid-search exits 130 and says how to resume; its --state file holds only whole
// records of the replays that finished.
TEST_F(InterruptTest, TuneStopsOnSigintAndKeepsFinishedReplays) {
  const fs::path d = NewDir("tune");
  const fs::path state = d / "out" / "state.jsonl";
  const pid_t pid = Spawn(
      {"tune", "--trace", *trace_, "--model", "kimi-k3-like", "--engine", "kimi-k3-dspark",
       "--max-requests", "60000", "--no-progress", "--threads", "1", "--state", state.string()},
      d);
  ASSERT_GT(pid, 0);
  // Running for real: a first replay has finished and is in the state file.
  ASSERT_TRUE(WaitFor([&] { return fs::exists(state) && fs::file_size(state) > 0; }, 300));
  ASSERT_TRUE(Running(pid));
  kill(pid, SIGINT);
  EXPECT_EQ(WaitExit(pid), 130);
  const std::string err = ReadFile(d / "stderr.txt");
  EXPECT_NE(err.find("interrupted; the same command with --state"), std::string::npos) << err;
  std::istringstream lines(ReadFile(state));
  int records = 0;
  for (std::string line; std::getline(lines, line);) {
    const Json j = Json::parse(line);
    EXPECT_TRUE(j.contains("key") && j.contains("hits")) << line;
    ++records;
  }
  EXPECT_GT(records, 0);
}

}  // namespace
}  // namespace prefixsim
