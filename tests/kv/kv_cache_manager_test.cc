// KvCacheManager through its public API (docs/semantics.md §8–§10, §13.E). Every test runs the
// invariant checker after every operation (KvCacheOptions::check_invariants).
#include "prefixsim/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using testing_kv::Checked;
using testing_kv::Concat;
using testing_kv::Group;
using testing_kv::Iota;
using testing_kv::Literal;
using testing_kv::Plan;
using testing_kv::Unitary;

// Runs a whole prefill in one step and returns the hit it got. Each call is a step of its own: a
// mamba state cached in the step a hit is looked up would make the request wait (§10.1).
PrefixHit Prefill(KvCacheManager& m, const Request& r) {
  m.NewStep();
  m.AddRequest(&r);
  const PrefixHit hit = m.GetComputedBlocks(r.id);
  EXPECT_TRUE(m.AllocateSlots(r.id, 0, r.prompt_tokens - hit.hit_tokens, hit.hit_tokens, 0));
  return hit;
}

void Finish(KvCacheManager& m, const Request& r) {
  m.Free(r.id);
  m.RemoveRequest(r.id);
}

// docs/semantics.md §9.1: max_hit = num_tokens - 1, so a fully cached prompt re-computes its last
// block.
TEST(KvCacheManagerTest, UnitaryHitAndLastTokenCap) {
  KvCacheManager m(Unitary(LayerKind::kFullAttention, 4, 16), Checked());
  const Request a = Literal(1, Iota(8));
  EXPECT_EQ(Prefill(m, a).hit_tokens, 0);
  EXPECT_EQ(m.NumHeldBlocks(1), 2);
  EXPECT_EQ(m.counters().cached_blocks, 2);
  Finish(m, a);
  const Request same = Literal(2, Iota(8));  // 8 tokens: max_hit 7 → one block
  EXPECT_EQ(Prefill(m, same).hit_tokens, 4);
  Finish(m, same);
  const Request longer = Literal(3, Iota(9));  // 9 tokens: max_hit 8 → both blocks
  const PrefixHit h = Prefill(m, longer);
  EXPECT_EQ(h.hit_tokens, 8);
  EXPECT_EQ(h.alignment_loss_tokens, 0);  // unitary: A == H
  Finish(m, longer);
  const Request diverge = Literal(4, Concat(Iota(5), {100, 101, 102, 103, 104}));
  EXPECT_EQ(Prefill(m, diverge).hit_tokens, 4);
  Finish(m, diverge);
}

// docs/semantics.md §8.2 / §10.4 through the manager: tail-first freeing, unhashed blocks reused
// first, LRU eviction of cached blocks with the chain tail going first.
TEST(KvCacheManagerTest, EvictionVictimsFollowFreeOrder) {
  KvCacheManager m(Unitary(LayerKind::kFullAttention, 4, 8), Checked());  // 7 usable
  const Request a = Literal(1, Iota(9));
  Prefill(m, a);  // blocks 1 2 3; 1 and 2 cached, 3 holds token 8 only
  EXPECT_EQ(m.BlockTable(1, 0), (std::vector<int32_t>{1, 2, 3}));
  Finish(m, a);  // queue: 3 4 5 6 7 | 2 1
  EXPECT_EQ(m.num_free_blocks(), 7);
  const Request other = Literal(2, Iota(24, 1000));  // 6 blocks: 3 4 5 6 7 then evicts 2
  Prefill(m, other);
  EXPECT_EQ(m.BlockTable(2, 0), (std::vector<int32_t>{3, 4, 5, 6, 7, 2}));
  EXPECT_EQ(m.counters().evicted_blocks, 1);
  Finish(m, other);
  const Request again = Literal(3, Iota(9));
  EXPECT_EQ(Prefill(m, again).hit_tokens, 4);  // block 2 (tokens 4..7) was evicted
  EXPECT_EQ(m.BlockTable(3, 0)[0], 1);
  Finish(m, again);
}

