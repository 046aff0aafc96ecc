// lost_to_alignment_tokens (sim/kv/shadow_index.h, sim/kv/README.md): the hit a shadow index of
// every computed block at the finest group block size would give, minus the real hit.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "prefixsim/engine_config.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "sim/kv/block_pool.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using testing_kv::Checked;
using testing_kv::Concat;
using testing_kv::Group;
using testing_kv::Iota;
using testing_kv::KimiPlan;
using testing_kv::Literal;
using testing_kv::Plan;
using testing_kv::Unitary;

// Admits the request and runs its prefill in steps ending at `step_ends` (then at the prompt end).
PrefixHit RunPrefill(KvCacheManager& m, const Request& r, std::vector<int64_t> step_ends = {}) {
  m.NewStep();  // a step of its own (a state cached in this step would make it wait)
  m.AddRequest(&r);
  const PrefixHit hit = m.GetComputedBlocks(r.id);
  step_ends.push_back(r.prompt_tokens);
  int64_t computed = 0;
  bool first = true;
  for (int64_t end : step_ends) {
    if (end <= std::max(computed, hit.hit_tokens)) continue;
    const int64_t from = first ? hit.hit_tokens : computed;
    EXPECT_TRUE(
        m.AllocateSlots(r.id, first ? 0 : computed, end - from, first ? hit.hit_tokens : 0, 0));
    computed = end;
    first = false;
  }
  return hit;
}

void Finish(KvCacheManager& m, const Request& r) {
  m.Free(r.id);
  m.RemoveRequest(r.id);
}

// The pool's LRU clock: cached blocks get a stamp when they rejoin the free queue; the horizon is
// the newest stamp evicted. Unhashed blocks take no stamp and move no horizon.
TEST(ShadowIndexTest, BlockPoolClockAndHorizon) {
  kv::BlockPool pool(5);  // blocks 1..4 usable
  const kv::BlockId a = pool.Allocate(), b = pool.Allocate(), c = pool.Allocate();
  ASSERT_TRUE(pool.Cache(a, 0, kv::HashPair{1, 2}));
  ASSERT_TRUE(pool.Cache(b, 0, kv::HashPair{3, 4}));
  pool.Free(c);  // unhashed
  pool.Free(b);
  pool.Free(a);
  EXPECT_EQ(pool.free_clock(), 2);
  EXPECT_EQ(pool.eviction_horizon(), 0);
  pool.Allocate();  // c (front, unhashed)
  pool.Allocate();  // the never-used block 4
  EXPECT_EQ(pool.eviction_horizon(), 0);
  pool.Allocate();  // evicts b, freed first (stamp 1)
  EXPECT_EQ(pool.eviction_horizon(), 1);
  pool.Allocate();  // evicts a (stamp 2)
  EXPECT_EQ(pool.eviction_horizon(), 2);
}

// A non-hybrid model: A = U = B, the shadow is off and nothing is lost, whatever the conversation.
TEST(ShadowIndexTest, NonHybridLosesNothing) {
  KvCacheManager m(Unitary(LayerKind::kFullAttention, 4, 64), Checked());
  const Request a = Literal(1, Iota(22));
  EXPECT_EQ(RunPrefill(m, a).lost_to_alignment_tokens, 0);
  Finish(m, a);
  const Request b = Literal(2, Concat(Iota(22), Iota(9, 100)));
  const PrefixHit h = RunPrefill(m, b);
  EXPECT_EQ(h.hit_tokens, 20);
  EXPECT_EQ(h.lost_to_alignment_tokens, 0);
  Finish(m, b);
}

