// BlockPool (reference §8.2, §10.4).
#include "sim/kv/block_pool.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "sim/kv/prefix_index.h"

namespace prefixsim {
namespace kv {
namespace {

HashPair H(uint64_t h, uint64_t c = 0) { return HashPair{h, c ^ 0x5555}; }

// reference §8.2: block 0 is the null block; the queue starts in id order.
TEST(BlockPoolTest, StartsInIdOrderWithoutNullBlock) {
  BlockPool pool(6);
  EXPECT_EQ(pool.num_free(), 5);
  EXPECT_EQ(pool.FreeQueue(), (std::vector<BlockId>{1, 2, 3, 4, 5}));
  EXPECT_EQ(pool.Allocate(), 1);
  EXPECT_EQ(pool.Allocate(), 2);
  pool.Free(kNullBlock);  // ignored
  EXPECT_EQ(pool.num_free(), 3);
  pool.CheckInvariants();
}

// reference §8.2: unhashed blocks go to the front (LIFO), hashed blocks to the back; a request
// frees tail first, so its deeper blocks are evicted before their parents.
TEST(BlockPoolTest, FreeOrderAndEvictionVictims) {
  BlockPool pool(8);
  std::vector<BlockId> req;
  for (int i = 0; i < 4; ++i) req.push_back(pool.Allocate());  // 1 2 3 4
  ASSERT_TRUE(pool.Cache(1, 0, H(10)));
  ASSERT_TRUE(pool.Cache(2, 0, H(11)));
  ASSERT_TRUE(pool.Cache(3, 0, H(12)));  // block 4 is a partial block: no hash
  for (auto it = req.rbegin(); it != req.rend(); ++it) pool.Free(*it);  // tail first
  EXPECT_EQ(pool.FreeQueue(), (std::vector<BlockId>{4, 5, 6, 7, 3, 2, 1}));
  pool.CheckInvariants();
  // Evictions from the head: unhashed first, then the chain tail (3) before its parents.
  std::vector<BlockId> got;
  for (int i = 0; i < 5; ++i) got.push_back(pool.Allocate());
  EXPECT_EQ(got, (std::vector<BlockId>{4, 5, 6, 7, 3}));
  EXPECT_EQ(pool.evictions(), 1);
  EXPECT_EQ(pool.Lookup(0, H(12)), kNoBlock);  // evicted: the hash is gone
  EXPECT_EQ(pool.Lookup(0, H(11)), 2);
  EXPECT_EQ(pool.Lookup(1, H(11)), kNoBlock);  // another group's key space
  pool.CheckInvariants();
}

// reference §8.2: a hit touches the block: it leaves the free queue; freed again it goes to the
// back (most recently used).
TEST(BlockPoolTest, TouchRemovesFromQueueAndRefreshesOnFree) {
  BlockPool pool(5);
  const BlockId a = pool.Allocate(), b = pool.Allocate();
  ASSERT_TRUE(pool.Cache(a, 0, H(1)));
  ASSERT_TRUE(pool.Cache(b, 0, H(2)));
  pool.Free(a);
  pool.Free(b);
  EXPECT_EQ(pool.FreeQueue(), (std::vector<BlockId>{3, 4, a, b}));
  pool.Touch(a);
  EXPECT_EQ(pool.ref(a), 1);
  EXPECT_EQ(pool.FreeQueue(), (std::vector<BlockId>{3, 4, b}));
  pool.Touch(a);  // a second request hits it too
  EXPECT_EQ(pool.ref(a), 2);
  pool.Free(a);
  EXPECT_EQ(pool.num_free(), 3);
  pool.Free(a);
  EXPECT_EQ(pool.FreeQueue(), (std::vector<BlockId>{3, 4, b, a}));
  pool.CheckInvariants();
}

// reference §8.2: no de-duplication: the same content may be cached in several blocks; the
// lookup returns the earliest; evicting it exposes the next.
TEST(BlockPoolTest, DuplicatesAreKept) {
  BlockPool pool(5);
  const BlockId a = pool.Allocate(), b = pool.Allocate();
  ASSERT_TRUE(pool.Cache(a, 0, H(7)));
  ASSERT_TRUE(pool.Cache(b, 0, H(7)));
  EXPECT_EQ(pool.num_cached_entries(), 2);
  EXPECT_EQ(pool.Lookup(0, H(7)), a);
  pool.Free(a);
  pool.Free(b);
  pool.CheckInvariants();
  // Queue: 3 4 a b. Allocating three evicts a.
  pool.Allocate();
  pool.Allocate();
  EXPECT_EQ(pool.Allocate(), a);
  EXPECT_EQ(pool.Lookup(0, H(7)), b);
  pool.CheckInvariants();
}

// Collision policy: a key owned by other content (same 64-bit hash, different check value) is a
// miss, never a wrong hit; publishing over it is refused; both are counted.
TEST(BlockPoolTest, CollisionsAreDetectedNotServed) {
  BlockPool pool(4);
  const BlockId a = pool.Allocate(), b = pool.Allocate();
  ASSERT_TRUE(pool.Cache(a, 0, HashPair{99, 1}));
  EXPECT_EQ(pool.Lookup(0, HashPair{99, 2}), kNoBlock);
  EXPECT_EQ(pool.collisions(), 1);
  EXPECT_FALSE(pool.Cache(b, 0, HashPair{99, 2}));
  EXPECT_EQ(pool.collisions(), 2);
  EXPECT_FALSE(pool.is_cached(b));
  EXPECT_EQ(pool.Lookup(0, HashPair{99, 1}), a);
  pool.CheckInvariants();
}

// The open-addressing index against std::map, with keys crowded into few home slots so that
// clusters wrap around the table and backward-shift deletion is exercised.
TEST(PrefixIndexTest, MatchesMapUnderRandomInsertErase) {
  PrefixIndex index(16);  // 32 slots
  std::map<uint64_t, int32_t> ref;
  std::mt19937_64 rng(5);
  for (int op = 0; op < 20000; ++op) {
    const uint64_t key = (rng() % 24) * 32 + (rng() % 2 ? 30 : 1);
    PrefixIndex::Slot* slot = index.Find(key);
    auto it = ref.find(key);
    ASSERT_EQ(slot != nullptr, it != ref.end());
    if (slot != nullptr) {
      ASSERT_EQ(slot->block, it->second);
      if (rng() % 2) {
        index.Erase(slot);
        ref.erase(it);
      }
    } else if (ref.size() < 16) {
      const int32_t block = static_cast<int32_t>(rng() % 1000);
      index.Insert(key, block, 0);
      ref[key] = block;
    }
    ASSERT_EQ(index.size(), ref.size());
  }
  for (const auto& [key, block] : ref) {
    ASSERT_NE(index.Find(key), nullptr);
    EXPECT_EQ(index.Find(key)->block, block);
  }
}

}  // namespace
}  // namespace kv
}  // namespace prefixsim
