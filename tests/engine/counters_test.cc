// ReplayResult's counters: listed once (ForEachMergedCounter) and combined over a fleet's
// replicas by that list (MergeCounters), as sim/fleet/fleet.cc does.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <type_traits>

#include "prefixsim/engine.h"

namespace prefixsim {
namespace {

// Sets every listed int64_t counter of *r to `value` and returns how many there are.
int SetEveryCount(ReplayResult* r, int64_t value) {
  int n = 0;
  ReplayResult::ForEachMergedCounter([&](std::string_view, auto field, ReplayResult::CounterMerge) {
    if constexpr (std::is_same_v<std::remove_reference_t<decltype(r->*field)>, int64_t>) {
      r->*field = value;
      ++n;
    }
  });
  return n;
}

TEST(ReplayCountersTest, EachCounterIsListedOnce) {
  std::set<std::string> names;
  int count = 0;
  ReplayResult::ForEachMergedCounter([&](std::string_view name, auto, ReplayResult::CounterMerge) {
    names.emplace(name);
    ++count;
  });
  EXPECT_EQ(static_cast<int>(names.size()), count);
  EXPECT_TRUE(names.count("prefix_cache"));
  EXPECT_TRUE(names.count("spec_decode"));
  EXPECT_TRUE(names.count("max_running"));
  // Derived by the fleet from its own view, not merged.
  EXPECT_FALSE(names.count("out_of_order_arrivals"));
  EXPECT_FALSE(names.count("mean_kv_usage"));
}

TEST(ReplayCountersTest, MergeSumsCountsAndTakesTheLargestMaxRunning) {
  ReplayResult a, b;
  const int n = SetEveryCount(&a, 3);
  EXPECT_EQ(SetEveryCount(&b, 4), n);
  a.max_running = 7;
  b.max_running = 5;
  a.prefix_cache = {1, 2, 3, 4, 5, 6};
  b.prefix_cache = {10, 20, 30, 40, 50, 60};
  a.spec_decode.num_drafts = 1;
  a.spec_decode.accepted_per_position = {1, 2};
  b.spec_decode.num_drafts = 2;
  b.spec_decode.draft_tokens = 5;
  b.spec_decode.accepted_per_position = {10, 20, 30};
  a.lost_to_alignment_requests = {{0, 1}, {16, 2}};
  b.lost_to_alignment_requests = {{16, 3}, {32, 4}};
  a.out_of_order_arrivals = 9;
  b.out_of_order_arrivals = 9;

  a.MergeCounters(b);
  EXPECT_EQ(a.requests, 7);
  EXPECT_EQ(a.computed_tokens, 7);
  EXPECT_EQ(a.interrupted_requests, 7);
  EXPECT_EQ(a.max_running, 7);
  EXPECT_EQ(a.prefix_cache.requests, 11);
  EXPECT_EQ(a.prefix_cache.hits, 33);
  EXPECT_EQ(a.prefix_cache.preempted_hits, 66);
  EXPECT_EQ(a.spec_decode.num_drafts, 3);
  EXPECT_EQ(a.spec_decode.draft_tokens, 5);
  EXPECT_EQ(a.spec_decode.accepted_per_position, (std::vector<int64_t>{11, 22, 30}));
  EXPECT_EQ(a.lost_to_alignment_requests, (std::map<int64_t, int64_t>{{0, 1}, {16, 5}, {32, 4}}));
  EXPECT_EQ(a.out_of_order_arrivals, 9);  // not a merged counter
}

}  // namespace
}  // namespace prefixsim
