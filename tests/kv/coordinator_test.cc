// Per-manager hit finding and the hybrid fixed point on hand-built cache states
// (docs/semantics.md §9.2, §9.3, §9.4).
#include "sim/kv/coordinator.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <vector>

#include "sim/kv/block_hasher.h"
#include "sim/kv/block_pool.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace kv {
namespace {

using testing_kv::Group;
using testing_kv::Iota;
using testing_kv::Literal;
using testing_kv::Plan;

class CoordinatorTest : public ::testing::Test {
 protected:
  void Init(const KvPlan& plan, int num_tokens) {
    plan_ = plan;
    pool_ = std::make_unique<BlockPool>(plan.num_blocks);
    coord_ = std::make_unique<KvCacheCoordinator>(plan_, pool_.get(), 0);
    request_ = Literal(1, Iota(num_tokens));
    HashCursor cur;
    hashes_.clear();
    ExtendBlockHashes(request_, coord_->hash_block_size(), num_tokens / coord_->hash_block_size(),
                      &cur, &hashes_);
    out_.assign(plan.groups.size(), {});
  }
  // Publishes block j of group g (as a cached, free block) and returns its id.
  BlockId CacheBlock(int g, int64_t j) {
    const BlockId b = pool_->Allocate();
    EXPECT_TRUE(pool_->Cache(b, g, coord_->manager(g).BlockHash(hashes_.data(), j)));
    pool_->Free(b);
    ids_[{g, j}] = b;
    return b;
  }
  // Publishes a block of group g under the fine hash f (a partial entry or a mamba state at the
  // H boundary (f + 1) * H, partial hits only) and returns its id.
  BlockId CacheFine(int g, int64_t f) {
    const BlockId b = pool_->Allocate();
    EXPECT_TRUE(pool_->Cache(b, g, hashes_[f]));
    pool_->Free(b);
    return b;
  }
  int64_t Find(int64_t max_hit, int64_t alignment = 0) {
    return coord_->FindLongestCacheHit(
        pool_->hit_index(), hashes_.data(), static_cast<int64_t>(hashes_.size()), max_hit,
        alignment ? alignment : coord_->hit_alignment(), out_.data());
  }
  BlockId Id(int g, int64_t j) { return ids_.at({g, j}); }

  KvPlan plan_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<KvCacheCoordinator> coord_;
  Request request_;
  std::vector<HashPair> hashes_;
  std::vector<std::vector<BlockId>> out_;
  std::map<std::pair<int, int64_t>, BlockId> ids_;
};

// docs/semantics.md §9.2 sliding window: right to left; a run must end on an A-boundary; need =
// cdiv(W - 1, B) contiguous blocks. docs/semantics.md §9.3: "simple hybrid" (full + one other) is
// one pass. Full B = 8 (blocks 0..3 cached), SWA B = 4, W = 9 → need 2, cached 4, 5, 6; S = A = 8,
// H = 4.
TEST_F(CoordinatorTest, SlidingWindowRunMustEndOnAlignment) {
  Init(Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kSlidingWindow, 4, 9)}, 32, 8, 4,
            8),
       40);
  for (int j = 0; j < 4; ++j) CacheBlock(0, j);
  for (int j : {4, 5, 6}) CacheBlock(1, j);
  // Full: 32. SWA below 32: block 7 missing, block 6 ends at 28 (not aligned: skipped),
  // blocks 4, 5 end at 24 → 24.
  EXPECT_EQ(Find(39), 24);
  EXPECT_EQ(out_[0], (std::vector<BlockId>{Id(0, 0), Id(0, 1), Id(0, 2)}));
  EXPECT_EQ(out_[1], (std::vector<BlockId>{0, 0, 0, 0, Id(1, 4), Id(1, 5)}));
  // At granularity H = 4 the same blocks give 28 (blocks 5, 6).
  EXPECT_EQ(Find(39, 4), 28);
}

