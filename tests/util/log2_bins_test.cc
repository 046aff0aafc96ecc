// The prompt-length bins of the block-size cliff (sim/util/log2_bins.h), shared by `analyze` and
// the HTML report.
#include "sim/util/log2_bins.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace prefixsim {
namespace {

TEST(Log2BinsTest, BinEdges) {
  // Bin 0 holds 0; bin k >= 1 holds [2^(k-1), 2^k - 1].
  EXPECT_EQ(Log2Bin(0), 0);
  EXPECT_EQ(Log2Bin(-5), 0);
  EXPECT_EQ(Log2Bin(1), 1);
  EXPECT_EQ(Log2Bin(2), 2);
  EXPECT_EQ(Log2Bin(3), 2);
  EXPECT_EQ(Log2Bin(4), 3);
  EXPECT_EQ(Log2Bin(527), 10);  // vLLM #40696: 0% hits under 528 tokens ...
  EXPECT_EQ(Log2Bin(552), 10);  // ... and ~95% at 552: one bin
  EXPECT_EQ(Log2Bin(4095), 12);
  EXPECT_EQ(Log2Bin(4096), 13);  // vllm-ascend #16270: A = 4096
  EXPECT_EQ(Log2Bin(std::numeric_limits<int64_t>::max()), 63);
  EXPECT_EQ(Log2BinMin(0), 0);
  EXPECT_EQ(Log2BinMax(0), 0);
  EXPECT_EQ(Log2BinMin(1), 1);
  EXPECT_EQ(Log2BinMax(1), 1);
  EXPECT_EQ(Log2BinMin(13), 4096);
  EXPECT_EQ(Log2BinMax(13), 8191);
  EXPECT_EQ(Log2BinMax(63), std::numeric_limits<int64_t>::max());
  // Every count lies inside its bin's edges, and consecutive bins touch.
  for (int64_t v : {1, 2, 3, 7, 8, 1000, 1024, 13824, 1 << 30}) {
    const int k = Log2Bin(v);
    EXPECT_LE(Log2BinMin(k), v) << v;
    EXPECT_GE(Log2BinMax(k), v) << v;
    EXPECT_EQ(Log2BinMax(k) + 1, Log2BinMin(k + 1)) << v;
  }
}

TEST(Log2BinsTest, TokenWeightedWithEmptyBins) {
  Log2TokenBins bins;
  EXPECT_GT(bins.First(), bins.Last());  // nothing added

  bins.Add(5, 0);     // bin 3 [4, 7]
  bins.Add(20, 16);   // bin 5 [16, 31]
  bins.Add(30, 0);    // bin 5
  bins.Add(100, 96);  // bin 7 [64, 127]
  EXPECT_EQ(bins.First(), 3);
  EXPECT_EQ(bins.Last(), 7);
  EXPECT_EQ(bins.requests[5], 2);
  EXPECT_EQ(bins.prompt_tokens[5], 50);
  EXPECT_EQ(bins.hit_tokens[5], 16);
  // Token-weighted: 16 / 50, not the mean of 16/20 and 0/30.
  EXPECT_DOUBLE_EQ(bins.HitFraction(5), 16.0 / 50.0);
  EXPECT_DOUBLE_EQ(bins.HitFraction(7), 0.96);
  // The bins between hold nothing and a fraction of 0.
  for (int k : {4, 6}) {
    EXPECT_EQ(bins.requests[k], 0) << k;
    EXPECT_EQ(bins.HitFraction(k), 0.0) << k;
  }
}

}  // namespace
}  // namespace prefixsim