// docs/semantics.md §8.2: a hit touches its blocks (they leave the free queue and are not evicted
// by the allocation of the same step); freed again, they are the most recently used.
TEST(KvCacheManagerTest, TouchOnHitProtectsAndRefreshes) {
  KvCacheManager m(Unitary(LayerKind::kFullAttention, 4, 6), Checked());  // 5 usable
  const Request a = Literal(1, Iota(9));
  Prefill(m, a);
  Finish(m, a);                            // queue: 3 4 5 | 2 1
  const Request b = Literal(2, Iota(17));  // hit 8 (blocks 1 2), needs 3 more: 3 4 5
  m.AddRequest(&b);
  const PrefixHit h = m.GetComputedBlocks(2);
  EXPECT_EQ(h.hit_tokens, 8);
  EXPECT_TRUE(m.AllocateSlots(2, 0, 9, 8, 0));
  EXPECT_EQ(m.BlockTable(2, 0), (std::vector<int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(m.counters().evicted_blocks, 0);
  EXPECT_EQ(m.num_free_blocks(), 0);
  // A second request hitting the same blocks shares them (ref count 2).
  const Request c = Literal(3, Iota(9));
  m.AddRequest(&c);
  EXPECT_EQ(m.GetComputedBlocks(3).hit_tokens, 8);
  EXPECT_FALSE(m.AllocateSlots(3, 0, 1, 8, 0));  // no block for token 8: nothing changes
  EXPECT_EQ(m.NumHeldBlocks(3), 0);
  m.RemoveRequest(3);
  Finish(m, b);
}

// docs/semantics.md §10.1: allocation covers computed + new + lookahead; all groups or none.
TEST(KvCacheManagerTest, LookaheadAndAllOrNothing) {
  KvPlan plan = Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kMla, 4)}, 7, 4, 4, 4);
  KvCacheManager m(plan, Checked());  // 6 usable
  const Request a = Literal(1, Iota(9));
  m.AddRequest(&a);
  EXPECT_EQ(m.GetComputedBlocks(1).hit_tokens, 0);
  EXPECT_FALSE(m.AllocateSlots(1, 0, 9, 0, 4));  // needs 13 tokens: 4 + 4 blocks > 6
  EXPECT_EQ(m.num_free_blocks(), 6);
  EXPECT_EQ(m.NumHeldBlocks(1), 0);
  EXPECT_TRUE(m.AllocateSlots(1, 0, 9, 0, 3));  // 12 tokens: 3 + 3 blocks
  EXPECT_EQ(m.NumHeldBlocks(1), 6);
  Finish(m, a);
}

// max_model_len caps the lookahead (docs/semantics.md §10.1).
TEST(KvCacheManagerTest, LookaheadCappedAtMaxModelLen) {
  KvCacheOptions o = Checked();
  o.max_model_len = 10;
  KvCacheManager m(Unitary(LayerKind::kFullAttention, 4, 16), o);
  const Request a = Literal(1, Iota(9));
  m.AddRequest(&a);
  m.GetComputedBlocks(1);
  EXPECT_TRUE(m.AllocateSlots(1, 0, 9, 0, 8));  // min(17, 10) tokens → 3 blocks
  EXPECT_EQ(m.NumHeldBlocks(1), 3);
  Finish(m, a);
}

// docs/semantics.md §10.2: draft tokens and lookahead slots are never cached; blocks completed by
// verified outputs are cached when the count crosses a boundary.
TEST(KvCacheManagerTest, DraftsAreNeverCached) {
  KvCacheManager m(Unitary(LayerKind::kFullAttention, 4, 32), Checked());
  const Request a = Literal(1, Iota(7));
  m.AddRequest(&a);
  m.GetComputedBlocks(1);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 7, 0, 0));
  EXPECT_EQ(m.counters().cached_blocks, 1);
  m.SetNumTokens(1, 8);  // first output sampled (not yet computed)
  // Decode: 1 token + 3 drafts, 3 lookahead slots. Computed would reach 11 but only 8 are
  // verified: block 1 (tokens 4..7) becomes cacheable, block 2 (8..11) does not.
  ASSERT_TRUE(m.AllocateSlots(1, 7, 4, 0, 3));
  EXPECT_EQ(m.counters().cached_blocks, 2);
  EXPECT_EQ(m.NumHeldBlocks(1), 4);  // 14 tokens of slots
  m.SetNumTokens(1, 12);             // 3 drafts accepted + 1 bonus
  ASSERT_TRUE(m.AllocateSlots(1, 11, 4, 0, 3));
  EXPECT_EQ(m.counters().cached_blocks, 3);  // block 2 now verified
  Finish(m, a);
}

