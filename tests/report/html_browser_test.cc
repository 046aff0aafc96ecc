// The compare page in a real browser: headless Chromium (Debian's `chromium`, installed by
// scripts/setup.sh) renders the page for the shipped chat sample under old,new, saves a
// screenshot, and dumps the DOM after load. The page's inline script counts each chart's drawn
// SVG elements into data attributes; the test checks them, and that the browser logged no console
// message at all (errors, failed loads and uncaught exceptions all log to the console).
//
// The "Why tokens missed" section is checked against the JSON's miss causes: a bar segment per
// policy and non-zero cause, a chart over time per non-zero cause but hit. A fleet replay's page
// is checked the same way for its per-replica bar charts.
//
// PREFIXSIM_SCREENSHOT_OUT=path: also copy the screenshot there (docs/compare_chat_old_new.png is
// made this way).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"

extern char** environ;

namespace prefixsim {
namespace {

namespace fs = std::filesystem;

constexpr char kChromium[] = "/usr/bin/chromium";

using ::prefixsim::testing::ReadFile;

// Runs argv with stdout/stderr redirected to files, in its own process group. Kills that group
// (the browser and the helpers it started) if it runs past timeout_s. Returns the exit status, or
// -1 on a spawn failure or timeout.
int RunWithTimeout(const std::vector<std::string>& args, const fs::path& out, const fs::path& err,
                   int timeout_s) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool timed_out = false;
  while (true) {
    // Wait without reaping, so the group id stays ours until the group is killed below.
    siginfo_t info{};
    if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The group we created for the browser: only its own processes (helpers left behind on exit,
  // everything on a timeout).
  kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> ChromiumArgs(const fs::path& profile) {
  return {kChromium,
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
          "--disable-dev-shm-usage",
          "--hide-scrollbars",
          "--user-data-dir=" + profile.string(),
          "--enable-logging=stderr",
          "--v=0"};
}

// Lines of Chromium's log that carry a page console message.
std::vector<std::string> ConsoleLines(const std::string& log) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find(":CONSOLE") != std::string::npos) lines.push_back(line);
  }
  return lines;
}

// What the miss-cause section of a page of these replays' JSON summaries draws: the stacked bars'
// segments (one per policy, kind of admission and non-zero cause) and the ids of the charts over
// time (one per cause but hit that is non-zero at some policy's first admissions).
struct MissCharts {
  int segments = 0;
  std::set<std::string> over_time;
};
MissCharts ExpectedMissCharts(const std::vector<nlohmann::json>& summaries) {
  MissCharts m;
  for (const nlohmann::json& p : summaries) {
    if (!p.contains("miss_causes")) continue;
    for (const char* kind : {"first_admissions", "preempted_admissions"}) {
      for (const auto& [cause, tokens] : p["miss_causes"][kind]["tokens_by_cause"].items()) {
        if (tokens.get<int64_t>() == 0) continue;
        ++m.segments;
        if (std::string(kind) == "first_admissions" && cause != "hit") {
          std::string id = cause;
          std::replace(id.begin(), id.end(), '_', '-');
          m.over_time.insert("miss-over-time-" + id);
        }
      }
    }
  }
  return m;
}

class HtmlBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kChromium, X_OK) != 0) {
      GTEST_SKIP() << "headless Chromium not installed (" << kChromium
                   << " missing; scripts/setup.sh installs Debian's chromium): the browser check "
                      "of the HTML report was skipped";
    }
    char tmpl[] = "/tmp/prefixsim_html_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  // The page's DOM after load in the browser (a failure, and any console message, reported);
  // "" when the browser failed.
  std::string LoadedDom(const fs::path& page, const std::string& profile) {
    std::vector<std::string> args = ChromiumArgs(dir_ / profile);
    args.push_back("--dump-dom");
    args.push_back("file://" + page.string());
    const fs::path out = dir_ / (profile + ".html"), err = dir_ / (profile + ".err");
    const int rc = RunWithTimeout(args, out, err, 120);
    const std::string log = ReadFile(err);
    EXPECT_EQ(rc, 0) << log;
    EXPECT_TRUE(ConsoleLines(log).empty()) << log;
    return rc == 0 ? ReadFile(out) : "";
  }
  void TearDown() override {
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }
  fs::path dir_;
};

