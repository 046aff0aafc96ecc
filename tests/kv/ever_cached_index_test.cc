// EverCachedIndex (sim/kv/ever_cached_index.h): what a pool ever published, kept after eviction,
// bounded by generations.
#include "sim/kv/ever_cached_index.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "sim/kv/block_pool.h"

namespace prefixsim {
namespace kv {
namespace {

HashPair H(uint64_t h) { return HashPair{h, h * 0x9e3779b97f4a7c15ULL}; }

void AddKey(EverCachedIndex& record, int group, const HashPair& h) {
  record.Add(h.hash ^ GroupSalt(group), GroupTag(group, h));
}

bool Has(const EverCachedIndex& record, int group, const HashPair& h) {
  return record.hit_index().Lookup(group, h) != kNoBlock;
}

// A block the pool published stays in the record after the pool evicts it: the record is what
// every group ever cached, not what it holds now.
TEST(EverCachedIndexTest, KeepsWhatThePoolEvicted) {
  BlockPool pool(4);  // 3 usable blocks
  EverCachedIndex record(&pool, 1024);
  pool.set_ever_cached(&record);
  for (uint64_t i = 0; i < 6; ++i) {
    const BlockId b = pool.Allocate();  // evicts the oldest cached block once all are cached
    ASSERT_TRUE(pool.Cache(b, static_cast<int>(i % 2), H(100 + i)));
    pool.Free(b);
  }
  EXPECT_GT(pool.evictions(), 0);
  EXPECT_EQ(pool.Lookup(0, H(100)), kNoBlock) << "evicted from the pool";
  for (uint64_t i = 0; i < 6; ++i) {
    EXPECT_TRUE(Has(record, static_cast<int>(i % 2), H(100 + i))) << i;
    EXPECT_FALSE(Has(record, static_cast<int>(1 - i % 2), H(100 + i))) << "keyed by group " << i;
  }
  EXPECT_EQ(record.forgotten(), 0);
}

// Generations of 1,024 new keys: a key neither published in the current or last generation nor
// still cached by the pool is forgotten when a generation ends; a key published again is kept.
TEST(EverCachedIndexTest, ForgetsOldGenerationsButNotWhatThePoolStillCaches) {
  BlockPool pool(8);
  EverCachedIndex record(&pool, 1024);
  pool.set_ever_cached(&record);
  const BlockId pinned = pool.Allocate();  // held: stays cached throughout
  ASSERT_TRUE(pool.Cache(pinned, 0, H(1)));
  for (uint64_t i = 0; i < 1023; ++i) AddKey(record, 0, H(1000 + i));  // generation 1
  for (uint64_t i = 0; i < 1024; ++i) AddKey(record, 0, H(5000 + i));  // generation 2
  AddKey(record, 0, H(1000));  // published again in generation 3: kept
  for (uint64_t i = 0; i < 1024; ++i) AddKey(record, 0, H(9000 + i));  // ends generation 3
  EXPECT_TRUE(Has(record, 0, H(1))) << "the pool still caches it";
  EXPECT_TRUE(Has(record, 0, H(1000))) << "published again";
  EXPECT_FALSE(Has(record, 0, H(1001))) << "generation 1, gone from the pool";
  EXPECT_TRUE(Has(record, 0, H(5000)));
  EXPECT_TRUE(Has(record, 0, H(9000)));
  EXPECT_EQ(record.forgotten(), 1022);
  EXPECT_LE(record.size(), 3 * 1024 + pool.num_blocks());
}

}  // namespace
}  // namespace kv
}  // namespace prefixsim
