// vLLM's admission rules as its scheduler has them today, end to end on the minimal cases
// (docs/semantics.md §10.1, §11, §11.1): the full-sequence gate (scheduler_reserve_full_isl),
// lookahead slots for a fresh prefill, mamba's refusal of a state cached in the same step, and the
// mamba-aligned split of vLLM PR #51113. Every step takes 1 ms (SmallEngine).
#include <gtest/gtest.h>

#include <vector>

#include "prefixsim/engine_config.h"
#include "tests/engine/engine_test_util.h"

namespace prefixsim {
namespace {

using testing_engine::MustReplay;
using testing_engine::Req;
using testing_engine::SmallEngine;
using testing_kv::Concat;
using testing_kv::Group;
using testing_kv::Iota;
using testing_kv::Plan;
using testing_kv::Unitary;

constexpr int64_t kMs = 1'000'000;

// Block 16, 8 usable blocks, a 16-token budget. r0 = 16 prompt tokens and 60 outputs; r1 = 112
// prompt tokens (7 blocks), both at 0. r0 prefills in step 1 and holds 2 blocks from step 2 on, 5
// at its end (76 tokens), so r1's whole sequence never fits beside it: vLLM keeps r1 waiting until
// r0 finishes and preempts nothing. Without the gate r1 is admitted in step 2, chunk by chunk, and
// r0's growth preempts it.
TEST(AdmissionRulesTest, FullSequenceGateKeepsARequestWaitingInsteadOfThrashing) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 9);
  const std::vector<Request> reqs = {Req(0, 0, Iota(16), 60), Req(1, 0, Iota(112, 1000), 1)};
  EngineConfig e = SmallEngine(16);
  const ReplayResult gated = MustReplay(plan, e, reqs);
  EXPECT_EQ(gated.preemptions, 0);
  EXPECT_EQ(gated.finished_requests, 2);
  // r0: prefill in step 1, then one output per step: done in step 60. r1 then prefills 112
  // tokens in 7 steps of 16 and samples its one output in the last: done in step 67.
  EXPECT_EQ(gated.per_request[0].finish_ns, 60 * kMs);
  EXPECT_EQ(gated.per_request[1].finish_ns, 67 * kMs);
  e.scheduler_reserve_full_isl = false;
  const ReplayResult ungated = MustReplay(plan, e, reqs);
  EXPECT_GT(ungated.preemptions, 0);
  EXPECT_EQ(ungated.finished_requests, 2);
}

// draft_model with k = 3, 3 usable blocks of 16: r0 = 32 prompt tokens and 1 output, r1 = 16, both
// at 0. r0's prefill reserves 32 + 3 slots, all 3 blocks, so r1 (16 + 3 slots) waits for r0 to
// finish in step 1 and runs in step 2. Without lookahead for a fresh prefill (vLLM before PR
// #43733) r0 took 2 blocks and both ran in step 1.
TEST(AdmissionRulesTest, AFreshPrefillReservesLookaheadSlots) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 4);
  EngineConfig e = SmallEngine(8192);
  e.speculative.enabled = true;
  e.speculative.method = "draft_model";
  e.speculative.num_speculative_tokens = 3;
  e.speculative.acceptance.model = "geometric";
  e.speculative.acceptance.rates = {0.5};
  const ReplayResult r = MustReplay(plan, e, {Req(0, 0, Iota(32), 1), Req(1, 0, Iota(16, 500), 1)});
  EXPECT_EQ(r.per_request[0].finish_ns, 1 * kMs);
  EXPECT_EQ(r.per_request[1].first_token_ns, 2 * kMs);
  EXPECT_EQ(r.per_request[1].finish_ns, 2 * kMs);
}

// Block 32, full attention + mamba: r0 = P (70 tokens) and r1 = P[:64] + 17 new tokens, both at 0,
// one output each. Step 1: r0 prefills to its last cacheable position, 64, and caches the state
// there; r1's lookup finds it (a 64-token hit) but it was cached in this very step, so mamba
// refuses it and r1 waits (MambaManager.get_num_blocks_to_allocate). Step 2: r0 computes its
// last 6 tokens, r1 its 17: both finish in step 2, r1 with the 64-token hit.
TEST(AdmissionRulesTest, MambaRefusesAStateCachedInTheSameStep) {
  const KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 32), Group(LayerKind::kMamba, 32)}, 64, 32, 32, 32);
  EngineConfig e = SmallEngine(8192);
  e.mamba_cache_mode = MambaCacheMode::kAlign;
  const std::vector<uint32_t> p = Iota(70);
  const ReplayResult r = MustReplay(
      plan, e,
      {Req(0, 0, p, 1),
       Req(1, 0, Concat(std::vector<uint32_t>(p.begin(), p.begin() + 64), Iota(17, 9000)), 1)});
  EXPECT_EQ(r.per_request[0].finish_ns, 2 * kMs);
  EXPECT_EQ(r.per_request[1].finish_ns, 2 * kMs);
  EXPECT_EQ(r.per_request[1].hit_tokens, 64);
  EXPECT_EQ(r.num_steps, 2);
}

// The mamba-aligned split as vLLM PR #51113 has it (docs/semantics.md §11.1): a chunk that does not
// finish the prefill is rounded down to a block boundary even past the last cacheable position.
// Block 32, budget 100, r0 = 78, r1 = 164, r2 = 24 tokens at 0 with one output each. Step 1: r0
// stops at its last cacheable position 64, r1 gets 36 rounded down to 32, and r2's 4 leftover
// tokens round down to 0, so it waits. Step 2: r0's last 14, r1 64 (to 96), r2's 22 again round to
// 0. Step 3: r1 stops at 160, r2 prefills its 24 and finishes. (Before #51113 the rounding applied
// only below the last cacheable position, and r2 took its 4 tokens in step 1.)
TEST(AdmissionRulesTest, MambaSplitRoundsChunksPastTheLastCacheablePosition) {
  const KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 32), Group(LayerKind::kMamba, 32)}, 200, 32, 32, 32);
  EngineConfig e = SmallEngine(100);
  e.mamba_cache_mode = MambaCacheMode::kAlign;
  const ReplayResult r = MustReplay(
      plan, e,
      {Req(0, 0, Iota(78), 1), Req(1, 0, Iota(164, 1000), 1), Req(2, 0, Iota(24, 5000), 1)});
  EXPECT_EQ(r.per_request[0].finish_ns, 2 * kMs);
  EXPECT_EQ(r.per_request[2].first_token_ns, 3 * kMs);
  EXPECT_EQ(r.per_request[2].finish_ns, 3 * kMs);
}

}  // namespace
}  // namespace prefixsim
