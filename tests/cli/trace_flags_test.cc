#include "sim/cli/trace_flags.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace prefixsim::cli {
namespace {

TEST(TraceFlagsTest, FlagsFillTraceOptions) {
  CLI::App app;
  TraceOptions options;
  AddTraceOptionFlags(&app, &options);
  std::vector<std::string> args = {"--trace-format",   "bailian", "--trace-block-tokens",  "32",
                                   "--max-requests",   "100",     "--trace-start-s",       "60",
                                   "--trace-end-s",    "120.5",   "--time-scale",          "0.25",
                                   "--session-sample", "0.1",     "--strict-arrival-order"};
  std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
  app.parse(args);
  EXPECT_EQ(options.format, "bailian");
  EXPECT_EQ(options.trace_block_tokens, 32);
  EXPECT_EQ(options.max_requests, 100);
  EXPECT_DOUBLE_EQ(options.start_s, 60);
  EXPECT_DOUBLE_EQ(options.end_s, 120.5);
  EXPECT_DOUBLE_EQ(options.time_scale, 0.25);
  EXPECT_DOUBLE_EQ(options.session_sample_fraction, 0.1);
  EXPECT_TRUE(options.reject_backwards_arrivals);
}

TEST(TraceFlagsTest, DefaultsLeaveOptionsUntouched) {
  CLI::App app;
  TraceOptions options;
  AddTraceOptionFlags(&app, &options);
  std::vector<std::string> args;
  app.parse(args);
  EXPECT_EQ(options.format, "");
  EXPECT_DOUBLE_EQ(options.time_scale, 1.0);
  EXPECT_FALSE(options.reject_backwards_arrivals);
  // The help lists the registered formats.
  EXPECT_NE(app.help().find("mooncake, tokens, llmservingsim, lengths"), std::string::npos);
}

}  // namespace
}  // namespace prefixsim::cli
