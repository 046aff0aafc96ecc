// The record of what a pool-reading shadow's cache computed and lost (sim/kv/computed_record.h):
// membership against a plain set, through growth and buffered inserts, and the two generations of
// a bounded record.
#include "sim/kv/computed_record.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <utility>

namespace prefixsim::kv {
namespace {

HashPair Block(uint64_t i) { return HashPair{i * 0x9e3779b97f4a7c15ULL + 1, i ^ 0xabcdefULL}; }

TEST(ComputedRecordTest, AnUnboundedRecordKnowsEveryBlockAdded) {
  ComputedRecord record;
  std::mt19937_64 rng(3);
  std::set<uint64_t> added;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t b = rng() % 30000;  // repeats: a block evicted twice is kept once
    record.Add(Block(b));
    added.insert(b);
  }
  EXPECT_EQ(record.size(), static_cast<int64_t>(added.size()));
  for (uint64_t b = 0; b < 30000; ++b) {
    EXPECT_EQ(record.Contains(Block(b)), added.count(b) == 1) << b;
  }
  EXPECT_EQ(record.forgotten(), 0);
}

// The same hash with another check is another block (a 64-bit collision): not known.
TEST(ComputedRecordTest, TheCheckIsPartOfTheBlock) {
  ComputedRecord record;
  record.Add(HashPair{42, 7});
  EXPECT_TRUE(record.Contains(HashPair{42, 7}));
  EXPECT_FALSE(record.Contains(HashPair{42, 8}));
  EXPECT_FALSE(record.Contains(HashPair{43, 7}));
}

// Bound 1000: generations of 500. After 2,000 distinct blocks, the last 500 to 1,000 are known,
// the first ones forgotten and counted; a block added again moves to the newest generation, so
// it survives the drop of the one it was in and is not counted as forgotten.
TEST(ComputedRecordTest, ABoundedRecordForgetsWholeOlderGenerations) {
  ComputedRecord record(1000);
  for (uint64_t b = 0; b < 2000; ++b) {
    record.Add(Block(b));
    if (b % 100 == 99) record.Add(Block(0));  // kept fresh
  }
  EXPECT_TRUE(record.Contains(Block(0)));
  EXPECT_TRUE(record.Contains(Block(1999)));
  EXPECT_TRUE(record.Contains(Block(1500)));
  EXPECT_FALSE(record.Contains(Block(1)));
  EXPECT_FALSE(record.Contains(Block(900)));
  EXPECT_GE(record.size(), 500);
  EXPECT_LE(record.size(), 1000);
  // Every block but the ones still known was forgotten exactly once.
  EXPECT_EQ(record.forgotten() + record.size(), 2000);
}

}  // namespace
}  // namespace prefixsim::kv
