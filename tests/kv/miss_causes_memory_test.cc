// --miss-causes-memory-mb (ReplayOptions::miss_record_bytes, docs/design.md §7): what miss
// attribution remembers of prefixes computed and since lost is bounded. Past the bound the
// oldest are forgotten, which may only move tokens out of `evicted` (into `compulsory`, and in a
// fleet into `elsewhere` when another replica holds them): every hit and every other figure
// stays, and the report says the causes are approximate.
#include <gtest/gtest.h>

#include <string>

#include "nlohmann/json.hpp"
#include "prefixsim/replay.h"
#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using Json = nlohmann::json;
using ::prefixsim::testing::ReadFile;
using ::prefixsim::testing::RunCli;
using ::prefixsim::testing::TempOutputPath;

// 1,500 generated chat requests on one Llama-3.1-8B replica compute about 5 M tokens, some
// 300,000 U-blocks of 16 tokens: a 1 MiB record (about 32,000 blocks) must forget.
class MissCausesMemoryTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    trace_ = new std::string(TempOutputPath("miss_record_chat.jsonl"));
    const auto r = RunCli("gen-trace --kind chat --seed 1 --requests 1500 --out " + *trace_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete trace_; }
  static Json Replay(const std::string& name, const std::string& args, std::string* output) {
    const std::string json = TempOutputPath("miss_record_" + name);
    const auto r = RunCli("replay --trace " + *trace_ +
                          " --model llama-3.1-8b --engine llama-3.1-8b --no-progress "
                          "--no-wall-time " +
                          args + " --json " + json);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    *output = r.output;
    return Json::parse(ReadFile(json));
  }
  static std::string* trace_;
};
std::string* MissCausesMemoryTest::trace_ = nullptr;

// Replays with no bound and with 1 MiB; returns the first admissions' tokens by cause of both,
// after checking that nothing else differs.
void CompareBounds(const std::string& args, Json* exact_causes, Json* bounded_causes) {
  std::string exact_out, bounded_out;
  Json exact =
      MissCausesMemoryTest::Replay("exact.json", args + " --miss-causes-memory-mb 0", &exact_out);
  Json bounded = MissCausesMemoryTest::Replay("bounded.json", args + " --miss-causes-memory-mb 1",
                                              &bounded_out);
  EXPECT_EQ(exact["miss_causes"]["forgotten_computed_blocks"], 0);
  EXPECT_GT(bounded["miss_causes"]["forgotten_computed_blocks"].get<int64_t>(), 0);
  EXPECT_EQ(exact_out.find("APPROXIMATE"), std::string::npos) << exact_out;
  EXPECT_NE(bounded_out.find("APPROXIMATE"), std::string::npos) << bounded_out;
  EXPECT_NE(bounded_out.find("--miss-causes-memory-mb"), std::string::npos);
  *exact_causes = exact["miss_causes"]["first_admissions"]["tokens_by_cause"];
  *bounded_causes = bounded["miss_causes"]["first_admissions"]["tokens_by_cause"];
  for (const char* cause : {"hit", "alignment", "not_checkpointed", "in_flight", "tail"}) {
    EXPECT_EQ((*exact_causes)[cause], (*bounded_causes)[cause]) << cause;
  }
  // Apart from the miss causes, the two reports are the same.
  exact.erase("miss_causes");
  bounded.erase("miss_causes");
  EXPECT_EQ(exact.dump(), bounded.dump());
}

int64_t Gain(const Json& exact, const Json& bounded, const char* cause) {
  return bounded[cause].get<int64_t>() - exact[cause].get<int64_t>();
}

TEST_F(MissCausesMemoryTest, OneReplicaForgetsOnlyWhatTellsEvictedFromCompulsory) {
  Json e, b;
  CompareBounds("", &e, &b);
  EXPECT_LT(Gain(e, b, "evicted"), 0);
  EXPECT_EQ(Gain(e, b, "compulsory"), -Gain(e, b, "evicted"));
  EXPECT_EQ(Gain(e, b, "elsewhere"), 0);
}

// In a fleet a prefix the chosen replica forgot may still be held by another: `elsewhere`.
TEST_F(MissCausesMemoryTest, AFleetMovesForgottenTokensOutOfEvictedOnly) {
  Json e, b;
  CompareBounds("--replicas 4 --router round_robin", &e, &b);
  EXPECT_LT(Gain(e, b, "evicted"), 0);
  EXPECT_GE(Gain(e, b, "elsewhere"), 0);
  EXPECT_GE(Gain(e, b, "compulsory"), 0);
  EXPECT_EQ(Gain(e, b, "elsewhere") + Gain(e, b, "compulsory"), -Gain(e, b, "evicted"));
}

TEST_F(MissCausesMemoryTest, ANegativeBoundIsRefused) {
  const auto r = RunCli("replay --trace " + *trace_ +
                        " --model llama-3.1-8b --engine llama-3.1-8b --miss-causes-memory-mb -1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--miss-causes-memory-mb"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace prefixsim
