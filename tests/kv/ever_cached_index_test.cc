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

// A block the pool published stays known after the pool evicts it: the record is what every
// group ever cached, not what it holds now. Keys are per group.
TEST(EverCachedIndexTest, KeepsWhatThePoolEvicted) {
  BlockPool pool(4);  // 3 usable blocks
  EverCachedIndex record(&pool, 1024);
  pool.set_eviction_observer(&record);
  for (uint64_t i = 0; i < 6; ++i) {
    const BlockId b = pool.Allocate();  // evicts the oldest cached block once all are cached
    ASSERT_TRUE(pool.Cache(b, static_cast<int>(i % 2), H(100 + i)));
    pool.Free(b);
  }
  EXPECT_EQ(pool.evictions(), 3);
  EXPECT_EQ(record.size(), 3) << "only evictions are written";
  EXPECT_EQ(pool.Lookup(0, H(100)), kNoBlock) << "evicted from the pool";
  for (uint64_t i = 0; i < 6; ++i) {
    EXPECT_TRUE(Has(record, static_cast<int>(i % 2), H(100 + i))) << i;
    EXPECT_FALSE(Has(record, static_cast<int>(1 - i % 2), H(100 + i))) << "keyed by group " << i;
  }
  EXPECT_EQ(record.forgotten(), 0);
}

// Generations of 1,024 newly evicted keys: the record keeps the current one and the one before;
// when the current one is full the older is forgotten whole. A key evicted again is known again,
// and what the pool caches is always known.
TEST(EverCachedIndexTest, ForgetsOldGenerationsButNotWhatThePoolCaches) {
  BlockPool pool(8);
  EverCachedIndex record(&pool, 1024);
  pool.set_eviction_observer(&record);
  const BlockId pinned = pool.Allocate();  // held: stays cached throughout
  ASSERT_TRUE(pool.Cache(pinned, 0, H(1)));
  for (uint64_t i = 0; i < 1024; ++i) AddKey(record, 0, H(1000 + i));  // generation A, full
  for (uint64_t i = 0; i < 1024; ++i) AddKey(record, 0, H(5000 + i));  // generation B, full
  EXPECT_TRUE(Has(record, 0, H(1000)));
  EXPECT_TRUE(Has(record, 0, H(5000)));
  EXPECT_EQ(record.forgotten(), 0);
  AddKey(record, 0, H(9000));  // generation C begins: A is forgotten
  EXPECT_EQ(record.forgotten(), 1024);
  EXPECT_FALSE(Has(record, 0, H(1000)));
  EXPECT_TRUE(Has(record, 0, H(5000)));
  EXPECT_TRUE(Has(record, 0, H(9000)));
  AddKey(record, 0, H(1000));  // evicted again
  EXPECT_TRUE(Has(record, 0, H(1000)));
  EXPECT_FALSE(Has(record, 0, H(1001)));
  EXPECT_TRUE(Has(record, 0, H(1))) << "the pool caches it";
  EXPECT_LE(record.size(), 2 * 1024);
}

}  // namespace
}  // namespace kv
}  // namespace prefixsim