TEST_F(HtmlBrowserTest, ComparePageRendersWithEveryChartDrawn) {
  const fs::path page = dir_ / "compare.html";
  const fs::path json = dir_ / "compare.json";
  const auto cli =
      testing::RunCli("compare --trace " PREFIXSIM_SOURCE_DIR
                      "/traces/sample_chat.jsonl --model kimi-k3-like --engine kimi-k3-dspark "
                      "--policies old,new --no-progress --capacities 5GiB,16GiB,256GiB --html " +
                      page.string() + " --json " + json.string());
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  const std::string html = ReadFile(page);
  ASSERT_FALSE(html.empty());
  // Self-contained: nothing fetched at view time.
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
  // The plan difference and the LCM arithmetic.
  EXPECT_NE(html.find("S = lcm(1,536, 1,728) = 13,824"), std::string::npos);
  EXPECT_NE(html.find("H = gcd(1,536, 1,728) = 192"), std::string::npos);
  EXPECT_NE(html.find("S = 1,536"), std::string::npos);
  // old loses prefix to the alignment, new does not.
  const nlohmann::json j = nlohmann::json::parse(ReadFile(json));
  EXPECT_GT(j["policies"][0]["lost_to_alignment_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(j["policies"][1]["lost_to_alignment_tokens"].get<int64_t>(), 0);
  EXPECT_GT(j["policies"][0]["lost_to_alignment_per_request"]["requests_with_loss"].get<int64_t>(),
            0);

  // 1. Screenshot.
  const fs::path png = dir_ / "compare.png";
  std::vector<std::string> shot = ChromiumArgs(dir_ / "profile-shot");
  shot.push_back("--screenshot=" + png.string());
  shot.push_back("--window-size=1400,5800");  // the whole page, down to the alignment curve
  shot.push_back("file://" + page.string());
  const int shot_rc = RunWithTimeout(shot, dir_ / "shot.out", dir_ / "shot.err", 120);
  const std::string shot_log = ReadFile(dir_ / "shot.err");
  ASSERT_EQ(shot_rc, 0) << shot_log;
  ASSERT_TRUE(fs::exists(png)) << shot_log;
  const std::string png_bytes = ReadFile(png);
  ASSERT_GT(png_bytes.size(), 20000u);
  EXPECT_EQ(png_bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_TRUE(ConsoleLines(shot_log).empty()) << shot_log;
  if (const char* out = std::getenv("PREFIXSIM_SCREENSHOT_OUT"); out != nullptr && *out) {
    fs::copy_file(png, out, fs::copy_options::overwrite_existing);
  }

  // 2. The DOM after load, with the page's own verification attributes.
  std::vector<std::string> dump = ChromiumArgs(dir_ / "profile-dom");
  dump.push_back("--dump-dom");
  dump.push_back("file://" + page.string());
  const int dump_rc = RunWithTimeout(dump, dir_ / "dom.html", dir_ / "dom.err", 120);
  const std::string dom = ReadFile(dir_ / "dom.html");
  const std::string dom_log = ReadFile(dir_ / "dom.err");
  ASSERT_EQ(dump_rc, 0) << dom_log;
  EXPECT_TRUE(ConsoleLines(dom_log).empty()) << dom_log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, std::regex("<body([^>]*)>"))) << dom.substr(0, 2000);
  const std::string body = m[1];
  EXPECT_NE(body.find("data-verified=\"yes\""), std::string::npos) << body;
  EXPECT_NE(body.find("data-js-errors=\"0\""), std::string::npos) << body;
  ASSERT_TRUE(std::regex_search(body, m, std::regex("data-charts=\"([0-9]+)\""))) << body;
  const int charts = std::stoi(m[1]);
  EXPECT_GE(charts, 8);  // time, 2 per-request CDFs, cliff, 2 latency CDFs, capacity, alignment
  EXPECT_NE(body.find("data-charts-drawn=\"" + std::to_string(charts) + "\""), std::string::npos)
      << body;
  // Every chart by name, each with drawn elements.
  int seen = 0;
  const std::regex fig("data-chart=\"([a-z0-9-]+)\" data-drawn=\"([0-9]+)\"");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), fig); it != std::sregex_iterator();
       ++it) {
    ++seen;
    EXPECT_GT(std::stoi((*it)[2]), 0) << "chart " << (*it)[1] << " drew nothing";
  }
  EXPECT_EQ(seen, charts);
  for (const char* id :
       {"hit-rate-over-time", "cdf-hit-fraction", "cdf-lost-to-alignment", "block-size-cliff",
        "cdf-ttft", "cdf-e2e", "capacity-sweep", "alignment-curve"}) {
    EXPECT_NE(dom.find(std::string("data-chart=\"") + id + "\""), std::string::npos) << id;
  }
  // The block-size cliff after load: one series per policy (a dot per non-empty prompt-length
  // bin), each policy's A = S marked, and each policy's line of requests too short to ever hit.
  ASSERT_TRUE(std::regex_search(
      dom, m, std::regex("data-chart=\"block-size-cliff\" data-drawn=\"([0-9]+)\"")));
  EXPECT_GE(std::stoi(m[1]), 2 * 2 + 2);  // 2 paths, 2 markers, dots
  const size_t cliff = dom.find("data-chart=\"block-size-cliff\"");
  const std::string cliff_chart = dom.substr(cliff, dom.find("</figure>", cliff) - cliff);
  for (const char* text : {">old</text>", ">new</text>", ">old: A = S = 13,824</text>",
                           ">new: A = S = 1,536</text>"}) {
    EXPECT_NE(cliff_chart.find(text), std::string::npos) << text;
  }
  for (const char* policy : {"old", "new"}) {
    EXPECT_TRUE(std::regex_search(
        dom, std::regex(std::string("<li data-policy=\"") + policy +
                        "\" data-hit-alignment=\"[0-9]+\" data-scheduler-block=\"[0-9]+\" "
                        "data-never-hit-short-requests=\"[0-9]+\">")))
        << policy;
  }
  EXPECT_NE(dom.find("<table class=\"cliff\">"), std::string::npos);

  // Why tokens missed, after load: the stacked bars drew a segment per policy and non-zero cause
  // (old leaves not_checkpointed tokens that new hits), a chart over time per non-zero cause.
  const MissCharts expected = ExpectedMissCharts({j["policies"][0], j["policies"][1]});
  EXPECT_GT(
      j["policies"][0]["miss_causes"]["first_admissions"]["tokens_by_cause"]["not_checkpointed"]
          .get<int64_t>(),
      0);
  EXPECT_GE(expected.segments, 2 * 3);  // at least hit, compulsory and tail under both
  EXPECT_NE(dom.find("<h2 id=\"miss-causes\">"), std::string::npos);
  EXPECT_NE(dom.find("data-chart=\"miss-causes\" data-drawn=\"" +
                     std::to_string(expected.segments) + "\""),
            std::string::npos)
      << dom.substr(dom.find("data-chart=\"miss-causes\""), 200);
  EXPECT_EQ(charts, 8 + 1 + static_cast<int>(expected.over_time.size()));
  EXPECT_TRUE(expected.over_time.count("miss-over-time-not-checkpointed"));
  for (const std::string& id : expected.over_time) {
    EXPECT_TRUE(
        std::regex_search(dom, std::regex("data-chart=\"" + id + "\" data-drawn=\"[1-9][0-9]*\"")))
        << id;
  }
  EXPECT_NE(dom.find("<table class=\"miss-causes\" data-admissions=\"first\">"), std::string::npos);
}