// docs/semantics.md §13.E (vLLM's hybrid design note): block 16, window 32, one full-attention and
// two sliding-window groups, a 112-token request: 7 + 2 + 2 = 11 blocks once the out-of-window
// blocks are replaced by the null block and freed.
TEST(KvCacheManagerTest, DesignNoteExampleSevenPlusTwoPlusTwo) {
  KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 16), Group(LayerKind::kSlidingWindow, 16, 32),
            Group(LayerKind::kSlidingWindow, 16, 32)},
           64, 16, 16, 16);
  KvCacheManager m(plan, Checked());
  const Request a = Literal(1, Iota(112));
  m.AddRequest(&a);
  EXPECT_EQ(m.GetComputedBlocks(1).hit_tokens, 0);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 112, 0, 0));
  EXPECT_EQ(m.NumHeldBlocks(1), 21);  // the whole prefill is in flight
  // Next step: computed = 112; out-of-window blocks [0, (112 - 31) / 16) = [0, 5) go.
  ASSERT_TRUE(m.AllocateSlots(1, 112, 0, 0, 0));
  EXPECT_EQ(m.NumHeldBlocks(1), 11);
  EXPECT_EQ(m.BlockTable(1, 0).size(), 7u);
  const std::vector<int32_t> swa = m.BlockTable(1, 1);
  ASSERT_EQ(swa.size(), 7u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(swa[i], 0) << i;
  EXPECT_NE(swa[5], 0);
  EXPECT_EQ(m.num_free_blocks(), 63 - 11);
  // The freed SWA blocks keep their hashes (§10.3): an identical request hits 96 tokens
  // (max_hit 111 → 6 full blocks; the SWA groups need cdiv(31, 16) = 2 blocks ending at 96).
  const Request b = Literal(2, Iota(112));
  m.AddRequest(&b);
  EXPECT_EQ(m.GetComputedBlocks(2).hit_tokens, 96);
  ASSERT_TRUE(m.AllocateSlots(2, 0, 16, 96, 0));
  const std::vector<int32_t> swa_b = m.BlockTable(2, 2);
  ASSERT_EQ(swa_b.size(), 7u);
  EXPECT_EQ(swa_b[3], 0);
  EXPECT_NE(swa_b[4], 0);
  EXPECT_NE(swa_b[5], 0);
  Finish(m, b);
  Finish(m, a);
}

// docs/semantics.md §10.3 and §11 (multi-module MTP): a sliding window frees only the blocks
// before skipped = max(0, n - W + 1 - extra_retained), where extra_retained = num_reprefillable =
// k - 1 keeps the tokens the drafter re-prefills. Full B = 4, SWA B = 4 with W = 5, S = H = A = 4,
// k = 3 (num_reprefillable 2). After 16 computed tokens: skipped = 16 - 5 + 1 - 2 = 10, so SWA
// blocks [0, 10 / 4) = [0, 2) go and blocks 2, 3 stay; without the extra tokens skipped would be
// 12 and block 2 would go too.
TEST(KvCacheManagerTest, SlidingWindowKeepsTheTokensRetainedForMtp) {
  KvPlan plan = Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 4, 5)},
                     32, 4, 4, 4);
  for (const int64_t reprefillable : {2, 0}) {
    SCOPED_TRACE(reprefillable);
    KvCacheOptions o = Checked();
    o.num_reprefillable_tokens = reprefillable;
    KvCacheManager m(plan, o);
    const Request a = Literal(1, Iota(16));
    m.AddRequest(&a);
    m.GetComputedBlocks(1);
    ASSERT_TRUE(m.AllocateSlots(1, 0, 16, 0, 0));
    ASSERT_TRUE(m.AllocateSlots(1, 16, 0, 0, 0));  // next step: out-of-window blocks are freed
    const std::vector<int32_t> swa = m.BlockTable(1, 1);
    ASSERT_EQ(swa.size(), 4u);
    const int freed = reprefillable == 2 ? 2 : 3;  // (16 - 5 + 1 - reprefillable) / 4
    for (int i = 0; i < 4; ++i) EXPECT_EQ(swa[i] == 0, i < freed) << i;
    EXPECT_EQ(m.NumHeldBlocks(1), 4 + 4 - freed);
    Finish(m, a);
  }
}

