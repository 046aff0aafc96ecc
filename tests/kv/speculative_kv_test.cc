// Speculative decoding as vLLM's KV cache manager does it (docs/semantics.md §2.3, §9.4, §10.1,
// §10.3), end to end on the minimal cases:
//  * the EAGLE drop applies to DSpark (SpeculativeConfig.use_eagle_block_drop() = use_eagle() and
//    not disable_eagle_block_drop; use_eagle() includes dspark);
//  * a mamba group holds 1 + k state blocks per request under speculative decoding
//    (MambaSpec.num_speculative_blocks = num_speculative_tokens; MambaManager's first allocation);
//  * the previous mamba state block is freed a step after the state moved on, null blocks between
//    them or not (MambaManager.remove_skipped_blocks frees it by its index).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "prefixsim/engine_config.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/model.h"
#include "tests/engine/engine_test_util.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using testing_engine::MustReplay;
using testing_engine::Req;
using testing_engine::SmallEngine;
using testing_kv::Checked;
using testing_kv::Concat;
using testing_kv::Group;
using testing_kv::Iota;
using testing_kv::Literal;
using testing_kv::Plan;

constexpr double kApartMs = 1e6;  // 1000 s between arrivals: every request runs alone

// Full attention twice and a mamba group, block 32, with `k` speculative state blocks; `eagle`:
// the EAGLE drop on every group (no drafter group is marked, so vLLM's coordinator marks all).
KvPlan TwoFullAndMamba(int64_t num_blocks, int k, bool eagle) {
  KvGroup mamba = Group(LayerKind::kMamba, 32, 0, eagle);
  mamba.num_speculative_blocks = k;
  return Plan({Group(LayerKind::kFullAttention, 32, 0, eagle),
               Group(LayerKind::kFullAttention, 32, 0, eagle), mamba},
              num_blocks, 32, 32, 32);
}

// Mamba align mode; with k > 0, EAGLE drafting k tokens of which the first two are accepted.
EngineConfig AlignEngine(int64_t budget, int k) {
  EngineConfig e = SmallEngine(budget);
  e.mamba_cache_mode = MambaCacheMode::kAlign;
  if (k > 0) {
    e.speculative.enabled = true;
    e.speculative.method = "eagle";
    e.speculative.num_speculative_tokens = k;
    e.speculative.acceptance.model = "per_position";
    e.speculative.acceptance.rates = std::vector<double>(k, 0.0);
    e.speculative.acceptance.rates[0] = e.speculative.acceptance.rates[1] = 1.0;
  }
  return e;
}

std::vector<uint32_t> Prefix(const std::vector<uint32_t>& tokens, size_t n) {
  return std::vector<uint32_t>(tokens.begin(), tokens.begin() + n);
}

int64_t MambaBlocksHeld(const KvCacheManager& kv, uint64_t id) {
  int64_t n = 0;
  for (size_t g = 0; g < kv.plan().groups.size(); ++g) {
    if (kv.plan().groups[g].kind != LayerKind::kMamba) continue;
    for (int32_t b : kv.BlockTable(id, static_cast<int>(g))) n += b != 0;
  }
  return n;
}

// The block tables step by step (block 32, k = 3): the first allocation takes the running state
// and three speculative blocks; when the state moves on, the first speculative block becomes the
// running state and one new block joins the speculative ones; the previous state (block 2, with
// null blocks after it) is freed once the computed tokens have passed its block.
TEST(SpeculativeKvTest, MambaTableHoldsTheRunningStateAndKSpeculativeBlocks) {
  for (int k : {0, 3}) {
    SCOPED_TRACE(k);
    KvCacheManager kv(TwoFullAndMamba(64, k, /*eagle=*/false), Checked());
    const Request r = Literal(1, Iota(200), 8);
    const KvRequestHandle h = kv.AddRequest(&r);
    kv.GetComputedBlocks(h);
    ASSERT_TRUE(kv.AllocateSlots(h, 0, 96, 0, 0));
    EXPECT_EQ(MambaBlocksHeld(kv, 1), 1 + k);
    const std::vector<int32_t> first = kv.BlockTable(1, 2);
    ASSERT_EQ(first.size(), 3u + k);
    EXPECT_EQ(first[0], 0);
    EXPECT_EQ(first[1], 0);
    ASSERT_TRUE(kv.AllocateSlots(h, 96, 96, 0, 0));
    // State 2 (at 96 tokens, cached) is still held; the running state is now block 5.
    EXPECT_EQ(MambaBlocksHeld(kv, 1), 2 + k);
    const std::vector<int32_t> second = kv.BlockTable(1, 2);
    ASSERT_EQ(second.size(), 6u + k);
    EXPECT_EQ(second[2], first[2]);
    EXPECT_EQ(second[3], 0);
    EXPECT_EQ(second[4], 0);
    if (k > 0) {
      EXPECT_EQ(second[5], first[3]);  // the first speculative block runs the state
    }
    EXPECT_EQ(kv.num_free_blocks(), 63 - 12 - (2 + k));
    ASSERT_TRUE(kv.AllocateSlots(h, 192, 8, 0, 0));
    // 192 tokens computed: state 2 is freed across the null blocks 3 and 4.
    EXPECT_EQ(MambaBlocksHeld(kv, 1), 2 + k);  // state 5 (at 192) and the running state 6
    EXPECT_EQ(kv.BlockTable(1, 2)[2], 0);
    kv.Free(h);
    EXPECT_EQ(kv.num_free_blocks(), 63);
  }
}