// docs/semantics.md §9.3: the fixed point iterates with more than two spec-groups, and S != H.
// Full B = 8 (0..3), SWA1 B = 4 W = 9 (need 2; cached 2, 3, 4, 5, 6), SWA2 B = 4 W = 5 (need 1;
// cached 3 and 6... block 6 is not aligned, block 3 is). Pass 1: 32 → 24 → 16. Pass 2: 16 holds
// for every group.
TEST_F(CoordinatorTest, FixedPointWithThreeSpecGroups) {
  Init(Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kSlidingWindow, 4, 9),
             Group(LayerKind::kSlidingWindow, 4, 5)},
            64, 8, 4, 8),
       40);
  for (int j = 0; j < 4; ++j) CacheBlock(0, j);
  for (int j : {2, 3, 4, 5, 6}) CacheBlock(1, j);
  for (int j : {3, 6}) CacheBlock(2, j);
  EXPECT_EQ(Find(39), 16);
  EXPECT_EQ(out_[0].size(), 2u);
  EXPECT_EQ(out_[1], (std::vector<BlockId>{0, 0, Id(1, 2), Id(1, 3)}));
  EXPECT_EQ(out_[2], (std::vector<BlockId>{0, 0, 0, Id(2, 3)}));
  // With SWA2's block 5 also cached, 24 works everywhere.
  CacheBlock(2, 5);
  EXPECT_EQ(Find(39), 24);
  // Granularity H: 28 (SWA1 blocks 5, 6; SWA2 block 6).
  EXPECT_EQ(Find(39, 4), 28);
}

// Groups with the same spec are looked up as one batch: a block is a hit only if every group of
// the batch has it (docs/semantics.md §9.3 SpecGroup).
TEST_F(CoordinatorTest, IdenticalGroupsAreBatched) {
  Init(
      Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kFullAttention, 4)}, 32, 4, 4, 4),
      17);
  for (int j = 0; j < 4; ++j) CacheBlock(0, j);
  for (int j = 0; j < 2; ++j) CacheBlock(1, j);
  EXPECT_EQ(Find(16), 8);
  EXPECT_EQ(out_[0].size(), 2u);
  EXPECT_EQ(out_[1].size(), 2u);
}

// docs/semantics.md §9.4 hybrid EAGLE drop: the eagle group searches one block past the candidate
// and drops it, so the candidate survives only if one more block is cached. Full B = 8 (eagle), SWA
// B = 8, W = 9 (need 1); S = A = 8.
TEST_F(CoordinatorTest, HybridEagleDrop) {
  Init(Plan({Group(LayerKind::kFullAttention, 8, 0, /*eagle=*/true),
             Group(LayerKind::kSlidingWindow, 8, 9)},
            32, 8, 8, 8),
       40);
  for (int j = 0; j < 3; ++j) CacheBlock(0, j);  // 24 tokens
  for (int j = 0; j < 4; ++j) CacheBlock(1, j);
  EXPECT_EQ(Find(39), 16);  // 24 cached, one unit dropped
  CacheBlock(0, 3);         // now 32 cached: 24 survives
  EXPECT_EQ(Find(39), 24);
}

// docs/semantics.md §9.2 sliding window: "if drop_eagle: drop one block, then re-align to A". Both
// groups eagle (no drafter MLA group: every group is flagged, §9.4). Full B = 8 (blocks 0..3),
// SWA B = 4 with W = 33 (need cdiv(32, 4) + 1 = 9), SWA blocks 0..4 (20 tokens); S = A = 8, H = 4.
// Full: 32, minus one unit (8) = 24. SWA, searching to 24 + 4 = 28 (§9.3): no run of 9, so only
// the run from block 0 counts: 5 blocks, aligned to 4 (16 tokens); the drop leaves 3 (12), which
// re-aligns to 2 blocks: 8.
TEST_F(CoordinatorTest, SlidingWindowEagleDropRealigns) {
  Init(Plan({Group(LayerKind::kFullAttention, 8, 0, /*eagle=*/true),
             Group(LayerKind::kSlidingWindow, 4, 33, /*eagle=*/true)},
            32, 8, 4, 8),
       40);
  for (int j = 0; j < 4; ++j) CacheBlock(0, j);
  for (int j = 0; j < 5; ++j) CacheBlock(1, j);
  EXPECT_EQ(Find(39), 8);
  EXPECT_EQ(out_[0], (std::vector<BlockId>{Id(0, 0)}));
  EXPECT_EQ(out_[1], (std::vector<BlockId>{Id(1, 0), Id(1, 1)}));
}

