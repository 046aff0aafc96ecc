// --miss-causes-memory-mb (ReplayOptions::miss_record_bytes, docs/design.md §7): what miss
// attribution remembers of prefixes computed and since lost is bounded. Past the bound the
// oldest are forgotten, which may only move tokens from `evicted` to `compulsory`: every hit and
// every other figure stays, and the report says the causes are approximate.
#include <gtest/gtest.h>

#include <string>

#include "nlohmann/json.hpp"
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
 protected:
  static void SetUpTestSuite() {
    trace_ = new std::string(TempOutputPath("miss_record_chat.jsonl"));
    const auto r = RunCli("gen-trace --kind chat --seed 1 --requests 1500 --out " + *trace_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete trace_; }
  static Json Replay(const std::string& name, const std::string& bound, std::string* output) {
    const std::string json = TempOutputPath(name);
    const auto r = RunCli("replay --trace " + *trace_ +
                          " --model llama-3.1-8b --engine llama-3.1-8b --no-progress "
                          "--no-wall-time --miss-causes-memory-mb " +
                          bound + " --json " + json);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    *output = r.output;
    return Json::parse(ReadFile(json));
  }
  static std::string* trace_;
};
std::string* MissCausesMemoryTest::trace_ = nullptr;

TEST_F(MissCausesMemoryTest, ABoundForgetsOnlyWhatTellsEvictedFromCompulsory) {
  std::string exact_out, bounded_out;
  Json exact = Replay("miss_record_exact.json", "0", &exact_out);
  Json bounded = Replay("miss_record_bounded.json", "1", &bounded_out);
  EXPECT_EQ(exact["miss_causes"]["forgotten_computed_blocks"], 0);
  EXPECT_GT(bounded["miss_causes"]["forgotten_computed_blocks"].get<int64_t>(), 0);
  EXPECT_EQ(exact_out.find("APPROXIMATE"), std::string::npos) << exact_out;
  EXPECT_NE(bounded_out.find("APPROXIMATE"), std::string::npos) << bounded_out;
  EXPECT_NE(bounded_out.find("--miss-causes-memory-mb"), std::string::npos);
  const Json& e = exact["miss_causes"]["first_admissions"]["tokens_by_cause"];
  const Json& b = bounded["miss_causes"]["first_admissions"]["tokens_by_cause"];
  const int64_t moved = e["evicted"].get<int64_t>() - b["evicted"].get<int64_t>();
  EXPECT_GT(moved, 0);
  EXPECT_EQ(b["compulsory"].get<int64_t>() - e["compulsory"].get<int64_t>(), moved);
  for (const char* cause : {"hit", "alignment", "not_checkpointed", "in_flight", "tail"}) {
    EXPECT_EQ(e[cause], b[cause]) << cause;
  }
  // Apart from the miss causes, the two reports are the same.
  exact.erase("miss_causes");
  bounded.erase("miss_causes");
  EXPECT_EQ(exact.dump(), bounded.dump());
}

TEST_F(MissCausesMemoryTest, ANegativeBoundIsRefused) {
  const auto r = RunCli("replay --trace " + *trace_ +
                        " --model llama-3.1-8b --engine llama-3.1-8b --miss-causes-memory-mb -1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--miss-causes-memory-mb"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace prefixsim