// The rule 2 case (full x2 + mamba, block 32, 48 blocks, EAGLE k = 3 accepting 2): A = 89
// tokens with 2 outputs, a 576-token filler, then A[:69] + 36 new tokens. The filler, with the
// three speculative state blocks on top of its own, evicts what A left; without them (the former
// single state block) A[:69] hit a block.
TEST(SpeculativeKvTest, SpeculativeStateBlocksAddMemoryPressure) {
  const std::vector<uint32_t> a = Iota(89, 1);
  const std::vector<Request> reqs = {
      Req(0, 0, a, 2), Req(1, kApartMs, Iota(576, 10000), 2),
      Req(2, 2 * kApartMs, Concat(Prefix(a, 69), Iota(36, 50000)), 2)};
  const ReplayResult vllm = MustReplay(TwoFullAndMamba(48, 3, true), AlignEngine(8192, 3), reqs);
  EXPECT_EQ(vllm.per_request[2].hit_tokens, 0);
  const ReplayResult one_state =
      MustReplay(TwoFullAndMamba(48, 0, true), AlignEngine(8192, 3), reqs);
  EXPECT_EQ(one_state.per_request[2].hit_tokens, 32);
}

// The rule 3 case, without speculation: A (200 tokens) prefills in 100-token chunks, so
// its state jumps from block 2 to block 5 with null blocks between; a 480-token filler then
// evicts the oldest cached blocks. vLLM freed A's state at 96 a step after it moved on, so it is
// the oldest and goes first, and A[:100] + 36 hits nothing; kept to the end of A (the backward
// scan stopping at the first null), it would have outlived A's tail blocks and hit 96.
TEST(SpeculativeKvTest, PreviousStateIsFreedAcrossNullBlocks) {
  const std::vector<uint32_t> a = Iota(200, 1);
  const ReplayResult r =
      MustReplay(TwoFullAndMamba(48, 0, false), AlignEngine(100, 0),
                 {Req(0, 0, a, 1), Req(1, kApartMs, Iota(480, 10000), 1),
                  Req(2, 2 * kApartMs, Concat(Prefix(a, 100), Iota(36, 50000)), 1)});
  EXPECT_EQ(r.per_request[2].hit_tokens, 0);
  // With a smaller filler nothing of A is evicted and the state at 96 serves the hit.
  const ReplayResult small =
      MustReplay(TwoFullAndMamba(48, 0, false), AlignEngine(100, 0),
                 {Req(0, 0, a, 1), Req(1, kApartMs, Iota(448, 10000), 1),
                  Req(2, 2 * kApartMs, Concat(Prefix(a, 100), Iota(36, 50000)), 1)});
  EXPECT_EQ(small.per_request[2].hit_tokens, 96);
}

// The Kimi-K3-like + DSpark plan (docs/semantics.md §13.B) under `policy`, with `num_blocks`, and
// an engine that replays it with the preset's speculation (DSpark, k = 3) on a constant step.
struct KimiCase {
  KvPlan plan;
  EngineConfig engine;
};
KimiCase Kimi(const char* policy, int64_t num_blocks, bool speculative = true,
              bool disable_drop = false) {
  auto model = LoadModel("kimi-k3-like");
  auto preset = LoadEngine("kimi-k3-dspark");
  EXPECT_TRUE(model.ok() && preset.ok());
  if (!speculative) preset->speculative = SpeculativeConfig{};
  preset->speculative.disable_eagle_block_drop = disable_drop;
  auto plan = ResolveKvPlan(*model, *preset, policy);
  EXPECT_TRUE(plan.ok()) << plan.status();
  KimiCase c{plan.ok() ? *plan : KvPlan{}, SmallEngine(8192)};
  c.plan.num_blocks = num_blocks;
  c.engine.speculative = preset->speculative;
  c.engine.mamba_cache_mode = preset->mamba_cache_mode;
  return c;
}