// docs/semantics.md §9.3 / §9.4 with partial hits: the eagle group searches one unit (H) past the
// candidate, not one of its blocks. An MLA target (group 0), an MLA drafter, the eagle group
// (group 1; §9.4: drafter MLA groups are the eagle groups), and a mamba group, all B = 8; S = 8,
// H = A = 2 (fine-grained hits). 48 tokens, max_hit 47.
//   target: blocks 0..3 (32 tokens), nothing after;
//   drafter: blocks 0..3 and a partial entry at 36 (fine hash 17), none at 34;
//   mamba: states at 30 and 32.
// Pass 1: the target gives 32. The drafter searches to 32 + 2 = 34: blocks 0..3 and no entry at
// 34, so 32, minus the dropped unit: 30. Mamba has a state at 30. Pass 2 confirms 30. (Searching a
// whole block past, to 40, would reach the entry at 36 and accept 34, then mamba's 32.)
TEST_F(CoordinatorTest, PartialHitsEagleGroupSearchesOneUnitPast) {
  KvPlan plan = Plan({Group(LayerKind::kMla, 8), Group(LayerKind::kMla, 8, 0, /*eagle=*/true),
                      Group(LayerKind::kMamba, 8)},
                     64, 8, 2, 2);
  plan.partial_hits = true;
  Init(plan, 48);
  for (int j = 0; j < 4; ++j) {
    CacheBlock(0, j);
    CacheBlock(1, j);
  }
  CacheFine(1, 17);  // drafter's tail at 36
  CacheFine(2, 14);  // state at 30
  CacheFine(2, 15);  // state at 32
  EXPECT_EQ(Find(47), 30);
  EXPECT_EQ(out_[0].size(), 4u);  // cdiv(30, 8)
  EXPECT_EQ(out_[1].size(), 4u);
  EXPECT_EQ(out_[2].size(), 4u);
  // With the drafter's entry one unit past the candidate (34), 32 survives the drop.
  CacheFine(1, 16);
  EXPECT_EQ(Find(47), 32);
}

// docs/semantics.md §9.2 mamba: the last cached state whose end is A-aligned; S = 16, A = 16, B =
// 8: a state at 8 is not usable, at 16 it is.
TEST_F(CoordinatorTest, MambaLastAlignedState) {
  Init(Plan({Group(LayerKind::kFullAttention, 16), Group(LayerKind::kMamba, 8)}, 32, 16, 8, 16),
       40);
  for (int j = 0; j < 2; ++j) CacheBlock(0, j);  // 32
  CacheBlock(1, 2);                              // state at 24: not aligned
  EXPECT_EQ(Find(39), 0);
  CacheBlock(1, 1);  // state at 16
  EXPECT_EQ(Find(39), 16);
  EXPECT_EQ(out_[1], (std::vector<BlockId>{0, Id(1, 1)}));
  EXPECT_EQ(out_[0].size(), 1u);
}