// replay --html: the same page for one run, no delta column.
TEST_F(HtmlBrowserTest, ReplayPageHasNoDeltas) {
  const fs::path page = dir_ / "replay.html";
  const fs::path json = dir_ / "replay.json";
  const auto cli = testing::RunCli("replay --trace " PREFIXSIM_SOURCE_DIR
                                   "/traces/sample_chat.jsonl --model kimi-k3-like --engine "
                                   "kimi-k3-dspark --policy old --no-progress --html " +
                                   page.string() + " --json " + json.string());
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  const std::string html = ReadFile(page);
  EXPECT_EQ(html.find("&minus; old</th>"), std::string::npos);
  EXPECT_NE(html.find("data-chart=\"alignment-curve\""), std::string::npos);
  std::vector<std::string> dump = ChromiumArgs(dir_ / "profile");
  dump.push_back("--dump-dom");
  dump.push_back("file://" + page.string());
  ASSERT_EQ(RunWithTimeout(dump, dir_ / "dom.html", dir_ / "dom.err", 120), 0)
      << ReadFile(dir_ / "dom.err");
  const std::string dom = ReadFile(dir_ / "dom.html");
  EXPECT_NE(dom.find("data-verified=\"yes\""), std::string::npos);
  // The eight charts of every page, the miss-cause bars and a chart per non-zero cause.
  const MissCharts misses = ExpectedMissCharts({nlohmann::json::parse(ReadFile(json))});
  const std::string n = std::to_string(8 + 1 + misses.over_time.size());
  EXPECT_NE(dom.find("data-charts=\"" + n + "\" data-charts-drawn=\"" + n + "\""),
            std::string::npos)
      << dom.substr(0, 400);
  EXPECT_NE(
      dom.find("data-chart=\"miss-causes\" data-drawn=\"" + std::to_string(misses.segments) + "\""),
      std::string::npos);
  EXPECT_TRUE(ConsoleLines(ReadFile(dir_ / "dom.err")).empty());
}