// The rule 1 case on Kimi-K3-like + DSpark, 900 blocks: r0 = P, r1 = P + 10 tokens. Under
// `new` (S = 1536), P = 3 blocks + 100 tokens: r0 leaves states and blocks through 4,608; the drop
// needs the block past the hit cached too, so r1 hits 3,072 (4,608 with
// speculative.disable_eagle_block_drop). Under `old` (S = 13,824), P = 9 blocks + 100 tokens: r0's
// prefill stops at its last cacheable mamba position, 13,824 (8,192-token budget: chunks end at
// 7,680, then 13,824), so without the drop r1 hits 13,824 and with it 0.
TEST(SpeculativeKvTest, DsparkDropsTheLastMatchedBlock) {
  struct Case {
    const char* policy;
    int prompt;
    int64_t with_drop, without_drop;
  };
  for (const Case& c :
       {Case{"new", 3 * 1536 + 100, 3072, 4608}, Case{"old", 9 * 1536 + 100, 0, 13824}}) {
    SCOPED_TRACE(c.policy);
    const std::vector<uint32_t> p = Iota(c.prompt, 1);
    const std::vector<Request> reqs = {Req(0, 0, p, 1),
                                       Req(1, kApartMs, Concat(p, Iota(10, 900000)), 1)};
    for (bool disable : {false, true}) {
      const KimiCase k = Kimi(c.policy, 900, /*speculative=*/true, disable);
      EXPECT_EQ(MustReplay(k.plan, k.engine, reqs).per_request[1].hit_tokens,
                disable ? c.without_drop : c.with_drop)
          << "disable_eagle_block_drop " << disable;
    }
  }
}

// A shared 20,000-token document, then three questions about it (1000 s apart), on the
// Kimi-K3-like + DSpark plan. `new` (S = 1536): r0's prefill (8,192-token budget) stops at its last
// cacheable mamba position, the prompt floored to the block (19,968) less the one block the EAGLE
// drop steps back (18,432), and its chunks end there: r1 and r2 hit 18,432 (19,968 without the
// drop). `old` (S = 13,824): no chunk of r0 ends on 13,824 (they end at 7,680, 15,360 and 18,432),
// so r1 hits nothing; r1's lookup found full attention cached past 13,824, so its prefill stops at
// that junction and caches the state there, and r2 hits 13,824.
TEST(SpeculativeKvTest, KimiSharedPrefixOldAndNew) {
  const std::vector<uint32_t> doc = Iota(20000, 1);
  std::vector<Request> reqs;
  for (int i = 0; i < 3; ++i) {
    reqs.push_back(Req(i, i * kApartMs, Concat(doc, Iota(50, 1000000 + 100 * i)), 1));
  }
  struct Case {
    const char* policy;
    bool disable;
    int64_t r1, r2;
  };
  for (const Case& c : {Case{"new", false, 18432, 18432}, Case{"new", true, 19968, 19968},
                        Case{"old", false, 0, 13824}}) {
    SCOPED_TRACE(std::string(c.policy) + (c.disable ? " without the drop" : ""));
    const KimiCase k = Kimi(c.policy, 2000, /*speculative=*/true, c.disable);
    const ReplayResult r = MustReplay(k.plan, k.engine, reqs);
    EXPECT_EQ(r.per_request[0].hit_tokens, 0);
    EXPECT_EQ(r.per_request[1].hit_tokens, c.r1);
    EXPECT_EQ(r.per_request[2].hit_tokens, c.r2);
  }
}

// Capacity: on the Kimi-K3-like + DSpark plan (14 mamba groups, k = 3) a request holds 14 x (1 +
// 3) = 56 mamba blocks after its first allocation, where one state block per group (the former
// model) held 14; the plan's per-request bound counts 2 + k per mamba group.
TEST(SpeculativeKvTest, KimiRequestHoldsOnePlusKStateBlocksPerMambaGroup) {
  const KimiCase c = Kimi("new", 2000);
  int mamba_groups = 0;
  for (const KvGroup& g : c.plan.groups) {
    if (g.kind != LayerKind::kMamba) continue;
    ++mamba_groups;
    EXPECT_EQ(g.num_speculative_blocks, 3);
  }
  ASSERT_EQ(mamba_groups, 14);
  KvPlan one_state = c.plan;
  for (KvGroup& g : one_state.groups) g.num_speculative_blocks = 0;
  for (const KvPlan* plan : std::vector<const KvPlan*>{&c.plan, &one_state}) {
    KvCacheManager kv(*plan, Checked());
    const Request r = Literal(1, Iota(4000), 16);
    const KvRequestHandle h = kv.AddRequest(&r);
    kv.GetComputedBlocks(h);
    ASSERT_TRUE(kv.AllocateSlots(h, 0, 3072, 0, 3));
    EXPECT_EQ(MambaBlocksHeld(kv, 1), plan == &c.plan ? 56 : 14);
  }
  // The bound: 2 + k per mamba group where one state block per group made it 2, 42 blocks more.
  const int64_t bound = c.plan.blocks_per_max_len_request;
  int64_t one_state_bound = 0;
  for (const KvGroup& g : one_state.groups) {
    if (g.kind == LayerKind::kMamba) one_state_bound += 2;
  }
  int64_t mamba_bound = 0;
  for (const KvGroup& g : c.plan.groups) {
    if (g.kind == LayerKind::kMamba) mamba_bound += 2 + g.num_speculative_blocks;
  }
  EXPECT_EQ(mamba_bound - one_state_bound, 42);
  EXPECT_GT(bound, mamba_bound);
}

}  // namespace
}  // namespace prefixsim
