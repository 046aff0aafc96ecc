// The offloading connector's lookup and store rules on hand-computed cases (docs/semantics.md
// §15): keys placed in the CPU tier by hand, then what the lookup makes of them; which blocks a
// step stores; what a CPU slot costs under each sizing.
#include "sim/kv/offloading_connector.h"

#include <gtest/gtest.h>

#include <vector>

#include "prefixsim/kv_cache_manager.h"
#include "sim/kv/kv_cache_state.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim::kv {
namespace {

using testing_kv::Concat;
using testing_kv::Group;
using testing_kv::Iota;
using testing_kv::Literal;
using testing_kv::Plan;

constexpr double kSlotGib = 1024.0 / (1LL << 30);  // one 1 KiB page, as a size in GiB

EngineConfig Offloading(double slots_of_1kib) {
  EngineConfig e;
  e.kv_offload.kv_offloading_size_gib = slots_of_1kib * kSlotGib;
  e.kv_offload.slot_sizing = OffloadSlotSizing::kLargestGroup;
  return e;
}

// A connector over a fresh manager, with one tracked request of the given prompt.
struct Fixture {
  Fixture(const KvPlan& plan, const EngineConfig& engine, std::vector<uint32_t> prompt)
      : kv(plan, testing_kv::Checked()), request(Literal(1, std::move(prompt), 4)) {
    offload = std::make_unique<OffloadingConnector>(plan, engine, &kv);
    h = kv.AddRequest(&request);
  }
  // Puts the key of `group`'s block `block` of the request into the CPU tier, written by
  // `ready_ns`.
  void Put(int group, int64_t block, int64_t block_tokens, int64_t ready_ns = 0) {
    const auto& hashes = kv.impl()->HashesOf(h, request.prompt_tokens);
    const int64_t ratio = block_tokens / kv.plan().hash_block_size;
    const uint64_t hash = hashes[(block + 1) * ratio - 1].hash;
    const TierBlock blocks[] = {{OffloadKey(hash, group), 1024, hash, group}};
    ASSERT_TRUE(offload->tier(0).Store(blocks, ready_ns));
  }
  KvCacheManager kv;
  Request request;
  std::unique_ptr<OffloadingConnector> offload;
  KvRequestHandle h;
};

const KvPlan kFullAndMamba =
    Plan({Group(LayerKind::kFullAttention, 16), Group(LayerKind::kMamba, 16)}, 64, 16, 16, 16);

// A mamba state alone restores nothing: the attention blocks before it are missing.
TEST(OffloadingConnectorTest, AMambaStateWithoutItsAttentionBlocksIsNoHit) {
  Fixture f(kFullAndMamba, Offloading(64), Iota(80));
  f.Put(/*group=*/1, /*block=*/3, 16);
  EXPECT_EQ(f.offload->Lookup(f.h, 80, 0, 0).tokens, 0);
  for (int b = 0; b < 4; ++b) f.Put(0, b, 16);
  EXPECT_EQ(f.offload->Lookup(f.h, 80, 0, 0).tokens, 64);
}

// Attention blocks 0..3 with the state at block 1 only: the hit ends where both groups can be
// restored, 32 tokens (the fixed point of the groups' lookups).
TEST(OffloadingConnectorTest, AHitEndsWhereEveryGroupCanBeRestored) {
  Fixture f(kFullAndMamba, Offloading(64), Iota(80));
  for (int b = 0; b < 4; ++b) f.Put(0, b, 16);
  f.Put(1, 1, 16);
  EXPECT_EQ(f.offload->Lookup(f.h, 80, 0, 0).tokens, 32);
}

// A sliding window of 32 tokens (2 blocks of 16): the hit must end with both window blocks, or
// with a run that reaches back to the GPU hit (the GPU holds the rest of that window).
TEST(OffloadingConnectorTest, ASlidingWindowNeedsItsLastWindowOfBlocks) {
  const KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 16), Group(LayerKind::kSlidingWindow, 16, 32)}, 64, 16,
           16, 16);
  {
    Fixture f(plan, Offloading(64), Iota(97));
    for (int b = 0; b < 6; ++b) f.Put(0, b, 16);
    f.Put(1, 4, 16);
    f.Put(1, 5, 16);
    // Capped at the prompt less one token with a window group: 96 = 6 whole blocks.
    EXPECT_EQ(f.offload->Lookup(f.h, 97, 0, 0).tokens, 96);
  }
  {
    Fixture f(plan, Offloading(64), Iota(97));
    for (int b = 0; b < 6; ++b) f.Put(0, b, 16);
    f.Put(1, 2, 16);
    f.Put(1, 5, 16);  // no two consecutive window blocks
    EXPECT_EQ(f.offload->Lookup(f.h, 97, 0, 0).tokens, 0);
    // From a GPU hit of 32 tokens, block 2 alone reaches back to it: the hit ends at 48.
    EXPECT_EQ(f.offload->Lookup(f.h, 97, 32, 0).tokens, 48 - 32);
  }
}

