// `prefixsim replay` and `prefixsim compare` end to end (docs/design.md §4.1, §4.5): outputs, exit
// codes, byte-identical reports for equal runs, a self-contained HTML page.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"
#include "prefixsim/miss_causes.h"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::RunCli;

using ::prefixsim::testing::ReadFile;

// A small Mooncake-format trace: 24 requests in 4 conversations sharing a 3-block system prompt.
std::string WriteTrace() {
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(getpid()) + "_cli_mooncake.jsonl";
  std::ofstream out(path);
  for (int i = 0; i < 24; ++i) {
    const int conv = i % 4, turn = i / 4;
    out << "{\"timestamp\": " << i * 500 << ", \"input_length\": " << 512 * (4 + turn) - 100
        << ", \"output_length\": " << 20 + i << ", \"hash_ids\": [0, 1, 2";
    for (int t = 0; t <= turn; ++t) out << ", " << 1000 * (conv + 1) + t;
    out << "]}\n";
  }
  return path;
}

const char kModelEngine[] = " --model kimi-k3-like --engine kimi-k3-dspark --no-progress";

TEST(ReplayCliTest, WritesSummaryJsonAndCsv) {
  const std::string trace = WriteTrace();
  const std::string json = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_replay.json";
  const std::string csv = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_replay.csv";
  const auto r = RunCli("replay --trace " + trace + kModelEngine + " --policy new --json " + json +
                        " --csv " + csv);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Prefix cache hit rate"), std::string::npos) << r.output;
  // The simulator's speed, from the wall time (issue 29: print the simulated requests per
  // wall-second).
  EXPECT_NE(r.output.find(" requests per wall-second)"), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(j["policy"], "new");
  EXPECT_EQ(j["requests"], 24);
  EXPECT_EQ(j["kv_plan"]["hit_alignment"], 1536);
  for (const char* key : {"queries", "hits", "hit_rate", "preempted_requests", "preempted_queries",
                          "preempted_hits"}) {
    EXPECT_TRUE(j["prefix_cache"].contains(key)) << key;
  }
  for (const char* key : {"alignment_loss_tokens", "evicted_blocks", "preemptions", "spec_decode",
                          "latency", "throughput", "sim_time_s", "wall_time_s"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_GT(j["prefix_cache"]["hits"].get<int64_t>(), 0);
  EXPECT_GT(j["spec_decode"]["draft_tokens"].get<int64_t>(), 0);
  EXPECT_TRUE(j["latency"]["ttft"].contains("p99_ms"));
  const std::string rows = ReadFile(csv);
  EXPECT_EQ(rows.rfind("id,arrival_s,prompt_tokens,", 0), 0u);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), '\n'), 25);
}

TEST(ReplayCliTest, EqualRunsGiveByteIdenticalJsonWithoutWallTime) {
  const std::string trace = WriteTrace();
  const std::string a = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_det_a.json";
  const std::string b = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_det_b.json";
  const std::string args = "replay --trace " + trace + kModelEngine + " --seed 5 --no-wall-time";
  const auto first = RunCli(args + " --json " + a);
  ASSERT_EQ(first.exit_code, 0);
  EXPECT_EQ(first.output.find("wall"), std::string::npos) << first.output;
  ASSERT_EQ(RunCli(args + " --json " + b).exit_code, 0);
  const std::string ja = ReadFile(a);
  EXPECT_FALSE(ja.empty());
  EXPECT_EQ(ja, ReadFile(b));
  EXPECT_EQ(ja.find("wall_time_s"), std::string::npos);
}