// docs/semantics.md §10.2: the SWA reachable mask. Full B = 8, SWA B = 4 with W = 5 (need 1), S = A
// = 8, H = 4: per segment A/B = 2 SWA blocks, only the last one before each A-boundary is
// published.
TEST(KvCacheManagerTest, SlidingWindowReachableMask) {
  KvPlan plan = Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kSlidingWindow, 4, 5)},
                     32, 8, 4, 8);
  KvCacheManager m(plan, Checked());
  const Request a = Literal(1, Iota(16));
  m.AddRequest(&a);
  m.GetComputedBlocks(1);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 16, 0, 0));
  EXPECT_EQ(m.counters().cached_blocks, 2 + 2);  // full 0,1; SWA 1,3 (not 0,2)
  Finish(m, a);
  const Request b = Literal(2, Iota(17));
  const PrefixHit h = Prefill(m, b);
  EXPECT_EQ(h.hit_tokens, 16);
  EXPECT_EQ(h.alignment_loss_tokens, 0);
  Finish(m, b);
}

// docs/semantics.md §10.2: a hybrid model caches only up to the last S boundary of the computed
// tokens; the tail of a finished request is lost to the cache, and alignment_loss reports nothing
// for it (it was never cached).
TEST(KvCacheManagerTest, HybridCachesOnlyToLastSBoundary) {
  KvPlan plan = Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 8, 9)},
                     64, 8, 4, 8);
  KvCacheManager m(plan, Checked());
  const Request a = Literal(1, Iota(14));
  Prefill(m, a);
  // n = 14 → round_down(14, 8) = 8: full blocks 0,1 and SWA block 0 only.
  EXPECT_EQ(m.counters().cached_blocks, 3);
  Finish(m, a);
  const Request b = Literal(2, Iota(15));
  const PrefixHit h = Prefill(m, b);
  EXPECT_EQ(h.hit_tokens, 8);
  EXPECT_EQ(h.alignment_loss_tokens, 0);
  Finish(m, b);
}

// alignment_loss_tokens (docs/design.md §4.5): full B = 4, SWA B = 6 with W = 13 (need 2 = A/B, so
// every SWA block is published), S = A = 12, H = 2. Request b shares 22 tokens with a cached
// 24-token request: full serves 20 tokens, SWA a window ending at 18, so 18 tokens are cached in
// every group; the hit aligned to A is 12; the loss is 6.
TEST(KvCacheManagerTest, AlignmentLoss) {
  KvPlan plan = Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 6, 13)},
                     128, 12, 2, 12);
  KvCacheManager m(plan, Checked());
  const Request a = Literal(1, Iota(24));
  Prefill(m, a);
  EXPECT_EQ(m.counters().cached_blocks, 6 + 4);
  Finish(m, a);
  const Request b = Literal(2, Concat(Iota(22), {500, 501, 502}));
  const PrefixHit h = Prefill(m, b);
  EXPECT_EQ(h.hit_tokens, 12);
  EXPECT_EQ(h.alignment_loss_tokens, 6);
  Finish(m, b);
  // With the window 7 (need 1 < A/B = 2) only SWA blocks ending on A-boundaries are published,
  // so no group-wide cached prefix reaches past 12: no loss.
  KvPlan masked =
      Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 6, 7)}, 128, 12,
           2, 12);
  KvCacheManager m2(masked, Checked());
  Prefill(m2, a);
  EXPECT_EQ(m2.counters().cached_blocks, 6 + 2);
  Finish(m2, a);
  const PrefixHit h2 = Prefill(m2, b);
  EXPECT_EQ(h2.hit_tokens, 12);
  EXPECT_EQ(h2.alignment_loss_tokens, 0);
  Finish(m2, b);
}