// A pure full-attention model may load up to the prompt's end (the scheduler recomputes the last
// token); a hit less than a block beyond the GPU hit counts nothing.
TEST(OffloadingConnectorTest, FullAttentionTakesConsecutiveBlocksFromTheGpuHit) {
  const KvPlan plan = testing_kv::Unitary(LayerKind::kFullAttention, 16, 64);
  Fixture f(plan, Offloading(64), Iota(64));
  f.Put(0, 0, 16);
  f.Put(0, 1, 16);
  f.Put(0, 3, 16);  // not consecutive: no use
  EXPECT_EQ(f.offload->Lookup(f.h, 64, 0, 0).tokens, 32);
  EXPECT_EQ(f.offload->Lookup(f.h, 64, 32, 0).tokens, 0);
  f.Put(0, 2, 16);
  EXPECT_EQ(f.offload->Lookup(f.h, 64, 0, 0).tokens, 64);
  EXPECT_EQ(f.offload->Lookup(f.h, 64, 32, 0).tokens, 32);
}

// Only a group flagged for its own drafter MLA layers asks for one block more and drops it (vLLM
// PR #52771); groups the coordinator flags because none was (a sliding-window drafter) do not.
// MLA and a 32-token window at block 16, every key of a 97-token prompt in the tier.
TEST(OffloadingConnectorTest, OnlyAnAnnotatedEagleGroupDropsABlock) {
  KvPlan plan =
      Plan({Group(LayerKind::kMla, 16), Group(LayerKind::kSlidingWindow, 16, 32)}, 64, 16, 16, 16);
  plan.groups[1].num_drafter_layers = 1;  // a sliding-window drafter: the fallback flags both
  for (KvGroup& g : plan.groups) g.is_eagle_group = true;
  auto lookup = [](const KvPlan& p) {
    Fixture f(p, Offloading(64), Iota(97));
    for (int g = 0; g < 2; ++g) {
      for (int b = 0; b < 6; ++b) f.Put(g, b, 16);
    }
    return f.offload->Lookup(f.h, 97, 0, 0).tokens;
  };
  EXPECT_EQ(lookup(plan), 96);
  // A drafter MLA group is annotated: it needs block 6, which a 97-token prompt does not have.
  plan.groups[0].num_drafter_layers = 1;
  plan.groups[1].is_eagle_group = false;
  EXPECT_EQ(lookup(plan), 80);
}

// A block whose write has not landed defers the request (vLLM's HIT_PENDING) instead of missing.
TEST(OffloadingConnectorTest, ABlockStillBeingWrittenDefersTheLookup) {
  const KvPlan plan = testing_kv::Unitary(LayerKind::kFullAttention, 16, 64);
  Fixture f(plan, Offloading(64), Iota(64));
  f.Put(0, 0, 16);
  f.Put(0, 1, 16, /*ready_ns=*/5000);
  const OffloadingConnector::Match early = f.offload->Lookup(f.h, 64, 0, 1000);
  EXPECT_TRUE(early.defer);
  const OffloadingConnector::Match later = f.offload->Lookup(f.h, 64, 0, 5000);
  EXPECT_FALSE(later.defer);
  EXPECT_EQ(later.tokens, 32);
}

