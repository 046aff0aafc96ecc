// The KV fast path (sim/kv/quiet_ranges.h, issue 15) skips AllocateSlots calls whose
// arguments stay inside the blocks a request holds. It must not change a single result: every
// sample replayed with and without it (--no-fast-path, the slow reference path) gives
// byte-identical JSON and CSV, on one engine and on a fleet. (With --check-invariants the fast
// path also re-runs every skipped call in full and checks that it changes nothing; the engine
// and fleet tests run that way.) The sampled checker of the soak (--check-invariants-every) only
// reads: a run checking after every step gives the same bytes too.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;
using ::prefixsim::testing::SampleReplayArgs;
using ::prefixsim::testing::TempOutputPath;

using Case = ::prefixsim::testing::SampleReplayCase;

class FastPathTest : public ::testing::TestWithParam<Case> {};

TEST_P(FastPathTest, SameBytesAsTheSlowPath) {
  const Case& c = GetParam();
  const std::string base = TempOutputPath(std::string("fast_") + c.name);
  const char* modes[3] = {"", " --no-fast-path", " --check-invariants-every 1"};
  std::string outputs[3];
  for (int m = 0; m < 3; ++m) {
    const std::string json = base + "_" + std::to_string(m) + ".json";
    const std::string csv = base + "_" + std::to_string(m) + ".csv";
    const auto r = RunCli(SampleReplayArgs(c.trace, c.args, /*seed=*/5) + " --json " + json +
                          " --csv " + csv + modes[m]);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    outputs[m] = ReadFile(json) + ReadFile(csv);
    ASSERT_GT(outputs[m].size(), 1000u);
  }
  EXPECT_TRUE(outputs[0] == outputs[1]) << "the fast path changed the results of " << c.name;
  EXPECT_TRUE(outputs[0] == outputs[2]) << "the sampled checker changed the results of " << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Samples, FastPathTest,
    ::testing::Values(Case{"chat_old", "sample_chat.jsonl",
                           "--model kimi-k3-like --engine kimi-k3-dspark --policy old"},
                      Case{"chat_new_small_pool", "sample_chat.jsonl",
                           "--model kimi-k3-like --engine kimi-k3-dspark --policy new "
                           "--num-gpu-blocks 300 --max-model-len 32768"},
                      Case{"agentic_nospec", "sample_agentic.jsonl",
                           "--model kimi-k3-like --engine kimi-k3 --policy new"},
                      Case{"shared_doc_llama", "sample_shared_doc.jsonl",
                           "--model llama-3.1-8b-layout --engine llama-3.1-8b-eagle --policy new"},
                      Case{"tokens_gpt_oss", "sample_tokens.jsonl",
                           "--model gpt-oss-20b --engine gpt-oss-20b-eagle3 --policy old"},
                      Case{"chat_fleet", "sample_chat.jsonl",
                           "--model kimi-k3-like --engine kimi-k3-dspark --policy old --replicas 3 "
                           "--router kv_aware"}),
    ::prefixsim::testing::SampleReplayCaseName);

}  // namespace
}  // namespace prefixsim
