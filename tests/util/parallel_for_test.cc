// The process's one thread pool (sim/util/parallel_for.h): every item runs once, at most `jobs`
// at a time, nested calls (compare's policies, each a fleet's replicas) share the workers and
// always make progress, and a short call is not held up behind a long one.
#include "sim/util/parallel_for.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace prefixsim {
namespace {

TEST(ParallelForTest, EveryItemRunsOnce) {
  for (int jobs : {1, 2, 3, 8}) {
    for (size_t n : {0u, 1u, 2u, 7u, 1000u}) {
      std::vector<std::atomic<int>> runs(n);
      ParallelFor(n, jobs, [&](size_t i) { runs[i].fetch_add(1); });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(runs[i].load(), 1) << jobs << " jobs, item " << i;
    }
  }
}

// No more than `jobs` items at once: the bound is what --threads promises.
TEST(ParallelForTest, AtMostJobsItemsRunAtOnce) {
  for (int jobs : {1, 2, 3}) {
    std::atomic<int> running{0}, most{0};
    ParallelFor(24, jobs, [&](size_t) {
      const int now = running.fetch_add(1) + 1;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      running.fetch_sub(1);
    });
    EXPECT_LE(most.load(), jobs);
    EXPECT_GE(most.load(), 1);
  }
}

// Two levels on one pool, as compare's policies run fleets: every inner item runs, and an inner
// call makes progress on its caller's thread even when no worker is free.
TEST(ParallelForTest, NestedCallsShareThePoolAndFinish) {
  constexpr size_t kOuter = 4, kInner = 50;
  std::vector<std::atomic<int>> runs(kOuter * kInner);
  ParallelFor(kOuter, 2, [&](size_t o) {
    for (int phase = 0; phase < 20; ++phase) {
      ParallelFor(kInner, 3, [&](size_t i) {
        if (phase == 0) runs[o * kInner + i].fetch_add(1);
      });
    }
  });
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
}

// A caller runs only its own items: a short call returns while another call's long item still
// runs on a worker.
TEST(ParallelForTest, AShortCallIsNotHeldUpByALongOne) {
  std::atomic<bool> release{false}, long_started{false};
  std::thread long_call([&] {
    ParallelFor(2, 2, [&](size_t i) {
      if (i == 1) {
        long_started = true;
        while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
  });
  while (!long_started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::atomic<int> done{0};
  ParallelFor(10, 4, [&](size_t) { done.fetch_add(1); });
  EXPECT_EQ(done.load(), 10);
  EXPECT_FALSE(release.load());  // the long item is still running
  release = true;
  long_call.join();
}

}  // namespace
}  // namespace prefixsim