// The managers' run methods (single_type_manager.h) against one call per group: two pools, one
// coordinator handling runs of identical groups and one handling every group alone, the same
// random requests (allocation in chunks, publishes at step ends, out-of-window and old-state
// frees, whole-request frees under pressure). Block tables, the free queue order and the
// cached entries must stay equal after every operation.
TEST(CoordinatorRunsTest, RunsOfIdenticalGroupsMatchOneCallPerGroup) {
  const KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kFullAttention, 8),
            Group(LayerKind::kMamba, 8), Group(LayerKind::kMamba, 8), Group(LayerKind::kMamba, 8),
            Group(LayerKind::kSlidingWindow, 8, 12), Group(LayerKind::kSlidingWindow, 8, 12),
            Group(LayerKind::kFullAttention, 8)},
           /*num_blocks=*/160, /*s=*/8, /*h=*/8, /*a=*/8);
  struct Side {
    std::unique_ptr<BlockPool> pool;
    std::unique_ptr<KvCacheCoordinator> coord;
    std::vector<std::vector<GroupBlocks>> tables;  // per live request
  };
  Side sides[2];
  for (int i = 0; i < 2; ++i) {
    sides[i].pool = std::make_unique<BlockPool>(plan.num_blocks);
    sides[i].coord = std::make_unique<KvCacheCoordinator>(plan, sides[i].pool.get(), 0,
                                                          /*group_runs=*/i == 0);
  }
  const int num_groups = static_cast<int>(plan.groups.size());
  std::mt19937_64 rng(3);
  struct Live {
    std::vector<HashPair> hashes;
    int64_t total = 0, length = 0;
  };
  std::vector<Live> live;
  auto expect_same = [&](const char* what) {
    ASSERT_EQ(sides[0].pool->FreeQueue(), sides[1].pool->FreeQueue()) << what;
    ASSERT_EQ(sides[0].pool->num_cached_entries(), sides[1].pool->num_cached_entries()) << what;
    ASSERT_EQ(sides[0].pool->num_ever_allocated(), sides[1].pool->num_ever_allocated()) << what;
    for (BlockId b = 1; b < sides[0].pool->num_ever_allocated(); ++b) {
      const BlockPool& p0 = *sides[0].pool;
      const BlockPool& p1 = *sides[1].pool;
      ASSERT_EQ(p0.ref(b), p1.ref(b)) << what << " block " << b;
      ASSERT_EQ(p0.cached_group(b), p1.cached_group(b)) << what << " block " << b;
      if (p0.is_cached(b)) {
        ASSERT_TRUE(p0.cached_hash(b) == p1.cached_hash(b)) << what << " block " << b;
      }
    }
    for (size_t r = 0; r < live.size(); ++r) {
      for (int g = 0; g < num_groups; ++g) {
        ASSERT_EQ(sides[0].tables[r][g].blocks, sides[1].tables[r][g].blocks) << what << " " << g;
        ASSERT_EQ(sides[0].tables[r][g].num_cached, sides[1].tables[r][g].num_cached) << what;
      }
    }
  };
  auto free_request = [&](size_t r) {
    for (Side& side : sides) {
      side.coord->FreeAll(side.tables[r].data());
      side.tables.erase(side.tables.begin() + static_cast<long>(r));
    }
    live.erase(live.begin() + static_cast<long>(r));
  };
  int64_t published = 0;
  for (int op = 0; op < 3000; ++op) {
    if (live.empty() || (live.size() < 6 && rng() % 3 == 0)) {
      // A new request; a third of them share a prefix family, so publishes meet cached keys.
      const int family = static_cast<int>(rng() % 4);
      const int length = 8 + static_cast<int>(rng() % 80);
      Request req =
          Literal(static_cast<uint64_t>(op),
                  testing_kv::Concat(Iota(8 * static_cast<int>(rng() % 6), 1000 * (family + 1)),
                                     Iota(length, 100000 + 100 * op)));
      Live l;
      l.length = req.prompt_tokens;
      HashCursor cur;
      ExtendBlockHashes(req, 8, l.length / 8, &cur, &l.hashes);
      live.push_back(std::move(l));
      for (Side& side : sides) side.tables.emplace_back(num_groups);
    }
    const size_t r = rng() % live.size();
    Live& l = live[r];
    if (l.total >= l.length || rng() % 10 == 0) {
      free_request(r);
      expect_same("free");
      continue;
    }
    // One step of the request: a chunk, a decode token, or a chunk ending on a block boundary.
    const int64_t step = rng() % 3 == 0 ? 1 : 1 + static_cast<int64_t>(rng() % 20);
    const int64_t main = std::min(l.total + step, l.length);
    const int64_t need = main + static_cast<int64_t>(rng() % 3);  // lookahead
    int64_t k[2];
    for (int i = 0; i < 2; ++i) {
      sides[i].coord->RemoveSkippedBlocks(sides[i].tables[r].data(), l.total);
      k[i] = sides[i].coord->NumBlocksToAllocate(sides[i].tables[r].data(), nullptr, need, main,
                                                 l.total);
    }
    ASSERT_EQ(k[0], k[1]);
    expect_same("skipped");
    if (k[0] > sides[0].pool->num_free()) {
      free_request(r);  // under pressure: this request gives its blocks back
      expect_same("pressure");
      continue;
    }
    for (Side& side : sides) {
      side.coord->AllocateNew(side.tables[r].data(), need, main, l.total);
    }
    expect_same("allocate");
    int64_t cached[2];
    for (int i = 0; i < 2; ++i) {
      cached[i] = sides[i].coord->CacheBlocks(sides[i].tables[r].data(), l.hashes.data(), main,
                                              /*step_end=*/main);
    }
    ASSERT_EQ(cached[0], cached[1]);
    published += cached[0];
    expect_same("cache");
    l.total = main;
  }
  EXPECT_GT(published, 100);
  EXPECT_GT(sides[0].pool->evictions(), 0);
}

}  // namespace
}  // namespace kv
}  // namespace prefixsim