// Blocks hit on the GPU are offered for storing again, but a sliding-window group holds only its
// window's blocks after a hit (the rest are the null block), so only those are stored; the full
// attention group stores all of its blocks.
TEST(OffloadingConnectorTest, ASlidingWindowGroupStoresOnlyTheBlocksItHolds) {
  const KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 16), Group(LayerKind::kSlidingWindow, 16, 32)}, 64, 16,
           16, 16);
  KvCacheManager kv(plan, testing_kv::Checked());
  const Request first = Literal(1, Iota(97), 1);
  const KvRequestHandle h1 = kv.AddRequest(&first);
  ASSERT_TRUE(kv.AllocateSlots(h1, 0, 97, 0, 0));
  kv.Free(h1);
  kv.RemoveRequest(1);

  OffloadingConnector offload(plan, Offloading(64), &kv);
  const Request second = Literal(2, Iota(97), 1);
  const KvRequestHandle h2 = kv.AddRequest(&second);
  const PrefixHit hit = kv.GetComputedBlocks(h2);
  ASSERT_EQ(hit.hit_tokens, 96);
  ASSERT_TRUE(kv.AllocateSlots(h2, 0, 1, 96, 0));
  offload.ResetStores(h2);
  offload.StoreAfterStep(h2, 97, 97, 0);
  int64_t held_window_blocks = 0;
  const std::vector<int32_t> table = kv.BlockTable(2, 1);
  for (size_t b = 0; b < 6 && b < table.size(); ++b) held_window_blocks += table[b] != 0;
  EXPECT_LT(held_window_blocks, 6);
  EXPECT_EQ(offload.Stats().tiers[0].stored_blocks, 6 + held_window_blocks);
}

// vLLM gives each (block, group) key a slot as large as one block of every group (row_per_key,
// issue #56871); sized for the largest group instead, the same bytes hold as many more keys as
// there are groups of equal size.
TEST(OffloadingConnectorTest, SlotSizingDecidesHowManyKeysTheCpuTierHolds) {
  EngineConfig e = Offloading(64);
  e.kv_offload.slot_sizing = OffloadSlotSizing::kRowPerKey;
  KvCacheManager kv(kFullAndMamba);
  EXPECT_EQ(OffloadingConnector(kFullAndMamba, e, &kv).Stats().tiers[0].capacity_blocks, 32);
  e.kv_offload.slot_sizing = OffloadSlotSizing::kLargestGroup;
  EXPECT_EQ(OffloadingConnector(kFullAndMamba, e, &kv).Stats().tiers[0].capacity_blocks, 64);
}

// A full tier evicts its least recently used keys; a store that cannot make room (every key
// pinned by a load) stores nothing and counts a failure.
TEST(OffloadTierTest, EvictsLeastRecentlyUsedAndRefusesWhenNothingCanGo) {
  OffloadTier tier("CPU", 2048, 1e9, 1e9);
  const TierBlock a[] = {{1, 1024}}, b[] = {{2, 1024}}, c[] = {{3, 1024}};
  ASSERT_TRUE(tier.Store(a, 0));
  ASSERT_TRUE(tier.Store(b, 0));
  const uint64_t touched[] = {1};
  tier.Touch(touched);  // 2 is now the least recent
  ASSERT_TRUE(tier.Store(c, 0));
  EXPECT_TRUE(tier.Contains(1));
  EXPECT_FALSE(tier.Contains(2));
  tier.Pin(1);
  tier.Pin(3);
  EXPECT_FALSE(tier.Store(b, 0));
  EXPECT_EQ(tier.counters().store_failures, 1);
  EXPECT_EQ(tier.counters().evicted_never_loaded, 1);  // key 2 was never read
}

}  // namespace
}  // namespace prefixsim::kv