// docs/semantics.md §9.2 chunked local attention: blocks before the current chunk are null; a
// max_hit on a chunk boundary is a hit without any cached block.
TEST(KvCacheManagerTest, ChunkedLocalHit) {
  KvPlan plan = Plan({Group(LayerKind::kChunkedLocal, 4, 0, false, 8)}, 32, 4, 4, 4);
  KvCacheManager m(plan, Checked());
  const Request a = Literal(1, Iota(21));
  Prefill(m, a);
  Finish(m, a);
  const Request b = Literal(2, Iota(21));  // max_hit 20: chunk starts at 16, block 4 cached
  EXPECT_EQ(Prefill(m, b).hit_tokens, 20);
  EXPECT_EQ(m.BlockTable(2, 0),
            (std::vector<int32_t>{0, 0, 0, 0, m.BlockTable(2, 0)[4], m.BlockTable(2, 0)[5]}));
  EXPECT_NE(m.BlockTable(2, 0)[4], 0);
  Finish(m, b);
  const Request c = Literal(3, Concat({900}, Iota(16)));  // 17 tokens, all different content
  EXPECT_EQ(Prefill(m, c).hit_tokens, 16);  // max_hit 16 = a chunk boundary: nothing needed
  EXPECT_EQ(m.NumHeldBlocks(3), 1);
  Finish(m, c);
}

// docs/semantics.md §9.2 / §10 mamba (align mode): a hit needs the state cached exactly at an
// A-aligned boundary; states are cached where an aligned step ends.
TEST(KvCacheManagerTest, MambaHitNeedsStateAtBoundary) {
  KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kMamba, 8)}, 32, 8, 8, 8);
  KvCacheManager m(plan, Checked());
  const Request a = Literal(1, Iota(20));
  m.AddRequest(&a);
  m.GetComputedBlocks(1);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 16, 0, 0));  // step ends at 16: state cached there
  EXPECT_EQ(m.BlockTable(1, 1).size(), 2u);
  EXPECT_EQ(m.BlockTable(1, 1)[0], 0);
  EXPECT_EQ(m.counters().cached_blocks, 2 + 1);
  ASSERT_TRUE(m.AllocateSlots(1, 16, 4, 0, 0));  // 16..20: new state block
  EXPECT_EQ(m.BlockTable(1, 1).size(), 3u);
  ASSERT_TRUE(m.AllocateSlots(1, 20, 1, 0, 0));  // the state at 16 is released
  const std::vector<int32_t> t = m.BlockTable(1, 1);
  EXPECT_EQ(t[1], 0);
  EXPECT_NE(t[2], 0);
  Finish(m, a);
  const Request b = Literal(2, Iota(20));
  EXPECT_EQ(Prefill(m, b).hit_tokens, 16);
  Finish(m, b);
  // Shares 8 tokens: full attention could serve 8, but no state was cached at 8.
  const Request c = Literal(3, Concat(Iota(8), Iota(12, 700)));
  EXPECT_EQ(Prefill(m, c).hit_tokens, 0);
  Finish(m, c);
}

// docs/reference-notes.md §2 (vLLM's postprocess_mamba, mamba_state_copy_boundary): a verify
// step whose accepted drafts cross a mamba block boundary leaves the state at that boundary in
// the boundary's block, and the next allocation publishes it ("cached"); "skipped" keeps the old
// simplification (no state from a step with drafts). Full B = 8, mamba B = 8, S = H = A = 8.
int64_t FollowUpHitAfterVerifyStep(bool cache_spec_states) {
  KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kMamba, 8)}, 32, 8, 8, 8);
  plan.cache_mamba_spec_boundary_states = cache_spec_states;
  KvCacheManager m(plan, Checked());
  // Prompt 1..12, then the outputs 13..20 (known content, so a follow-up can share them).
  Request a = Literal(1, Iota(12), 8);
  a.literal_tokens = Iota(20);
  ContentSegment out;
  out.offset = 12;
  out.length = 8;
  a.output.push_back(out);
  m.AddRequest(&a);
  m.GetComputedBlocks(1);
  EXPECT_TRUE(m.AllocateSlots(1, 0, 8, 0, 0));   // prefill chunk: state cached at 8
  EXPECT_TRUE(m.AllocateSlots(1, 8, 4, 0, 0));   // rest of the prompt: 12
  m.SetNumTokens(1, 13);                         // the sampled token
  EXPECT_TRUE(m.AllocateSlots(1, 12, 4, 0, 3));  // verify 1 + 3 drafts: 12..16, crosses 16
  m.SetNumTokens(1, 17);                         // all 3 accepted + the bonus token
  EXPECT_TRUE(m.AllocateSlots(1, 16, 4, 0, 3));  // the next verify step
  Finish(m, a);
  const Request b = Literal(2, Iota(20));
  const int64_t hit = Prefill(m, b).hit_tokens;
  Finish(m, b);
  return hit;
}

