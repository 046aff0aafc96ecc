// Behaviour the byte-for-byte golden files used to be the only guard of (issue 33, area 5): the
// tokens a sliding window frees, the pages a max-length request holds in SWA plans, and the
// partial-hit flag when a mamba block equals H.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "prefixsim/engine_config.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using testing_kv::Iota;
using testing_kv::Literal;
using testing_kv::Unitary;

// docs/semantics.md §10.3: with W = 9 a position p still needs tokens p - 8 .. p, so after n
// computed tokens the first n - W + 1 are skipped and the blocks wholly inside them are freed
// (replaced by the null block). B = 4.
TEST(SlidingWindowSkippedTokensTest, BlocksOutsideTheWindowAreFreed) {
  struct Case {
    int64_t computed;
    int64_t freed_blocks;  // floor((computed - W + 1) / B), at least 0
  };
  // 8 = W - 1: nothing skipped; 12: 4 skipped = one block; 19: 11 skipped = 2 blocks; 20: 12
  // skipped = 3 blocks exactly; 23: 15 skipped = 3 blocks.
  for (const Case c : {Case{8, 0}, Case{12, 1}, Case{19, 2}, Case{20, 3}, Case{23, 3}}) {
    SCOPED_TRACE(c.computed);
    KvCacheManager kv(Unitary(LayerKind::kSlidingWindow, 4, 64, /*window=*/9),
                      testing_kv::Checked());
    const Request r = Literal(1, Iota(40));
    kv.AddRequest(&r);
    ASSERT_TRUE(kv.AllocateSlots(1, 0, c.computed, 0, 0));
    // The next step's allocation releases what fell out of the window before it.
    ASSERT_TRUE(kv.AllocateSlots(1, c.computed, 1, 0, 0));
    const std::vector<int32_t> table = kv.BlockTable(1, 0);
    int64_t nulls = 0;
    while (nulls < static_cast<int64_t>(table.size()) && table[nulls] == 0) ++nulls;
    EXPECT_EQ(nulls, c.freed_blocks);
    // Every block after the freed ones is still held.
    EXPECT_EQ(kv.NumHeldBlocks(1), static_cast<int64_t>(table.size()) - c.freed_blocks);
    kv.Free(1);
    kv.RemoveRequest(1);
  }
}

ModelSpec Model(std::string_view name) {
  auto m = LoadModel(name);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : ModelSpec{};
}
EngineConfig Engine(std::string_view name) {
  auto e = LoadEngine(name);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : EngineConfig{};
}

// docs/semantics.md §2.3: a request of max_model_len holds cdiv(M, B) pages in a full-attention
// group and cdiv(min(W - 1 + T, M), B) + 1 in a sliding-window group (T: the step's token budget
// plus lookahead; the + 1 is the block a window straddles). gpt-oss-20b-layout: one SWA group
// (W = 128) and one full group, both B = 16.
TEST(MaxLengthPagesTest, SlidingWindowPlans) {
  struct Case {
    int64_t max_model_len;
    int64_t budget;
    int64_t pages;
  };
  const Case cases[] = {
      // SWA: cdiv(127 + 8192, 16) + 1 = 520 + 1; full: 131072 / 16 = 8192.
      {131072, 8192, 521 + 8192},
      // SWA capped by M: cdiv(4800, 16) + 1 = 301; full: 300.
      {4800, 8192, 301 + 300},
      // A small budget: cdiv(127 + 1024, 16) + 1 = 72 + 1; full: 4096 / 16 = 256.
      {4096, 1024, 73 + 256},
      // W - 1 + T exactly M: cdiv(4096, 16) + 1 = 257; full 256.
      {4096, 4096 - 127, 257 + 256},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.max_model_len);
    EngineConfig e = Engine("gpt-oss-20b");
    e.max_model_len = c.max_model_len;
    e.max_num_batched_tokens = c.budget;
    auto plan = ResolveKvPlan(Model("gpt-oss-20b-layout"), e, "new");
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->groups.size(), 2u);
    EXPECT_EQ(plan->blocks_per_max_len_request, c.pages);
  }
}

// docs/semantics.md §7: partial (fine-grained) hits exist only where a mamba block is larger than
// H. Qwen3-Next on h200: every group (mamba included) has B = S = H = 544, so no partial hits and
// A = S; a prefix-match unit of 16 lowers H below the mamba block and turns them on, with A = H.
TEST(PartialHitFlagTest, MambaBlockEqualToHashBlockHasNoPartialHits) {
  const ModelSpec model = Model("qwen3-next-80b-a3b");
  EngineConfig e = Engine("h200");
  auto plan = ResolveKvPlan(model, e, "new");
  ASSERT_TRUE(plan.ok()) << plan.status();
  bool has_mamba = false;
  for (const KvGroup& g : plan->groups) {
    if (g.kind != LayerKind::kMamba) continue;
    has_mamba = true;
    EXPECT_EQ(g.block_size, plan->hash_block_size);
  }
  ASSERT_TRUE(has_mamba);
  EXPECT_FALSE(plan->partial_hits);
  EXPECT_EQ(plan->hit_alignment, plan->scheduler_block_size);

  e.prefix_match_unit = 16;
  plan = ResolveKvPlan(model, e, "new");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->hash_block_size, 16);
  EXPECT_TRUE(plan->partial_hits);
  EXPECT_EQ(plan->hit_alignment, 16);
}

}  // namespace
}  // namespace prefixsim