// The PR #53007 plan (old: MLA and KDA at 1536, the drafter's SWA at 1728, S = A = 13,824). Turn
// 1 computes 20,000 tokens in mamba-aligned steps; turn 2 repeats them and adds 1,000. The real
// cache published up to 13,824 only; the shadow, at 1536, up to 19,968. The loss is exactly the
// tokens between the last 13,824- and 1536-boundaries of turn 1. Under `new` (S = 1536) the real
// hit reaches 19,968 itself and nothing is lost.
TEST(ShadowIndexTest, Pr53007TwoTurnConversation) {
  const std::vector<int64_t> steps = {13824, 19968};
  const Request turn1 = Literal(1, Iota(20000));
  const Request turn2 = Literal(2, Concat(Iota(20000), Iota(1000, 50000)));
  {
    const KvPlan plan = KimiPlan("old");
    ASSERT_EQ(plan.hit_alignment, 13824);
    KvCacheManager m(plan);
    EXPECT_EQ(RunPrefill(m, turn1, steps).lost_to_alignment_tokens, 0);
    Finish(m, turn1);
    const PrefixHit h = RunPrefill(m, turn2);
    EXPECT_EQ(h.hit_tokens, 13824);
    EXPECT_EQ(h.lost_to_alignment_tokens, 19968 - 13824);
    Finish(m, turn2);
  }
  {
    const KvPlan plan = KimiPlan("new");
    ASSERT_EQ(plan.hit_alignment, 1536);
    KvCacheManager m(plan);
    RunPrefill(m, turn1, steps);
    Finish(m, turn1);
    const PrefixHit h = RunPrefill(m, turn2);
    EXPECT_EQ(h.hit_tokens, 19968);
    EXPECT_EQ(h.lost_to_alignment_tokens, 0);
    Finish(m, turn2);
  }
}

// Full B = 4 next to SWA B = 6 (W = 13): S = A = 12, H = 2, U = 4. The shadow keeps what the real
// cache would have kept, and forgets it when the real cache evicts blocks freed at that time.
TEST(ShadowIndexTest, EvictedWithTheRealCache) {
  const KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 6, 13)}, 20, 12,
           2, 12);
  const Request a = Literal(1, Iota(22));
  const Request b = Literal(2, Concat(Iota(22), {500, 501, 502}));
  {
    KvCacheManager m(plan, Checked());
    RunPrefill(m, a);
    Finish(m, a);
    const PrefixHit h = RunPrefill(m, b);
    EXPECT_EQ(h.hit_tokens, 12);
    EXPECT_EQ(h.lost_to_alignment_tokens, 20 - 12);  // min(22, 24) rounded to 4
    Finish(m, b);
  }
  {
    KvCacheManager m(plan, Checked());
    RunPrefill(m, a);
    Finish(m, a);
    // 44 unrelated tokens take all 19 usable blocks (11 full + 8 SWA): every cached block of `a`
    // is evicted, and so is its shadow.
    const Request filler = Literal(3, Iota(44, 1000));
    RunPrefill(m, filler);
    EXPECT_EQ(m.num_free_blocks(), 0);
    Finish(m, filler);
    const PrefixHit h = RunPrefill(m, b);
    EXPECT_EQ(h.hit_tokens, 0);
    EXPECT_EQ(h.lost_to_alignment_tokens, 0);
    Finish(m, b);
  }
}

// With an EAGLE group the real hit needs one group block past it (docs/semantics.md §9.4); the
// shadow drops one U-block likewise, so the drop itself is not counted as lost to the alignment.
TEST(ShadowIndexTest, EagleDropAppliesToTheShadowToo) {
  const KvPlan plan = Plan({Group(LayerKind::kFullAttention, 4),
                            Group(LayerKind::kSlidingWindow, 6, 13, /*eagle=*/true)},
                           64, 12, 2, 12);
  KvCacheManager m(plan, Checked());
  const Request a = Literal(1, Iota(22));
  RunPrefill(m, a);
  Finish(m, a);
  const Request b = Literal(2, Concat(Iota(22), {500, 501, 502}));
  const PrefixHit h = RunPrefill(m, b);
  EXPECT_EQ(h.hit_tokens, 12);  // the eagle group cached one block past 12
  // Shadow: 5 U-blocks (20 tokens) cached, one dropped: 16.
  EXPECT_EQ(h.lost_to_alignment_tokens, 16 - 12);
  Finish(m, b);
}

// While a request that computed the blocks still runs, they stay in the shadow whatever the
// eviction horizon (held entries are alive).
TEST(ShadowIndexTest, HeldBlocksStayAlive) {
  const KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 6, 13)}, 64, 12,
           2, 12);
  KvCacheManager m(plan, Checked());
  const Request a = Literal(1, Iota(22));
  RunPrefill(m, a);  // still running
  const Request b = Literal(2, Concat(Iota(22), {500, 501, 502}));
  const PrefixHit h = RunPrefill(m, b);
  EXPECT_EQ(h.hit_tokens, 12);
  EXPECT_EQ(h.lost_to_alignment_tokens, 8);
  Finish(m, b);
  Finish(m, a);
}

}  // namespace
}  // namespace prefixsim
