// The shared-prefix junction stop end to end (docs/semantics.md §11.2 "Junction stop", §9.3; vLLM
// HybridKVCacheCoordinator.find_longest_cache_hit -> num_uncached_common_prefix_tokens,
// KVCacheManager.get_computed_blocks -> shared_prefix_boundary,
// Scheduler._mamba_block_aligned_split): when full attention is cached further than any mamba
// state, the prefill stops at the junction so that the state there is cached and the next request
// sharing the prefix hits it.
#include <gtest/gtest.h>

#include "prefixsim/engine_config.h"
#include "prefixsim/model.h"
#include "prefixsim/policy.h"
#include "prefixsim/replay.h"
#include "tests/engine/engine_test_util.h"

namespace prefixsim {
namespace {

using testing_engine::MustReplay;
using testing_engine::Req;
using testing_engine::SmallEngine;
using testing_engine::VectorTrace;
using testing_kv::Concat;
using testing_kv::Group;
using testing_kv::Iota;
using testing_kv::Plan;

constexpr double kApartMs = 1e6;  // 1000 s between arrivals: every request runs alone

KvPlan FullPlusMamba(int64_t num_blocks, int64_t block = 32) {
  return Plan({Group(LayerKind::kFullAttention, block), Group(LayerKind::kMamba, block)},
              num_blocks, block, block, block);
}

EngineConfig AlignEngine(int64_t budget) {
  EngineConfig e = SmallEngine(budget);
  e.mamba_cache_mode = MambaCacheMode::kAlign;
  return e;
}

// The minimal case. r0 = P (100 tokens) prefills 96 + 4, leaving full-attention blocks for
// P[:96] and one mamba state at 96. r1 = P[:64] + 40 new: full attention hits 64, mamba nothing,
// so the hit is 0 with the junction at 64; r1 prefills 64, 32, 8 and caches the state at 64.
// r2 = P[:64] + 40 other tokens hits 64 and prefills 32, 8.
TEST(JunctionStopTest, SiblingHitsTheJunctionState) {
  const std::vector<uint32_t> p = Iota(100);
  const std::vector<uint32_t> prefix(p.begin(), p.begin() + 64);
  const ReplayResult r =
      MustReplay(FullPlusMamba(64), AlignEngine(8192),
                 {Req(0, 0, p, 1), Req(1, kApartMs, Concat(prefix, Iota(40, 1000)), 1),
                  Req(2, 2 * kApartMs, Concat(prefix, Iota(40, 2000)), 1)});
  ASSERT_EQ(r.per_request.size(), 3u);
  EXPECT_EQ(r.per_request[0].hit_tokens, 0);
  EXPECT_EQ(r.per_request[1].hit_tokens, 0);
  EXPECT_EQ(r.per_request[2].hit_tokens, 64);
  // Prefill steps: 2 (96, 4) + 3 (64, 32, 8) + 2 (32, 8); one output token each ends at prefill.
  EXPECT_EQ(r.num_steps, 7);
  EXPECT_EQ(r.prefix_cache.hits, 64);
}

// A junction that falls inside the first block of the chunk has no state of its own (it is
// floored to a block): no stop, and the sibling misses. Full attention block 16, mamba block 32,
// so H = A = 16 (partial hits) and full attention can share 16 tokens while mamba cannot.
TEST(JunctionStopTest, JunctionInsideTheFirstBlockMakesNoStop) {
  KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 16), Group(LayerKind::kMamba, 32)}, 64, 32, 16, 16);
  plan.partial_hits = true;
  const std::vector<uint32_t> p = Iota(100);
  const std::vector<uint32_t> prefix(p.begin(), p.begin() + 16);
  const ReplayResult r =
      MustReplay(plan, AlignEngine(8192),
                 {Req(0, 0, p, 1), Req(1, kApartMs, Concat(prefix, Iota(88, 1000)), 1),
                  Req(2, 2 * kApartMs, Concat(prefix, Iota(88, 2000)), 1)});
  EXPECT_EQ(r.per_request[1].hit_tokens, 0);
  EXPECT_EQ(r.per_request[2].hit_tokens, 0);
  // r0: 96 + 4; r1 and r2 (104 tokens each): 96 + 8, no stop at 16.
  EXPECT_EQ(r.num_steps, 6);
}

