// The same inputs and seed give byte-identical reports (--no-wall-time), whatever the threads
// do: compare runs one thread per policy, replay parses the trace on a second thread, and the
// sweep's --jobs is covered in tests/grid/grid_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ReadFile;

std::string Twice(const std::string& args, const std::string& name) {
  std::string first;
  for (int run = 0; run < 2; ++run) {
    const std::string json = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_det_" +
                             name + std::to_string(run) + ".json";
    const auto r = testing::RunCli(args + " --no-wall-time --no-progress --json " + json);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::string text = ReadFile(json);
    EXPECT_GT(text.size(), 1000u);
    if (run == 0) {
      first = text;
    } else {
      EXPECT_TRUE(text == first) << name << ": two runs differ";
    }
  }
  return first;
}

const std::string kTraces = std::string(PREFIXSIM_SOURCE_DIR) + "/traces/";

TEST(DeterminismTest, CompareTwiceIsByteIdentical) {
  Twice("compare --trace " + kTraces +
            "sample_agentic.jsonl --model kimi-k3-like --engine kimi-k3-dspark "
            "--policies old,new,new_divisor_of --seed 3",
        "compare");
}

TEST(DeterminismTest, FleetReplayTwiceIsByteIdentical) {
  Twice("replay --trace " + kTraces +
            "sample_chat.jsonl --model kimi-k3-like --engine kimi-k3-dspark --policy new "
            "--replicas 4 --router kv_aware --seed 9",
        "fleet");
}

}  // namespace
}  // namespace prefixsim