TEST(ReplayCliTest, EngineFlagsOverrideTheJson) {
  const std::string trace = WriteTrace();
  const std::string json = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_override.json";
  const auto r = RunCli("replay --trace " + trace + kModelEngine +
                        " --no-spec --num-gpu-blocks 500 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(j["kv_plan"]["num_blocks"], 500);
  EXPECT_EQ(j["spec_decode"]["draft_tokens"], 0);
}

TEST(ReplayCliTest, ErrorsAndExitCodes) {
  const std::string trace = WriteTrace();
  EXPECT_EQ(RunCli(std::string("replay") + kModelEngine).exit_code, 2);  // --trace missing
  EXPECT_EQ(RunCli("replay --trace /nonexistent.jsonl" + std::string(kModelEngine)).exit_code, 2);
  EXPECT_EQ(RunCli("replay --trace " + trace + kModelEngine + " --policy nope").exit_code, 2);
  const auto bad_dir =
      RunCli("replay --trace " + trace + kModelEngine + " --json /nonexistent/x.json");
  EXPECT_NE(bad_dir.exit_code, 0);
  // A router view's knob without its view would do nothing (CacheViewTest.AKnobOfAnotherView...).
  const auto idle_knob = RunCli("replay --trace " + trace + kModelEngine +
                                " --replicas 2 --router kv_aware --kv-event-loss 0.2");
  EXPECT_EQ(idle_knob.exit_code, 2) << idle_knob.output;
  EXPECT_NE(idle_knob.output.find("--kv-event-loss"), std::string::npos) << idle_knob.output;
}

// --router on one replica routes nothing: the run goes on (one engine's report) with a warning,
// once for compare's policies; a fleet gets none.
TEST(ReplayCliTest, WarnsThatARouterOnOneReplicaRoutesNothing) {
  const std::string trace = WriteTrace();
  const auto one = RunCli("replay --trace " + trace + kModelEngine + " --router kv_aware");
  EXPECT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("--router kv_aware routes nothing on one replica"), std::string::npos)
      << one.output;
  const auto both =
      RunCli("compare --trace " + trace + kModelEngine +
             " --policies old,new --router kv_aware --router-view lossy --kv-event-loss 0.5");
  EXPECT_EQ(both.exit_code, 0) << both.output;
  const size_t first = both.output.find("routes nothing");
  ASSERT_NE(first, std::string::npos) << both.output;
  EXPECT_EQ(both.output.find("routes nothing", first + 1), std::string::npos) << both.output;
  const auto fleet =
      RunCli("replay --trace " + trace + kModelEngine + " --replicas 2 --router kv_aware");
  EXPECT_EQ(fleet.exit_code, 0) << fleet.output;
  EXPECT_EQ(fleet.output.find("routes nothing"), std::string::npos) << fleet.output;
}

// A block size the plan raised (mamba alignment, docs/semantics.md) gets a warning naming what
// the plan uses; one it kept gets none.
TEST(ReplayCliTest, WarnsWhenThePlanDoesNotUseTheGivenBlockSize) {
  const std::string trace = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/sample_chat.jsonl";
  const auto raised = RunCli("replay --trace " + trace +
                             " --model kimi-k3-like --engine kimi-k3-dspark --block-size 16");
  EXPECT_EQ(raised.exit_code, 0) << raised.output;
  EXPECT_NE(raised.output.find("block size 16 (--block-size or the engine JSON's block_size) is "
                               "not the plan's: its attention block size is 1536"),
            std::string::npos)
      << raised.output;
  const auto kept = RunCli("replay --trace " + trace +
                           " --model llama-3.1-8b --engine llama-3.1-8b --block-size 32");
  EXPECT_EQ(kept.exit_code, 0) << kept.output;
  EXPECT_EQ(kept.output.find("is not the plan's"), std::string::npos) << kept.output;
}

