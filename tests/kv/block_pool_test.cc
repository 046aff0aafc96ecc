// BlockPool (docs/semantics.md §8.2, §10.4).
#include "sim/kv/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <random>
#include <vector>

#include "sim/kv/prefix_index.h"

namespace prefixsim {
namespace kv {
namespace {

HashPair H(uint64_t h, uint64_t c = 0) { return HashPair{h, c ^ 0x5555}; }

// docs/semantics.md §8.2: block 0 is the null block; the queue starts in id order.
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

// docs/semantics.md §8.2: unhashed blocks go to the front (LIFO), hashed blocks to the back; a
// request frees tail first, so its deeper blocks are evicted before their parents.
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

// docs/semantics.md §8.2: a hit touches the block: it leaves the free queue; freed again it goes to
// the back (most recently used).
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

// docs/semantics.md §8.2: no de-duplication: the same content may be cached in several blocks; the
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

// The pool against a plain model (docs/semantics.md §8.2: a free queue with unhashed blocks at the
// front, cached ones at the back, hits taking blocks out of the middle; a key maps to its earliest
// cached block), long enough that the ring squeezes its holes and the index rebuilds away its
// tombstones many times. Half the keys come from a small space (duplicates, hits, re-caching
// of evicted keys), half from a large one (tombstones pile up).
TEST(BlockPoolTest, MatchesAModelThroughManySqueezesAndRebuilds) {
  constexpr int kBlocks = 40;
  BlockPool pool(kBlocks);
  std::deque<BlockId> queue;  // the model's free queue, head first
  for (BlockId b = 1; b < kBlocks; ++b) queue.push_back(b);
  std::map<BlockId, int> ref;                          // in-use blocks and their counts
  std::map<BlockId, std::pair<int, uint64_t>> cached;  // block -> (group, hash)
  std::map<std::pair<int, uint64_t>, std::vector<BlockId>> by_key;  // in caching order
  auto drop_key = [&](BlockId b) {
    auto it = cached.find(b);
    if (it == cached.end()) return;
    auto& v = by_key[it->second];
    v.erase(std::find(v.begin(), v.end(), b));
    cached.erase(it);
  };
  std::mt19937_64 rng(11);
  int64_t evictions = 0;
  for (int op = 0; op < 200000; ++op) {
    const int kind = static_cast<int>(rng() % 4);
    if (kind == 0 && !queue.empty()) {  // allocate
      const BlockId want = queue.front();
      queue.pop_front();
      if (cached.count(want)) ++evictions;
      drop_key(want);
      ASSERT_EQ(pool.Allocate(), want) << "op " << op;
      ref[want] = 1;
    } else if (kind == 1 && !ref.empty()) {  // free one reference
      auto it = ref.begin();
      std::advance(it, static_cast<long>(rng() % ref.size()));
      const BlockId b = it->first;
      pool.Free(b);
      if (--it->second == 0) {
        ref.erase(it);
        if (cached.count(b)) {
          queue.push_back(b);
        } else {
          queue.push_front(b);
        }
      }
    } else if (kind == 2 && !ref.empty()) {  // publish an in-use block
      auto it = ref.begin();
      std::advance(it, static_cast<long>(rng() % ref.size()));
      const BlockId b = it->first;
      if (cached.count(b)) continue;
      const int group = static_cast<int>(rng() % 2);
      const uint64_t h = rng() % 2 ? rng() % 24 : rng() % 5000;
      ASSERT_TRUE(pool.Cache(b, group, H(h)));
      cached[b] = {group, h};
      by_key[{group, h}].push_back(b);
    } else if (kind == 3) {  // a hit: look a key up and touch its block
      const int group = static_cast<int>(rng() % 2);
      const uint64_t h = rng() % 2 ? rng() % 24 : rng() % 5000;
      const auto& v = by_key[{group, h}];
      const BlockId want = v.empty() ? kNoBlock : v.front();
      ASSERT_EQ(pool.Lookup(group, H(h)), want) << "op " << op;
      if (want == kNoBlock) continue;
      if (ref[want]++ == 0) queue.erase(std::find(queue.begin(), queue.end(), want));
      pool.Touch(want);
    }
    if (op % 1000 == 0) {
      ASSERT_EQ(pool.FreeQueue(), std::vector<BlockId>(queue.begin(), queue.end())) << op;
      pool.CheckInvariants();
    }
  }
  EXPECT_EQ(pool.evictions(), evictions);
  // An eviction leaves a tombstone (which a later insert may reuse); the 256-slot index rebuilds
  // when entries and tombstones reach half of it: over 400 evictions can fill that half 3 times.
  EXPECT_GT(evictions, 10 * kBlocks);
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
      const int32_t block = 1 + static_cast<int32_t>(rng() % 1000);  // entries are positive
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

// Tombstone deletion at stable positions: positions never move except in Rebuild, which reports
// each move (an entry it does not report keeps its slot); found keys and positions match a map
// throughout.
TEST(PrefixIndexTest, TombstonesKeepPositionsUntilRebuild) {
  PrefixIndex index(16, /*headroom=*/4);                 // 64 slots
  std::map<uint64_t, std::pair<int32_t, uint64_t>> ref;  // key -> (block, position)
  std::mt19937_64 rng(7);
  int rebuilds = 0, rebuild_moves = 0;
  int32_t next_block = 1;  // entries are positive
  for (int op = 0; op < 50000; ++op) {
    // Home slots spread out (tombstones pile up), or crowded into two (long probe runs through
    // tombstones, which inserts reuse).
    const uint64_t key = op % 4 == 0 ? (rng() % 5000) * 64 + (rng() % 2 ? 63 : 1) : rng() % 20000;
    const PrefixIndex::Slot* found = index.Find(key);
    auto it = ref.find(key);
    ASSERT_EQ(found != nullptr, it != ref.end());
    if (it != ref.end()) {
      ASSERT_EQ(index.position(found), it->second.second);
      ASSERT_EQ(found->block, it->second.first);
    }
    if (!ref.empty() && (ref.size() == 16 || rng() % 2)) {  // erase a random entry
      auto victim = ref.begin();
      std::advance(victim, static_cast<long>(rng() % ref.size()));
      ASSERT_EQ(index.at(victim->second.second).block, victim->second.first);
      index.EraseAt(victim->second.second);
      ASSERT_EQ(index.Find(victim->first), nullptr);
      ref.erase(victim);
    } else if (it == ref.end()) {  // insert
      if (index.NeedsRebuild()) {
        std::map<int32_t, uint64_t> moved;
        index.Rebuild([&](int32_t block, uint64_t position) { moved[block] = position; });
        ASSERT_EQ(index.tombstones(), 0u);
        size_t entries = 0;
        for (uint64_t p = 0; p < index.capacity(); ++p) {
          ASSERT_NE(index.at(p).block, PrefixIndex::kTombstone) << "slot " << p;
          entries += index.at(p).block > 0;
        }
        ASSERT_EQ(entries, ref.size());
        ASSERT_LE(moved.size(), ref.size());
        for (auto& [k, v] : ref) {
          if (auto m = moved.find(v.first); m != moved.end()) v.second = m->second;
          ASSERT_EQ(index.at(v.second).block, v.first);
          ASSERT_EQ(index.Find(k), &index.at(v.second));
        }
        rebuild_moves += static_cast<int>(moved.size());
        ++rebuilds;
      }
      PrefixIndex::Slot* slot = index.FindOrEmpty(key);
      ASSERT_LE(slot->block, 0);  // empty or a tombstone
      const int32_t block = next_block++;
      index.InsertAt(slot, key, block, 0);
      ref[key] = {block, index.position(slot)};
    }
    ASSERT_EQ(index.size(), ref.size());
    ASSERT_LE((index.size() + index.tombstones()) * 2, index.capacity());
  }
  EXPECT_GT(rebuilds, 10);
  EXPECT_GT(rebuild_moves, 0);  // the crowded homes make entries move back
}

}  // namespace
}  // namespace kv
}  // namespace prefixsim
