#include "sim/analyze/cache_sim.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace prefixsim::analyze_internal {
namespace {

constexpr uint32_t kNever = std::numeric_limits<uint32_t>::max();

// One-block requests whose block can hit (cap 1).
BlockSequence SingleBlockRequests(const std::vector<uint32_t>& blocks) {
  BlockSequence seq;
  for (uint32_t b : blocks) seq.AddRequest({b}, 1);
  return seq;
}

TEST(CacheSimTest, CyclicPatternDefeatsLruNotBelady) {
  // a b c a b c a b c with room for two blocks: LRU always evicts the block needed next.
  const BlockSequence seq = SingleBlockRequests({0, 1, 2, 0, 1, 2, 0, 1, 2});
  EXPECT_EQ(SimulateLru(seq, 2), 0);
  // Belady keeps a and b and never inserts c (its next use is the furthest): a, b hit twice.
  EXPECT_EQ(SimulateBelady(seq, ComputeNextUse(seq), 2), 4);
  // With room for all three, everything after the first round hits.
  EXPECT_EQ(SimulateLru(seq, 3), 6);
  EXPECT_EQ(SimulateBelady(seq, ComputeNextUse(seq), 3), 6);
}

TEST(CacheSimTest, NextUseSkipsUsesPastTheCap) {
  BlockSequence seq;
  seq.AddRequest({0, 1}, 2);
  seq.AddRequest({0, 1}, 1);  // block 1 is past the cap here: touched, cannot hit
  seq.AddRequest({0, 1}, 2);
  const std::vector<uint32_t> next = ComputeNextUse(seq);
  ASSERT_EQ(next.size(), 6u);
  EXPECT_EQ(next[0], 1u);
  EXPECT_EQ(next[1], 2u);  // not 1
  EXPECT_EQ(next[2], 2u);
  EXPECT_EQ(next[3], 2u);
  EXPECT_EQ(next[4], kNever);
  EXPECT_EQ(next[5], kNever);
}

TEST(CacheSimTest, LruEvictsDeeperBlocksOfARequestFirst) {
  // Three chained blocks, room for two: the first two must survive, so the repeat hits 2.
  BlockSequence seq;
  seq.AddRequest({0, 1, 2}, 3);
  seq.AddRequest({0, 1, 2}, 3);
  EXPECT_EQ(SimulateLru(seq, 2), 2);
  EXPECT_EQ(SimulateBelady(seq, ComputeNextUse(seq), 2), 2);
  EXPECT_EQ(SimulateLru(seq, 3), 3);
}

TEST(CacheSimTest, HitIsTheLeadingRunCappedByMaxHit) {
  BlockSequence seq;
  seq.AddRequest({0, 1, 2}, 2);
  seq.AddRequest({0, 1, 2}, 2);  // all cached, but the cap allows 2
  seq.AddRequest({0, 3, 2}, 3);  // 3 is new: run stops at 1 although 2 is cached
  EXPECT_EQ(SimulateLru(seq, 10), 3);
  EXPECT_EQ(SimulateBelady(seq, ComputeNextUse(seq), 10), 3);
}

TEST(CacheSimTest, LruRecencyOrderAcrossRequests) {
  // Capacity 2: a, b, a (touch a), c evicts b (least recent), then a hits and b misses.
  const BlockSequence seq = SingleBlockRequests({0, 1, 0, 2, 0, 1});
  EXPECT_EQ(SimulateLru(seq, 2), 2);  // the third and fifth requests
}

// Random chain-structured sequences: blocks come from a small random prefix tree, so the
// prefix property of real traces holds. Checks the stack property (hits grow with capacity)
// and optimal >= LRU.
TEST(CacheSimTest, RandomTreesMonotoneAndOptimalBeatsLru) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    // children[node] lists tree children; node ids dense.
    std::vector<std::vector<uint32_t>> children(1);  // node 0 = virtual root (not a block)
    BlockSequence seq;
    const int requests = 30 + static_cast<int>(rng() % 40);
    for (int r = 0; r < requests; ++r) {
      std::vector<uint32_t> path;
      uint32_t at = 0;
      const int len = 1 + static_cast<int>(rng() % 6);
      for (int d = 0; d < len; ++d) {
        auto& kids = children[at];
        uint32_t next;
        if (!kids.empty() && rng() % 4 != 0) {
          next = kids[rng() % kids.size()];
        } else {
          next = static_cast<uint32_t>(children.size());
          children.emplace_back();
          children[at].push_back(next);
        }
        path.push_back(next - 1);
        at = next;
      }
      seq.AddRequest(path, static_cast<uint32_t>(len - static_cast<int>(rng() % 2)));
    }
    const std::vector<uint32_t> next_use = ComputeNextUse(seq);
    int64_t prev_lru = -1, prev_opt = -1;
    for (int64_t c = 1; c <= static_cast<int64_t>(seq.num_ids) + 1; ++c) {
      const int64_t lru = SimulateLru(seq, c);
      const int64_t opt = SimulateBelady(seq, next_use, c);
      EXPECT_GE(opt, lru) << "trial " << trial << " capacity " << c;
      EXPECT_GE(lru, prev_lru) << "trial " << trial << " capacity " << c;
      EXPECT_GE(opt, prev_opt) << "trial " << trial << " capacity " << c;
      prev_lru = lru;
      prev_opt = opt;
    }
    // Unbounded: both policies are the same (nothing is ever evicted).
    EXPECT_EQ(prev_lru, prev_opt);
  }
}

}  // namespace
}  // namespace prefixsim::analyze_internal
