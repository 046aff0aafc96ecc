// PrefixRunEnd (sim/util/prefix_run.h): the end of a prefix-closed run, found in O(log n) probes.
#include "sim/util/prefix_run.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace prefixsim {
namespace {

TEST(PrefixRunTest, FindsTheEndOfEveryRunInLogarithmicProbes) {
  for (int64_t from = 0; from < 4; ++from) {
    for (int64_t limit = from; limit < 300; ++limit) {
      for (int64_t end = from; end <= limit; ++end) {
        int64_t probes = 0;
        const int64_t got = PrefixRunEnd(from, limit, [&](int64_t j) {
          EXPECT_GE(j, from);
          EXPECT_LT(j, limit);
          ++probes;
          return j < end;
        });
        ASSERT_EQ(got, end) << "from " << from << " limit " << limit;
        // Galloping then bisection: about 2 log2(n) + 2 probes, never one per member.
        int64_t log2 = 0;
        while ((int64_t{1} << log2) < limit - from + 1) ++log2;
        EXPECT_LE(probes, 2 * log2 + 2) << "from " << from << " limit " << limit << " end " << end;
      }
    }
  }
}

}  // namespace
}  // namespace prefixsim