TEST(KvCacheManagerTest, MambaStateAtBoundaryCrossedInVerifyStep) {
  EXPECT_EQ(FollowUpHitAfterVerifyStep(/*cache_spec_states=*/true), 16);
  EXPECT_EQ(FollowUpHitAfterVerifyStep(/*cache_spec_states=*/false), 8);
}

// docs/semantics.md §9.4: unitary EAGLE drops the last matched block.
TEST(KvCacheManagerTest, UnitaryEagleDrop) {
  KvCacheManager m(Unitary(LayerKind::kFullAttention, 4, 16, 0, /*eagle=*/true), Checked());
  const Request a = Literal(1, Iota(9));
  Prefill(m, a);
  Finish(m, a);
  const Request b = Literal(2, Iota(9));
  EXPECT_EQ(Prefill(m, b).hit_tokens, 4);
  Finish(m, b);
}

// docs/semantics.md §10.2 / §9.4: a hybrid eagle group publishes one block past the last S
// boundary, and that block is what lets the EAGLE drop keep the candidate. Full B = 4 (eagle), SWA
// B = 8, W = 9 (need 1); S = A = 8, H = 4.
TEST(KvCacheManagerTest, HybridEagleGroupCachesOneBlockPastS) {
  KvPlan plan = Plan({Group(LayerKind::kFullAttention, 4, 0, /*eagle=*/true),
                      Group(LayerKind::kSlidingWindow, 8, 9)},
                     64, 8, 4, 8);
  KvCacheManager m(plan, Checked());
  const Request a = Literal(1, Iota(14));
  Prefill(m, a);
  // round_down(14, 8) = 8; the eagle group goes to min(14, 8 + 4) = 12: 3 blocks; SWA: 1.
  EXPECT_EQ(m.counters().cached_blocks, 3 + 1);
  Finish(m, a);
  // max_hit 16: full finds 12 tokens, drops 4, aligns to 8; SWA serves 8.
  const Request b = Literal(2, Concat(Iota(14), {70, 71, 72}));
  EXPECT_EQ(Prefill(m, b).hit_tokens, 8);
  Finish(m, b);
}

// docs/semantics.md §10.2 multi-module MTP: num_reprefillable tokens at the end are never cached.
TEST(KvCacheManagerTest, ReprefillableTokensAreNotCached) {
  KvCacheOptions o = Checked();
  o.num_reprefillable_tokens = 1;
  KvCacheManager m(Unitary(LayerKind::kFullAttention, 4, 16), o);
  const Request a = Literal(1, Iota(8));
  Prefill(m, a);
  EXPECT_EQ(m.counters().cached_blocks, 1);  // n = 8 - 1 = 7: one full block
  Finish(m, a);
  const Request b = Literal(2, Iota(9));
  EXPECT_EQ(Prefill(m, b).hit_tokens, 4);
  EXPECT_EQ(m.counters().cached_blocks, 2);  // n = 9 - 1 = 8
  Finish(m, b);
}