// Chunked prefill with a budget smaller than the junction. r0 = P (160 tokens) prefills in chunks
// of 64 and leaves states at 64, 128 and 160. r1 = P[:96] + 40 new: full attention hits 96, mamba
// 64, so r1 starts at 64 with the junction at 96: the budget of 64 would run to 128, the junction
// stops it at 96. r2 = P[:96] + 40 other tokens then hits 96 (64 without the stop).
TEST(JunctionStopTest, ChunkedPrefillStopsAtAJunctionBeyondTheFirstChunk) {
  const std::vector<uint32_t> p = Iota(160);
  const std::vector<uint32_t> prefix(p.begin(), p.begin() + 96);
  const ReplayResult r =
      MustReplay(FullPlusMamba(64), AlignEngine(64),
                 {Req(0, 0, p, 1), Req(1, kApartMs, Concat(prefix, Iota(40, 1000)), 1),
                  Req(2, 2 * kApartMs, Concat(prefix, Iota(40, 2000)), 1)});
  EXPECT_EQ(r.per_request[0].hit_tokens, 0);
  EXPECT_EQ(r.per_request[1].hit_tokens, 64);
  EXPECT_EQ(r.per_request[2].hit_tokens, 96);
}

// An evicted junction state is found again as a junction: the next request sharing the prefix
// stops there and caches it anew, and the one after hits it. Between r1 and r2 an unrelated
// request takes exactly the free blocks that hold no shared full-attention block, which evicts
// the junction state (freed early, when r1's mamba moved on) but keeps P[:64].
TEST(JunctionStopTest, EvictedJunctionStateIsCachedAgain) {
  const std::vector<uint32_t> p = Iota(100);
  const std::vector<uint32_t> prefix(p.begin(), p.begin() + 64);
  auto run = [&](int64_t filler_tokens) {
    return MustReplay(FullPlusMamba(16), AlignEngine(8192),
                      {Req(0, 0, p, 1), Req(1, kApartMs, Concat(prefix, Iota(40, 1000)), 1),
                       Req(2, 2 * kApartMs, Iota(static_cast<int>(filler_tokens), 5000), 1),
                       Req(3, 3 * kApartMs, Concat(prefix, Iota(40, 2000)), 1),
                       Req(4, 4 * kApartMs, Concat(prefix, Iota(40, 3000)), 1)});
  };
  bool found = false;
  for (int64_t filler = 32; filler <= 13 * 32 && !found; filler += 32) {
    const ReplayResult r = run(filler);
    if (r.per_request[3].hit_tokens == 0 && r.per_request[4].hit_tokens == 64) {
      found = true;
      EXPECT_GT(r.evicted_blocks, 0);
    }
  }
  EXPECT_TRUE(found) << "no filler size evicts the junction state but keeps the shared prefix";
  // Without the filler the junction state survives: r3 hits it.
  const ReplayResult kept =
      MustReplay(FullPlusMamba(16), AlignEngine(8192),
                 {Req(0, 0, p, 1), Req(1, kApartMs, Concat(prefix, Iota(40, 1000)), 1),
                  Req(3, 3 * kApartMs, Concat(prefix, Iota(40, 2000)), 1)});
  EXPECT_EQ(kept.per_request[2].hit_tokens, 64);
}

// The Kimi-K3-like plan with the DSpark drafter under PR #53007's policy (MLA, KDA states, the
// drafter's sliding window; docs/semantics.md §13 B; A = S = 1536): requests that share a
// 3,500-token system prompt and go on with 3,000 tokens of their own. The first prefills to 6,144
// (its last cacheable position), so its only KDA state lies past the shared part. The second finds
// two MLA blocks (3,072 tokens) but no KDA state there: its hit is 0 and it stops at the junction
// 3,072; every later request hits 3,072. Without the stop none of them would hit. The EAGLE drop
// is off (speculative.disable_eagle_block_drop): with it, the block past each hit must be cached
// too (speculative_kv_test.cc).
TEST(JunctionStopTest, KimiK3SharedSystemPrompt) {
  auto model = LoadModel("kimi-k3-like");
  ASSERT_TRUE(model.ok()) << model.status();
  auto engine = LoadEngine("kimi-k3-dspark");
  ASSERT_TRUE(engine.ok()) << engine.status();
  engine->speculative.disable_eagle_block_drop = true;
  auto plan = ResolveKvPlan(*model, *engine, "new");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->hit_alignment, 1536);
  engine->cost_model = SmallEngine(8192).cost_model;
  const std::vector<uint32_t> system = Iota(3500);
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) {
    reqs.push_back(Req(i, i * kApartMs, Concat(system, Iota(3000, 100000 * (i + 1))), 4));
  }
  VectorTrace trace(reqs);
  ReplayOptions options;
  options.check_invariants = true;
  auto r = Replay(*plan, *model, *engine, trace, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->per_request[0].hit_tokens, 0);
  EXPECT_EQ(r->per_request[1].hit_tokens, 0);
  EXPECT_EQ(r->per_request[2].hit_tokens, 3072);
  EXPECT_EQ(r->per_request[3].hit_tokens, 3072);
}

}  // namespace
}  // namespace prefixsim
