// Per-manager hit finding and the hybrid fixed point on hand-built cache states
// (reference §9.2, §9.3, §9.4).
#include "sim/kv/coordinator.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
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
  int64_t Find(int64_t max_hit, int64_t alignment = 0) {
    return coord_->FindLongestCacheHit(pool_->hit_index(), hashes_.data(), static_cast<int64_t>(hashes_.size()),
                                       max_hit, alignment ? alignment : coord_->hit_alignment(),
                                       out_.data());
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

// reference §9.2 sliding window: right to left; a run must end on an A-boundary; need =
// cdiv(W - 1, B) contiguous blocks. reference §9.3: "simple hybrid" (full + one other) is one pass.
// Full B = 8 (blocks 0..3 cached), SWA B = 4, W = 9 → need 2, cached 4, 5, 6; S = A = 8, H = 4.
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

// reference §9.3: the fixed point iterates with more than two spec-groups, and S != H.
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
// the batch has it (reference §9.3 SpecGroup).
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

// reference §9.4 hybrid EAGLE drop: the eagle group searches one block past the candidate and
// drops it, so the candidate survives only if one more block is cached.
// Full B = 8 (eagle), SWA B = 8, W = 9 (need 1); S = A = 8.
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

// reference §9.2 mamba: the last cached state whose end is A-aligned; S = 16, A = 16, B = 8:
// a state at 8 is not usable, at 16 it is.
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

}  // namespace
}  // namespace kv
}  // namespace prefixsim
