#include "sim/cli/exit_codes.h"

#include <gtest/gtest.h>

#include "sim/util/status_macros.h"

namespace prefixsim {
namespace {

TEST(StatusTest, ExitCodesFollowDesign) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("x")), 2);
  EXPECT_EQ(ExitCodeFor(absl::InternalError("x")), 1);
}

}  // namespace
}  // namespace prefixsim
