// Golden end-to-end summaries on the committed sample traces (docs/design.md §6): `prefixsim replay
// --json` (wall time omitted) must match tests/golden/ byte for byte. A deliberate behaviour
// change regenerates them with PREFIXSIM_UPDATE_GOLDEN=1 (and the diff is reviewed).
#include <gtest/gtest.h>

#include <cstdlib>
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

using GoldenCase = ::prefixsim::testing::SampleReplayCase;

class ReplayGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(ReplayGoldenTest, MatchesGoldenJson) {
  const GoldenCase& c = GetParam();
  const std::string out = TempOutputPath(std::string("golden_") + c.name + ".json");
  const auto r = RunCli(SampleReplayArgs(c.trace, c.args, /*seed=*/3) + " --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string golden_path =
      std::string(PREFIXSIM_SOURCE_DIR) + "/tests/golden/replay_" + c.name + ".json";
  const std::string got = ReadFile(out);
  if (std::getenv("PREFIXSIM_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(golden_path, std::ios::binary) << got;
  }
  const std::string want = ReadFile(golden_path);
  ASSERT_FALSE(want.empty()) << "missing " << golden_path;
  EXPECT_EQ(got, want) << "replay output changed; diff " << out << " " << golden_path;
}

INSTANTIATE_TEST_SUITE_P(
    Samples, ReplayGoldenTest,
    ::testing::Values(GoldenCase{"chat_kimi_dspark_old", "sample_chat.jsonl",
                                 "--model kimi-k3-like --engine kimi-k3-dspark --policy old"},
                      GoldenCase{"chat_kimi_dspark_new", "sample_chat.jsonl",
                                 "--model kimi-k3-like --engine kimi-k3-dspark --policy new"},
                      GoldenCase{
                          "shared_doc_llama_eagle", "sample_shared_doc.jsonl",
                          "--model llama-3.1-8b-layout --engine llama-3.1-8b-eagle --policy new"},
                      GoldenCase{"tokens_gpt_oss", "sample_tokens.jsonl",
                                 "--model gpt-oss-20b-layout --engine gpt-oss-20b --policy new "
                                 "--num-gpu-blocks 700 --max-model-len 4800"},
                      // MTP (the EAGLE-style drop, docs/semantics.md §9.4) on a mamba hybrid.
                      GoldenCase{"chat_kimi_mtp_tp4", "sample_chat.jsonl",
                                 "--model kimi-k3-like --engine h200-mtp --policy new "
                                 "--tensor-parallel-size 4"},
                      // A pool small enough to preempt: nonzero preempted_* figures (§12).
                      GoldenCase{"chat_llama_preempting", "sample_chat.jsonl",
                                 "--model llama-3.1-8b-layout --engine llama-3.1-8b --policy new "
                                 "--num-gpu-blocks 400"}),
    ::prefixsim::testing::SampleReplayCaseName);

}  // namespace
}  // namespace prefixsim
