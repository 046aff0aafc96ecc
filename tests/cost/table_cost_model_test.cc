// The table cost model: parsing measured step times and interpolating them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "sim/cost/cost_model.h"

namespace prefixsim {
namespace {

constexpr char kTable[] =
    "num_tokens,context_tokens,time_us\n"
    "# a comment\n"
    "1,0,1000\n"
    "1,1000,2000\n"
    "101,0,3000\n"
    "101,1000,5000\n";

TEST(StepTimeTableTest, BilinearInterpolation) {
  auto t = ParseStepTimeTable(kTable, "t.csv");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->Interpolate(1, 0), 1000);
  EXPECT_DOUBLE_EQ(t->Interpolate(101, 1000), 5000);
  EXPECT_DOUBLE_EQ(t->Interpolate(51, 0), 2000);
  EXPECT_DOUBLE_EQ(t->Interpolate(1, 500), 1500);
  EXPECT_DOUBLE_EQ(t->Interpolate(51, 500), (1500 + 4000) / 2.0);
  // Clamped below, extrapolated above.
  EXPECT_DOUBLE_EQ(t->Interpolate(0, 0), 1000);
  EXPECT_DOUBLE_EQ(t->Interpolate(201, 0), 5000);
}

TEST(StepTimeTableTest, Errors) {
  EXPECT_FALSE(ParseStepTimeTable("a,b,c\n1,2,3\n", "x.csv").ok());
  auto missing = ParseStepTimeTable("num_tokens,context_tokens,time_us\n1,0,5\n2,1,6\n", "x.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("grid point missing"), std::string::npos);
  auto bad = ParseStepTimeTable("num_tokens,context_tokens,time_us\n1,zz,5\n", "x.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("x.csv:2"), std::string::npos);
  EXPECT_FALSE(ParseStepTimeTable("num_tokens,context_tokens,time_us\n", "x.csv").ok());
  EXPECT_FALSE(
      ParseStepTimeTable("num_tokens,context_tokens,time_us\n1,0,5\n1,0,6\n", "x.csv").ok());
}

TEST(TableCostModelTest, ReadsFileAndSumsTheBatch) {
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(getpid()) + "_step_times.csv";
  {
    std::ofstream out(path);
    out << kTable;
  }
  CostModelConfig config;
  config.kind = "table";
  config.table_path = path;
  auto model = NewCostModel(config, CostModelContext{});
  ASSERT_TRUE(model.ok()) << model.status();
  // 51 tokens, 500 context tokens in total → 2750 us.
  std::vector<SeqWork> batch = {{50, 400}, {1, 100}};
  EXPECT_EQ((*model)->StepTimeNs(batch), 2'750'000);
  config.table_path = path + ".missing";
  EXPECT_EQ(NewCostModel(config, CostModelContext{}).status().code(), absl::StatusCode::kNotFound);
  config.kind = "nope";
  EXPECT_EQ(NewCostModel(config, CostModelContext{}).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace prefixsim