// A fleet replay's page adds the fleet section with its two bar charts and the routing regret
// over time; every chart still draws.
TEST_F(HtmlBrowserTest, FleetPageDrawsItsBarCharts) {
  const fs::path page = dir_ / "fleet.html";
  const fs::path json = dir_ / "fleet.json";
  const auto cli = testing::RunCli("replay --trace " PREFIXSIM_SOURCE_DIR
                                   "/traces/sample_chat.jsonl --model kimi-k3-like --engine "
                                   "kimi-k3-dspark --policy new --replicas 2 --router kv_aware "
                                   "--no-progress --html " +
                                   page.string() + " --json " + json.string());
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  std::vector<std::string> dump = ChromiumArgs(dir_ / "profile");
  dump.push_back("--dump-dom");
  dump.push_back("file://" + page.string());
  ASSERT_EQ(RunWithTimeout(dump, dir_ / "dom.html", dir_ / "dom.err", 120), 0)
      << ReadFile(dir_ / "dom.err");
  const std::string dom = ReadFile(dir_ / "dom.html");
  EXPECT_NE(dom.find("data-verified=\"yes\""), std::string::npos);
  // Eleven charts (the fleet's three), the miss-cause bars and a chart per non-zero cause.
  const MissCharts misses = ExpectedMissCharts({nlohmann::json::parse(ReadFile(json))});
  const std::string n = std::to_string(11 + 1 + misses.over_time.size());
  EXPECT_NE(dom.find("data-charts=\"" + n + "\" data-charts-drawn=\"" + n + "\""),
            std::string::npos)
      << dom.substr(0, 400);
  for (const char* id : {"fleet-load", "fleet-hit-rate"}) {
    EXPECT_NE(dom.find(std::string("data-chart=\"") + id + "\" data-drawn=\"2\""),
              std::string::npos)
        << id;
  }
  EXPECT_NE(dom.find("data-chart=\"routing-regret-over-time\" data-drawn=\""), std::string::npos);
  EXPECT_TRUE(ConsoleLines(ReadFile(dir_ / "dom.err")).empty());
}

// `tune --html`: the search's section (its front chart drawn, a row per shown plan, the
// recommendation marked) above the compare page of the recommendation against the baselines.
TEST_F(HtmlBrowserTest, TunePageRendersTheSearchAndTheComparison) {
  const fs::path page = dir_ / "tune.html";
  const fs::path json = dir_ / "tune.json";
  const auto cli = testing::RunCli(
      "tune --trace " PREFIXSIM_SOURCE_DIR
      "/traces/sample_chat.jsonl --model kimi-k3-like --engine kimi-k3-dspark --budget 6 "
      "--no-progress --html " +
      page.string() + " --json " + json.string());
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  const nlohmann::json report = nlohmann::json::parse(ReadFile(json));
  const std::string recommended = report["recommended"].get<std::string>();

  const std::string dom = LoadedDom(page, "profile-tune");
  ASSERT_FALSE(dom.empty());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, std::regex("<body([^>]*)>")));
  const std::string body = m[1];
  EXPECT_NE(body.find("data-verified=\"yes\""), std::string::npos) << body;
  EXPECT_NE(body.find("data-js-errors=\"0\""), std::string::npos) << body;
  ASSERT_TRUE(
      std::regex_search(dom, m, std::regex("data-chart=\"tune-front\" data-drawn=\"([0-9]+)\"")));
  EXPECT_GE(std::stoi(m[1]), 3) << "the front and the baselines' points";
  const size_t search = dom.find("<h2 id=\"tune\">1. The KV plan search</h2>");
  ASSERT_NE(search, std::string::npos);
  EXPECT_LT(search, dom.find("KV cache plan")) << "the search comes first";
  EXPECT_NE(dom.find("<tr data-plan=\"" + recommended + "\">"), std::string::npos) << recommended;
  for (const auto& c : report["candidates"]) {
    EXPECT_NE(dom.find("<tr data-plan=\"" + c["label"].get<std::string>() + "\">"),
              std::string::npos)
        << c["label"];
  }
  // The comparison below: the baselines and the recommendation, by their labels.
  for (const std::string& policy : {std::string("old"), std::string("new"), recommended}) {
    EXPECT_NE(dom.find(">" + policy + "</th>"), std::string::npos) << policy;
  }
}

}  // namespace
}  // namespace prefixsim
