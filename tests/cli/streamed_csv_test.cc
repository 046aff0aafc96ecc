// `replay --csv` alone streams its rows as requests end (issue 15: memory bounded by the requests
// in flight); with --html the records are kept and written at the end. Both give the same bytes,
// on one engine and on a fleet, and no temporary file stays behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/cli_runner.h"

namespace prefixsim {
namespace {

using ::prefixsim::testing::ReadFile;

TEST(StreamedCsvTest, SameRowsAsTheKeptRecords) {
  const std::string src = PREFIXSIM_SOURCE_DIR;
  const std::string dir = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_streamed";
  std::filesystem::create_directories(dir);
  for (const char* fleet : {"", " --replicas 3 --router kv_aware"}) {
    const std::string base = "replay --trace " + src +
                             "/traces/sample_chat.jsonl --model kimi-k3-like --engine "
                             "kimi-k3-dspark --policy old --no-progress" +
                             fleet;
    auto streamed = ::prefixsim::testing::RunCli(base + " --csv " + dir + "/streamed.csv");
    ASSERT_EQ(streamed.exit_code, 0) << streamed.output;
    auto kept = ::prefixsim::testing::RunCli(base + " --csv " + dir + "/kept.csv --html " + dir +
                                             "/page.html");
    ASSERT_EQ(kept.exit_code, 0) << kept.output;
    const std::string a = ReadFile(dir + "/streamed.csv"), b = ReadFile(dir + "/kept.csv");
    EXPECT_GT(a.size(), 10000u);
    EXPECT_TRUE(a == b) << "streamed and kept CSV differ" << fleet;
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

}  // namespace
}  // namespace prefixsim
