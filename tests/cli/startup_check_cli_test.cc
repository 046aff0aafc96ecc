// The startup memory check and the order of input validation, end to end (issue 14; reference
// §1, §2.3, §6.4): `resolve` always prints the plan, `replay`/`compare` refuse a kv_cache_bytes
// pool that cannot hold one max_model_len request (vLLM's startup error), a num_gpu_blocks pool
// is never refused, and a missing trace is reported before any planning.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::RunCli;
using ::prefixsim::testing::TempOutputPath;
using ::testing::HasSubstr;
using ::testing::Not;

using ::prefixsim::testing::ReadFile;

// The JSON object in mixed stdout + stderr output (a warning may come before or after it).
nlohmann::json JsonIn(const std::string& output) {
  const size_t begin = output.find('{');
  const size_t end = output.rfind('}');
  if (begin == std::string::npos || end == std::string::npos) return nlohmann::json();
  return nlohmann::json::parse(output.substr(begin, end - begin + 1));
}

// Llama-3.1-8B layout, block 16, 32 layers x 4096 B/token: 2 MiB per block.
constexpr int64_t kBytesPerBlock = 32 * 16 * 4096;
const char kLlama[] = " --model llama-3.1-8b-layout --engine llama-3.1-8b";

std::string SmallTrace() {
  // One 64-token prompt (served) and one 4095-token prompt (4095 + 1 output = max_model_len
  // 4096: admissible, but needs 256 blocks of the 8 usable: does_not_fit).
  const std::string path = TempOutputPath("small_pool.jsonl");
  std::ofstream out(path);
  out << R"({"timestamp": 0, "input_length": 64, "output_length": 4, "hash_ids": [1]})"
      << "\n";
  out << R"({"timestamp": 1000, "input_length": 4095, "output_length": 1, )"
      << R"("hash_ids": [2, 3, 4, 5, 6, 7, 8, 9]})"
      << "\n";
  return path;
}

// Issue 14 "done when": num_gpu_blocks 9 with max_model_len 4096 resolves and replays.
TEST(StartupCheckCliTest, NumGpuBlocksNineResolvesAndReplays) {
  const std::string flags = std::string(kLlama) + " --num-gpu-blocks 9 --max-model-len 4096";
  const auto resolve = RunCli("resolve" + flags + " --json");
  ASSERT_EQ(resolve.exit_code, 0) << resolve.output;
  EXPECT_THAT(resolve.output, Not(HasSubstr("startup check failed")));
  const nlohmann::json plan = JsonIn(resolve.output);
  EXPECT_EQ(plan["num_blocks"], 9);
  EXPECT_EQ(plan["startup_check"]["performed"], false);
  EXPECT_EQ(plan["startup_check"]["ok"], true);

  const std::string json = TempOutputPath("small_pool_replay.json");
  const auto replay =
      RunCli("replay --trace " + SmallTrace() + flags + " --no-progress --json " + json);
  ASSERT_EQ(replay.exit_code, 0) << replay.output;
  const auto j = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(j["requests"], 2) << j.dump(2);
  EXPECT_EQ(j["finished_requests"], 1);  // the 64-token prompt was served
  EXPECT_EQ(j["skipped_requests"]["does_not_fit"], 1);
  EXPECT_EQ(j["prefix_cache"]["queries"], 64);
}

TEST(StartupCheckCliTest, ResolveWarnsButPrintsThePlanAndStrictFails) {
  const std::string flags = std::string(kLlama) + " --kv-cache-bytes " +
                            std::to_string(10 * kBytesPerBlock) + " --max-model-len 4096";
  const auto table = RunCli("resolve" + flags);
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("scheduler block size S = 16"));
  EXPECT_THAT(table.output, HasSubstr("warning: startup check failed"));
  EXPECT_THAT(table.output, HasSubstr("Raise kv_cache_bytes or lower max_model_len"));

  const auto json = RunCli("resolve" + flags + " --json");
  EXPECT_EQ(json.exit_code, 0) << json.output;
  const nlohmann::json plan = JsonIn(json.output);
  EXPECT_EQ(plan["num_blocks"], 10);
  EXPECT_EQ(plan["startup_check"]["performed"], true);
  EXPECT_EQ(plan["startup_check"]["ok"], false);
  EXPECT_EQ(plan["startup_check"]["max_fitting_model_len"], 9 * 16);
  EXPECT_THAT(plan["startup_check"]["message"].get<std::string>(), HasSubstr("256 blocks"));

  const auto strict = RunCli("resolve" + flags + " --strict");
  EXPECT_EQ(strict.exit_code, 2) << strict.output;
  EXPECT_THAT(strict.output, HasSubstr("error: startup check failed"));
}

TEST(StartupCheckCliTest, ReplayAndCompareRefuseTooLittleKvCacheBytes) {
  const std::string flags = std::string(kLlama) + " --kv-cache-bytes " +
                            std::to_string(10 * kBytesPerBlock) + " --max-model-len 4096";
  for (const std::string command : {"replay", "compare"}) {
    const auto r = RunCli(command + " --trace " + SmallTrace() + flags);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr("max_model_len 4096"));
    EXPECT_THAT(r.output, HasSubstr("9 usable blocks"));
    EXPECT_THAT(r.output, HasSubstr("Raise kv_cache_bytes or lower max_model_len"));
  }
}

// Files first: a missing trace is named even when the plan would also be refused.
TEST(StartupCheckCliTest, MissingTraceIsReportedBeforePlanning) {
  const std::string missing = TempOutputPath("no_such_trace.jsonl");
  for (const std::string command : {"replay", "compare"}) {
    const auto r = RunCli(command + " --trace " + missing + kLlama + " --kv-cache-bytes " +
                          std::to_string(2 * kBytesPerBlock));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(missing + ": no such file"));
    EXPECT_THAT(r.output, Not(HasSubstr("max_model_len")));
  }
  // A trace that exists but does not parse is also reported before the model is even read.
  const std::string bad = TempOutputPath("bad_trace.jsonl");
  std::ofstream(bad) << "not json\n";
  const auto r = RunCli("replay --trace " + bad + " --model no-such-model --engine llama-3.1-8b");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(bad));
  EXPECT_THAT(r.output, Not(HasSubstr("no-such-model")));
}

}  // namespace
}  // namespace prefixsim