// Partial (fine-grained) hits, docs/semantics.md §7, §8.2, §9.2: MLA B = 8 and mamba B = 8 with a
// prefix_match_unit H = 2, so A = H. A step that ends on an H boundary inside a block registers
// the full-attention tail block and the mamba state under that boundary's fine hash; a later
// request hits there (phase 2), copying the tail block instead of sharing it (copy-on-write).
TEST(KvCacheManagerTest, PartialHitsAtHashBoundaries) {
  KvPlan plan = Plan({Group(LayerKind::kMla, 8), Group(LayerKind::kMamba, 8)}, 32, 8, 2, 2);
  plan.partial_hits = true;
  KvCacheManager m(plan, Checked());
  const Request a = Literal(1, Iota(13));
  m.AddRequest(&a);
  m.GetComputedBlocks(1);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 12, 0, 0));      // step ends at 12 (an H boundary)
  EXPECT_EQ(m.counters().cached_blocks, 1 + 1 + 1);  // MLA block 0, MLA tail @12, state @12
  const int32_t a_tail = m.BlockTable(1, 0)[1];
  const int32_t a_state = m.BlockTable(1, 1)[1];
  ASSERT_TRUE(m.AllocateSlots(1, 12, 1, 0, 0));  // continues in a fresh state block
  EXPECT_NE(m.BlockTable(1, 1)[1], a_state);
  Finish(m, a);
  m.NewStep();
  const Request b = Literal(2, Concat(Iota(12), {90, 91, 92, 93}));
  m.AddRequest(&b);
  const PrefixHit h = m.GetComputedBlocks(2);
  EXPECT_EQ(h.hit_tokens, 12);
  EXPECT_EQ(h.alignment_loss_tokens, 0);
  ASSERT_TRUE(m.AllocateSlots(2, 0, 4, 12, 0));
  const std::vector<int32_t> t = m.BlockTable(2, 0);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_NE(t[1], a_tail);  // copied, not shared
  Finish(m, b);

  // The same without partial hits (A = S = 8): no state at a block boundary, no hit.
  plan.partial_hits = false;
  plan.hit_alignment = 8;
  KvCacheManager m2(plan, Checked());
  m2.AddRequest(&a);
  m2.GetComputedBlocks(1);
  ASSERT_TRUE(m2.AllocateSlots(1, 0, 12, 0, 0));
  ASSERT_TRUE(m2.AllocateSlots(1, 12, 1, 0, 0));
  Finish(m2, a);
  EXPECT_EQ(Prefill(m2, b).hit_tokens, 0);
  Finish(m2, b);
}

// Without prefix caching: no lookups, nothing cached.
TEST(KvCacheManagerTest, PrefixCachingDisabled) {
  KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 16);
  plan.enable_prefix_caching = false;
  KvCacheManager m(plan, Checked());
  const Request a = Literal(1, Iota(9));
  Prefill(m, a);
  EXPECT_EQ(m.counters().cached_blocks, 0);
  Finish(m, a);
  const Request b = Literal(2, Iota(9));
  EXPECT_EQ(Prefill(m, b).hit_tokens, 0);
  Finish(m, b);
}

// Hybrid plans without prefix caching need no H or A (vLLM returns (S, S) there, §7); a plan
// with caching on but B not a multiple of H (refused by vLLM at startup) runs without caching.
TEST(KvCacheManagerTest, HybridWithoutUsableHashGranularity) {
  KvPlan plan = Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 6, 13)},
                     64, 12, 0, 0);
  plan.enable_prefix_caching = false;
  KvCacheManager m(plan, Checked());
  const Request a = Literal(1, Iota(30));
  Prefill(m, a);
  EXPECT_EQ(m.NumHeldBlocks(1), 8 + 5);
  Finish(m, a);
  KvPlan bad = Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 6, 13)},
                    64, 12, 4, 12);
  KvCacheManager m2(bad, Checked());
  Prefill(m2, a);
  EXPECT_EQ(m2.counters().cached_blocks, 0);
  Finish(m2, a);
}

// Namespaces (cache_salt / LoRA) never share blocks (docs/semantics.md §8.1).
TEST(KvCacheManagerTest, NamespacesDoNotShare) {
  KvCacheManager m(Unitary(LayerKind::kFullAttention, 4, 16), Checked());
  const Request a = Literal(1, Iota(9));
  Prefill(m, a);
  Finish(m, a);
  Request b = Literal(2, Iota(9));
  b.namespace_key = 5;
  EXPECT_EQ(Prefill(m, b).hit_tokens, 0);
  Finish(m, b);
}

