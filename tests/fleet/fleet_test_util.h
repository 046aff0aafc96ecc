// Shared by the fleet tests.
#ifndef PREFIXSIM_TESTS_FLEET_FLEET_TEST_UTIL_H_
#define PREFIXSIM_TESTS_FLEET_FLEET_TEST_UTIL_H_

#include <cstdint>

#include "tests/kv/kv_test_util.h"

namespace prefixsim::testing_fleet {

// A hybrid plan whose hit alignment (A = 24) is larger than the primary block (8): full
// attention, a sliding window and a mamba group, so every group's events feed the fleet's
// index and a hit needs all three; the unaligned router counts 8-token blocks, the aligned one
// only what the fixed point serves.
inline KvPlan HybridPlan(int64_t num_blocks) {
  using testing_kv::Group;
  return testing_kv::Plan({Group(LayerKind::kFullAttention, 8),
                           Group(LayerKind::kSlidingWindow, 24, 16), Group(LayerKind::kMamba, 24)},
                          num_blocks, 24, 8, 24);
}

}  // namespace prefixsim::testing_fleet

#endif  // PREFIXSIM_TESTS_FLEET_FLEET_TEST_UTIL_H_
