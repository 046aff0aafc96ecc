// The event kernel (docs/design.md §5: int64 ns time, same-time events in insertion order).
#include "sim/fleet/event_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace prefixsim {
namespace {

TEST(EventQueueTest, OrdersByTimeThenInsertion) {
  EventQueue<int> q;
  q.Push(30, 1);
  q.Push(10, 2);
  q.Push(30, 3);
  q.Push(10, 4);
  q.Push(20, 5);
  std::vector<int> order;
  std::vector<int64_t> times;
  while (!q.empty()) {
    auto e = q.Pop();
    order.push_back(e.payload);
    times.push_back(q.now());
  }
  EXPECT_EQ(order, (std::vector<int>{2, 4, 5, 1, 3}));
  EXPECT_EQ(times, (std::vector<int64_t>{10, 10, 20, 30, 30}));
}

TEST(EventQueueTest, EventsPushedDuringProcessingAtTheSameTimeRunAfterEarlierOnes) {
  EventQueue<int> q;
  q.Push(5, 1);
  q.Push(5, 2);
  auto e = q.Pop();
  EXPECT_EQ(e.payload, 1);
  q.Push(5, 3);  // same time as the event already queued: runs after it
  EXPECT_EQ(q.Pop().payload, 2);
  EXPECT_EQ(q.Pop().payload, 3);
  EXPECT_TRUE(q.empty());
}

TEST(EventQueueTest, LargeTimesDoNotOverflow) {
  EventQueue<int> q;
  const int64_t t = int64_t{1} << 62;
  q.Push(t, 1);
  q.Push(t - 1, 2);
  EXPECT_EQ(q.Pop().payload, 2);
  EXPECT_EQ(q.now(), t - 1);
  EXPECT_EQ(q.next_time(), t);
}

TEST(EventQueueDeathTest, SchedulingIntoThePastAborts) {
  EventQueue<int> q;
  q.Push(100, 1);
  q.Pop();
  EXPECT_DEATH(q.Push(99, 2), "invariant violated");
}

}  // namespace
}  // namespace prefixsim