// Preemption: Free, then look up again with the outputs included (docs/semantics.md §9.1, §11).
TEST(KvCacheManagerTest, PreemptedRequestFindsItsOwnBlocks) {
  KvCacheManager m(Unitary(LayerKind::kFullAttention, 4, 16), Checked());
  const Request a = Literal(1, Iota(6));
  m.AddRequest(&a);
  m.GetComputedBlocks(1);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 6, 0, 0));
  for (int64_t n = 7; n <= 10; ++n) {  // four decode steps
    m.SetNumTokens(1, n);
    ASSERT_TRUE(m.AllocateSlots(1, n - 1, 1, 0, 0));
  }
  EXPECT_EQ(m.counters().cached_blocks, 2);  // tokens 0..7 (prompt + 2 generated)
  m.Free(1);
  // Back in the queue with 10 tokens (the sampled 11th counts later): max_hit 9 → 8.
  EXPECT_EQ(m.GetComputedBlocks(1).hit_tokens, 8);
  ASSERT_TRUE(m.AllocateSlots(1, 0, 2, 8, 0));
  Finish(m, a);
}

// A remembered hit whose blocks were evicted before AllocateSlots is a caller bug: abort loudly
// instead of serving evicted content.
TEST(KvCacheManagerDeathTest, StaleHitAborts) {
  KvCacheManager m(Unitary(LayerKind::kFullAttention, 4, 4), Checked());  // 3 usable
  const Request a = Literal(1, Iota(9));
  Prefill(m, a);
  Finish(m, a);
  const Request b = Literal(2, Iota(9));
  m.AddRequest(&b);
  ASSERT_EQ(m.GetComputedBlocks(2).hit_tokens, 8);
  const Request c = Literal(3, Iota(12, 500));  // takes all three blocks: evicts a's blocks
  Prefill(m, c);
  EXPECT_DEATH(m.AllocateSlots(2, 0, 1, 8, 0), "stale prefix hit");
  // Looking up again is the supported path.
  Finish(m, c);
  EXPECT_EQ(m.GetComputedBlocks(2).hit_tokens, 0);
}

// docs/semantics.md §10.2: a hybrid plan publishes only up to the last S boundary. With groups of
// 16 and 24 tokens (S = 48, H = 8) the finest group could publish round_down(n, 16) tokens.
TEST(KvCacheManagerTest, UnpublishedAlignmentTokensFollowTheCachingRule) {
  KvCacheManager hybrid(Plan(
      {Group(LayerKind::kFullAttention, 16), Group(LayerKind::kFullAttention, 24)}, 64, 48, 8, 48));
  EXPECT_EQ(hybrid.UnpublishedAlignmentTokens(47), 32);  // 32 could, 0 published
  EXPECT_EQ(hybrid.UnpublishedAlignmentTokens(48), 0);
  EXPECT_EQ(hybrid.UnpublishedAlignmentTokens(100), 96 - 96);
  EXPECT_EQ(hybrid.UnpublishedAlignmentTokens(95), 80 - 48);
  KvCacheManager unitary(Unitary(LayerKind::kFullAttention, 16, 64));
  EXPECT_EQ(unitary.UnpublishedAlignmentTokens(47), 0);
}

// docs/semantics.md §7: a prefix-cacheable group whose block size H does not divide leaves the
// cache without lookups; the warning names the first such group, and the manager finds no hit.
TEST(KvCacheManagerTest, PrefixCachingDisabledWarningNamesTheUnhashableGroup) {
  KvPlan plan = Plan(
      {Group(LayerKind::kFullAttention, 32), Group(LayerKind::kSlidingWindow, 48, /*window=*/64)},
      /*num_blocks=*/64, /*s=*/96, /*h=*/32, /*a=*/96);
  EXPECT_EQ(PrefixCachingDisabledWarning(plan),
            "KvCacheManager: prefix caching disabled: group 1 block size 48 is not a multiple of "
            "the hash block size 32");
  KvCacheManager m(plan, Checked());
  const Request first = Literal(1, Iota(200));
  Prefill(m, first);
  Finish(m, first);
  const Request again = Literal(2, Iota(200));
  EXPECT_EQ(Prefill(m, again).hit_tokens, 0);
  EXPECT_EQ(m.counters().cached_blocks, 0);

  plan.enable_prefix_caching = false;
  EXPECT_EQ(PrefixCachingDisabledWarning(plan), "");
  plan.enable_prefix_caching = true;
  plan.hash_block_size = 16;
  EXPECT_EQ(PrefixCachingDisabledWarning(plan), "");
}

}  // namespace
}  // namespace prefixsim