TEST(CompareCliTest, SideBySideJsonAndSelfContainedHtml) {
  const std::string trace = WriteTrace();
  const std::string json = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_compare.json";
  const std::string html = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_compare.html";
  const auto r = RunCli("compare --trace " + trace + kModelEngine + " --policies old,new --json " +
                        json + " --html " + html);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("hit rate (%)"), std::string::npos) << r.output;
  const auto j = nlohmann::json::parse(ReadFile(json));
  ASSERT_EQ(j["policies"].size(), 2u);
  EXPECT_EQ(j["policies"][0]["policy"], "old");
  EXPECT_EQ(j["policies"][1]["policy"], "new");
  ASSERT_EQ(j["deltas"].size(), 1u);
  EXPECT_EQ(j["deltas"][0]["baseline"], "old");
  const double delta = j["deltas"][0]["hit_rate_pp"];
  EXPECT_NEAR(delta,
              100.0 * (j["policies"][1]["prefix_cache"]["hit_rate"].get<double>() -
                       j["policies"][0]["prefix_cache"]["hit_rate"].get<double>()),
              1e-9);
  // The miss table's requests column says how it counts (a request under each of its causes).
  const auto one = RunCli("replay --trace " + trace + kModelEngine + " --policy new");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("requests*"), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("* requests with any token of the cause"), std::string::npos);
  // The text names its alignment rows apart and says what each counts under the table.
  EXPECT_NE(r.output.find("cut to A at lookup (tokens)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("alignment loss (tokens)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cut to A at lookup: every group had it cached"), std::string::npos);
  EXPECT_NE(r.output.find("unpublished by S: computed"), std::string::npos);
  EXPECT_NE(r.output.find("lost to alignment: what a cache aligned"), std::string::npos);
  EXPECT_NE(r.output.find("miss: the first admissions' tokens by cause"), std::string::npos);
  // The JSON has the miss-cause deltas the text and page show, each the difference of the two.
  const auto& causes = j["deltas"][0]["miss_tokens_by_cause"];
  ASSERT_EQ(causes.size(), static_cast<size_t>(kNumMissCauses)) << j["deltas"][0].dump();
  for (const auto& item : causes.items()) {
    const std::string cause = item.key();
    auto of = [&](int i) {
      return j["policies"][i]["miss_causes"]["first_admissions"]["tokens_by_cause"][cause]
          .get<int64_t>();
    };
    EXPECT_EQ(item.value().get<int64_t>(), of(1) - of(0)) << cause;
  }
  const std::string page = ReadFile(html);
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_NE(page.find("</html>"), std::string::npos);
  // Only the inline verification script (no external scripts).
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);
  EXPECT_EQ(page.find("href="), std::string::npos);
  EXPECT_EQ(RunCli("compare --trace " + trace + kModelEngine + " --policies old,nope").exit_code,
            2);
  // A policy twice would compare a run with itself (and write one --kv-events file twice).
  const auto twice = RunCli("compare --trace " + trace + kModelEngine + " --policies new,old,new");
  EXPECT_EQ(twice.exit_code, 2) << twice.output;
  EXPECT_NE(twice.output.find("--policies: 'new' is given twice"), std::string::npos)
      << twice.output;
}

TEST(ReplayCliTest, SharesTheTraceShapingFlagsOfAnalyze) {
  const std::string json = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_window.json";
  const auto r = RunCli(std::string("replay --trace ") + PREFIXSIM_SOURCE_DIR +
                        "/traces/sample_chat.jsonl --model kimi-k3-like --engine kimi-k3 "
                        "--trace-end-s 60 --max-requests 1000 --no-progress --json " +
                        json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(ReadFile(json));
  EXPECT_GT(j["requests"].get<int64_t>(), 0);
  EXPECT_LT(j["requests"].get<int64_t>(), 400);  // the sample has 400 requests over more than 60 s
}

// docs/semantics.md §10.2: a hybrid model publishes only up to the last S boundary. Under `old` the
// S of 13,824 keeps computed tokens out of the cache that the 1536-token MLA group could have
// published; under `new` S equals the finest block and nothing is kept out.
TEST(CompareCliTest, UnpublishedAlignmentTokensShowTheLcmCost) {
  const std::string json = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_unpub.json";
  const auto r = RunCli(std::string("compare --trace ") + PREFIXSIM_SOURCE_DIR +
                        "/traces/sample_chat.jsonl --model kimi-k3-like --engine kimi-k3-dspark "
                        "--policies old,new --no-wall-time --json " +
                        json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(ReadFile(json));
  const int64_t old_unpublished = j["policies"][0]["unpublished_alignment_tokens"];
  const int64_t new_unpublished = j["policies"][1]["unpublished_alignment_tokens"];
  const int64_t finished = j["policies"][0]["finished_requests"];
  EXPECT_GT(old_unpublished, 0);
  // Each finished request loses at most S - B_min = 13,824 - 1536 tokens.
  EXPECT_LE(old_unpublished, finished * (13824 - 1536));
  EXPECT_EQ(new_unpublished, 0);
}

}  // namespace
}  // namespace prefixsim
