// Golden end-to-end replays of small hand-built traces: exact hits, preemptions, step counts and
// times, derived by hand from the reference semantics cited in each test.
#include <gtest/gtest.h>

#include "sim/report/report.h"
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
using testing_kv::Unitary;

constexpr int64_t kMs = 1'000'000;

// docs/semantics.md §9.1, §10.2, §12: a finished request's full blocks are cached; a later
// identical prompt hits them up to max_hit = L - 1 rounded down to the block; queries = prompt
// length.
TEST(EngineGoldenTest, SecondIdenticalPromptHitsFullBlocks) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 64);
  const ReplayResult r =
      MustReplay(plan, SmallEngine(64), {Req(0, 0, Iota(40), 3), Req(1, 10, Iota(40), 2)});
  // A: prefill (1 ms) + 2 decode steps; B at 10 ms: prefill of 40 - 32 tokens + 1 decode step.
  EXPECT_EQ(r.num_steps, 5);
  EXPECT_EQ(r.finished_requests, 2);
  EXPECT_EQ(r.prefix_cache.requests, 2);
  EXPECT_EQ(r.prefix_cache.queries, 80);
  EXPECT_EQ(r.prefix_cache.hits, 32);
  EXPECT_DOUBLE_EQ(r.prefix_cache.hit_rate(), 0.4);
  EXPECT_EQ(r.alignment_loss_tokens, 0);
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_EQ(r.computed_tokens, 40 + 1 + 1 + 8 + 1);
  EXPECT_EQ(r.prompt_tokens, 80);
  EXPECT_EQ(r.output_tokens, 5);
  EXPECT_EQ(r.sim_time_ns, 12 * kMs);
  ASSERT_EQ(r.per_request.size(), 2u);
  EXPECT_EQ(r.per_request[0].first_token_ns, 1 * kMs);
  EXPECT_EQ(r.per_request[0].finish_ns, 3 * kMs);
  EXPECT_EQ(r.per_request[0].hit_tokens, 0);
  EXPECT_EQ(r.per_request[1].first_token_ns, 11 * kMs);
  EXPECT_EQ(r.per_request[1].finish_ns, 12 * kMs);
  EXPECT_EQ(r.per_request[1].hit_tokens, 32);
  EXPECT_DOUBLE_EQ(r.ttft.mean_ms, 1.0);
  EXPECT_DOUBLE_EQ(r.e2e.mean_ms, 2.5);
  EXPECT_DOUBLE_EQ(r.tpot.mean_ms, 1.0);
}

// docs/semantics.md §11 (recompute preemption: the last running request is freed, reset to 0 and
// put at the front of the waiting queue; nothing is admitted in a step that preempted), §8.2
// (eviction from the head of the free queue, freed tail first, unhashed blocks prepended), §12 (a
// preempted re-admission goes to the preempted_* fields). 6 usable blocks of 4 tokens; two 8-token
// prompts with 8 outputs each, both at t = 0.
//  step 1: both prefill (2 + 2 blocks); steps 2-5: decode up to 12 tokens (3 blocks each, 0 free).
//  step 6: A needs a 4th block for token 13: B (13 tokens, 3 blocks) is preempted; A takes B's
//          tail block (evicting its hash). steps 7-8: B's lookup hits 8 of 13 tokens but needs
//          4 blocks with 2 free, so it waits; A finishes in step 8 (1 prefill + 7 decode steps).
//  step 9: B re-admitted (hit 8), prefill 5 tokens → its 6th output; allocating its 2 new blocks
//          takes A's unhashed tail block and evicts A's third block. steps 10-11 decode.
TEST(EngineGoldenTest, RecomputePreemptionAndReadmission) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 7);
  const ReplayResult r =
      MustReplay(plan, SmallEngine(64), {Req(0, 0, Iota(8, 1), 8), Req(1, 0, Iota(8, 1000), 8)});
  EXPECT_EQ(r.num_steps, 11);
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(r.evicted_blocks, 2);
  EXPECT_EQ(r.prefix_cache.requests, 2);
  EXPECT_EQ(r.prefix_cache.queries, 16);
  EXPECT_EQ(r.prefix_cache.hits, 0);
  EXPECT_EQ(r.prefix_cache.preempted_requests, 1);
  EXPECT_EQ(r.prefix_cache.preempted_queries, 13);
  EXPECT_EQ(r.prefix_cache.preempted_hits, 8);
  ASSERT_EQ(r.per_request.size(), 2u);
  EXPECT_EQ(r.per_request[0].finish_ns, 8 * kMs);
  EXPECT_EQ(r.per_request[0].preemptions, 0);
  EXPECT_EQ(r.per_request[1].first_token_ns, 1 * kMs);
  EXPECT_EQ(r.per_request[1].finish_ns, 11 * kMs);
  EXPECT_EQ(r.per_request[1].preemptions, 1);
  EXPECT_EQ(r.per_request[1].output_tokens, 8);
  // Computed: 16 (prefills) + 2 x 4 (steps 2-5) + 3 (A, steps 6-8) + 5 (B's re-prefill)
  // + 2 (B, steps 10-11).
  EXPECT_EQ(r.computed_tokens, 16 + 8 + 3 + 5 + 2);
}

// docs/semantics.md §11: chunked prefill under the token budget; long_prefill_token_threshold caps
// a chunk further.
TEST(EngineGoldenTest, ChunkedPrefillUnderBudgetAndThreshold) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 64);
  {
    const ReplayResult r = MustReplay(plan, SmallEngine(16), {Req(0, 0, Iota(40), 1)});
    EXPECT_EQ(r.num_steps, 3);  // 16 + 16 + 8
    EXPECT_EQ(r.per_request[0].first_token_ns, 3 * kMs);
  }
  {
    EngineConfig e = SmallEngine(64);
    e.long_prefill_token_threshold = 10;
    const ReplayResult r = MustReplay(plan, e, {Req(0, 0, Iota(40), 1)});
    EXPECT_EQ(r.num_steps, 4);  // 10 x 4
  }
  {
    // Running requests come first: B's prefill only gets what A's decode leaves of the budget.
    const ReplayResult r =
        MustReplay(plan, SmallEngine(16), {Req(0, 0, Iota(8), 4), Req(1, 1, Iota(31, 500), 1)});
    // step 1 (0-1 ms): A prefill 8. step 2: A decode 1 + B 15. step 3: A 1 + B 15. step 4: A 1 +
    // B 1.
    EXPECT_EQ(r.num_steps, 4);
    EXPECT_EQ(r.per_request[0].finish_ns, 4 * kMs);
    EXPECT_EQ(r.per_request[1].first_token_ns, 4 * kMs);
  }
}

// docs/semantics.md §11: max_num_seqs bounds the running set; the rest wait.
TEST(EngineGoldenTest, MaxNumSeqsQueuesTheRest) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 64);
  EngineConfig e = SmallEngine(256);
  e.max_num_seqs = 1;
  const ReplayResult r = MustReplay(plan, e, {Req(0, 0, Iota(10), 2), Req(1, 0, Iota(10, 99), 2)});
  EXPECT_EQ(r.num_steps, 4);
  EXPECT_EQ(r.max_running, 1);
  EXPECT_EQ(r.per_request[0].finish_ns, 2 * kMs);
  EXPECT_EQ(r.per_request[1].first_token_ns, 3 * kMs);
}

// docs/semantics.md §11 "Speculative decoding": drafts are verified 1 + k at a time, accepted ones
// extend the output; per-request accepted lengths from the trace take precedence.
TEST(EngineGoldenTest, SpeculativeDecodingStepsAndStats) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 16, 64);
  EngineConfig e = SmallEngine(64);
  e.speculative.enabled = true;
  e.speculative.method = "eagle";
  e.speculative.num_speculative_tokens = 3;
  e.speculative.acceptance.model = "geometric";
  {
    e.speculative.acceptance.rates = {1.0};
    const ReplayResult r = MustReplay(plan, e, {Req(0, 0, Iota(20), 9)});
    EXPECT_EQ(r.num_steps, 3);  // prefill → 1 token; two verifications of 1 + 3 → 4 tokens each
    EXPECT_EQ(r.spec_decode.num_drafts, 2);
    EXPECT_EQ(r.spec_decode.draft_tokens, 6);
    EXPECT_EQ(r.spec_decode.accepted_tokens, 6);
    EXPECT_DOUBLE_EQ(r.spec_decode.mean_acceptance_length(), 4.0);
    EXPECT_EQ(r.spec_decode.accepted_per_position, (std::vector<int64_t>{2, 2, 2}));
    EXPECT_EQ(r.output_tokens, 9);
    EXPECT_EQ(r.computed_tokens, 20 + 4 + 4);
  }
  {
    e.speculative.acceptance.rates = {0.0};
    const ReplayResult r = MustReplay(plan, e, {Req(0, 0, Iota(20), 9)});
    EXPECT_EQ(r.num_steps, 9);
    EXPECT_EQ(r.spec_decode.draft_tokens, 24);
    EXPECT_EQ(r.spec_decode.accepted_tokens, 0);
    EXPECT_DOUBLE_EQ(r.spec_decode.mean_acceptance_length(), 1.0);
  }
  {
    e.speculative.acceptance.rates = {0.0};
    Request q = Req(0, 0, Iota(20), 8);
    q.accepted_lengths = {2, 0, 3};
    const ReplayResult r = MustReplay(plan, e, {q});
    // 1 (prefill) → +3 → +1 → +4 capped at 8 outputs.
    EXPECT_EQ(r.num_steps, 4);
    EXPECT_EQ(r.spec_decode.accepted_tokens, 5);
    EXPECT_EQ(r.output_tokens, 8);
  }
}

// docs/semantics.md §11: a request reserves k lookahead slots per step, a fresh prefill too (vLLM
// since PR #43733). 3 usable blocks of 4 tokens, prompt 8, k = 3: the prefill takes 8 + 3 = 11
// slots (3 blocks) and samples token 9; the decode step needs 8 + 4 + 3 = 15 slots (4 blocks), so
// the request preempts itself and is re-admitted at once: it hits its 8 cached prompt tokens,
// computes token 9 with 3 lookahead slots (12: 3 blocks) and samples token 10 (step 2). Its next
// decode preempts it again, and the re-admission now needs 8 + 2 + 3 = 13 slots, 4 blocks, more
// than the whole pool: with nothing running it can never be served and is skipped (does_not_fit).
// Without speculation it never preempts.
TEST(EngineGoldenTest, LookaheadSlotsCanForcePreemption) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 4);
  EngineConfig e = SmallEngine(64);
  const ReplayResult plain = MustReplay(plan, e, {Req(0, 0, Iota(8), 3)});
  EXPECT_EQ(plain.num_steps, 3);
  EXPECT_EQ(plain.preemptions, 0);
  e.speculative.enabled = true;
  e.speculative.method = "eagle";
  e.speculative.num_speculative_tokens = 3;
  e.speculative.acceptance.model = "geometric";
  e.speculative.acceptance.rates = {0.0};
  const ReplayResult r = MustReplay(plan, e, {Req(0, 0, Iota(8), 3)});
  EXPECT_EQ(r.num_steps, 2);
  EXPECT_EQ(r.preemptions, 2);
  EXPECT_EQ(r.skipped_does_not_fit, 1);
  EXPECT_EQ(r.prefix_cache.requests, 1);
  EXPECT_EQ(r.prefix_cache.queries, 8);
  EXPECT_EQ(r.prefix_cache.preempted_requests, 1);  // the admission that fit
  EXPECT_EQ(r.prefix_cache.preempted_queries, 9);
  EXPECT_EQ(r.prefix_cache.preempted_hits, 8);
  EXPECT_EQ(r.spec_decode.draft_tokens, 0);  // no verification step ever ran
  EXPECT_EQ(r.per_request[0].finish_ns, -1);
  // ngram-style methods reserve no lookahead, but the 1 + 3 verified tokens still need slots:
  // the first decode step fits (8 + 4 = 12 slots, 3 blocks), the second (9 + 4 = 13) does not.
  e.speculative.method = "ngram";
  const ReplayResult ngram = MustReplay(plan, e, {Req(0, 0, Iota(8), 3)});
  EXPECT_EQ(ngram.preemptions, 1);
  EXPECT_EQ(ngram.spec_decode.draft_tokens, 3);
}

// Drafts are never cached (docs/semantics.md §10.2): with every draft accepted, what is cached is
// what was verified, so a follow-up whose prompt is the first one hits the same as without spec.
TEST(EngineGoldenTest, DraftsDoNotChangeWhatIsCached) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 64);
  EngineConfig e = SmallEngine(64);
  const std::vector<Request> reqs = {Req(0, 0, Iota(10), 6), Req(1, 50, Iota(10), 1)};
  const ReplayResult plain = MustReplay(plan, e, reqs);
  e.speculative.enabled = true;
  e.speculative.method = "eagle";
  e.speculative.num_speculative_tokens = 3;
  e.speculative.acceptance.model = "geometric";
  e.speculative.acceptance.rates = {1.0};
  const ReplayResult spec = MustReplay(plan, e, reqs);
  EXPECT_EQ(plain.prefix_cache.hits, 8);
  EXPECT_EQ(spec.prefix_cache.hits, 8);
  EXPECT_LT(spec.num_steps, plain.num_steps);
}

// docs/semantics.md §11 / vLLM _mamba_block_aligned_split: prefill chunks end on mamba block
// boundaries or at the last cacheable position. Prompt 20, mamba block 8, budget 12: 8 + 8 + 4 (not
// 12 + 8).
TEST(EngineGoldenTest, MambaAlignedPrefillSplit) {
  const KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kMamba, 8)}, 64, 8, 8, 8);
  EngineConfig e = SmallEngine(12);
  e.mamba_cache_mode = MambaCacheMode::kAlign;
  const ReplayResult r = MustReplay(plan, e, {Req(0, 0, Iota(20), 1)});
  EXPECT_EQ(r.num_steps, 3);
  EXPECT_EQ(r.computed_tokens, 20);
  e.mamba_cache_mode = MambaCacheMode::kNone;
  const ReplayResult unaligned = MustReplay(plan, e, {Req(0, 0, Iota(20), 1)});
  EXPECT_EQ(unaligned.num_steps, 2);
}

// A mamba block wider than the token budget is crossed in sub-block chunks that re-align at the
// next boundary (vLLM's _mamba_block_aligned_split, docs/semantics.md): prompt 20, block 8,
// budget 4 runs five chunks of 4, not a stall.
TEST(EngineGoldenTest, MambaBlockWiderThanTheBudgetIsCrossedInSubBlockChunks) {
  const KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kMamba, 8)}, 64, 8, 8, 8);
  EngineConfig e = SmallEngine(4);
  e.mamba_cache_mode = MambaCacheMode::kAlign;
  const ReplayResult r = MustReplay(plan, e, {Req(0, 0, Iota(20), 1)});
  EXPECT_EQ(r.finished_requests, 1);
  EXPECT_EQ(r.num_steps, 5);
  EXPECT_EQ(r.computed_tokens, 20);
}

// Requests the engine can never serve are skipped and counted; the rest are served.
TEST(EngineGoldenTest, SkipsPromptsTooLongAndRequestsThatCannotFit) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 5);  // 4 usable blocks = 16 tokens
  EngineConfig e = SmallEngine(64);
  e.max_model_len = 30;
  const ReplayResult r = MustReplay(
      plan, e, {Req(0, 0, Iota(30), 1), Req(1, 0, Iota(20), 1), Req(2, 0, Iota(8, 100), 2)});
  EXPECT_EQ(r.requests, 3);
  EXPECT_EQ(r.skipped_prompt_too_long, 1);
  EXPECT_EQ(r.skipped_does_not_fit, 1);
  EXPECT_EQ(r.finished_requests, 1);
  EXPECT_EQ(r.per_request[0].skipped, "prompt_too_long");
  EXPECT_EQ(r.per_request[1].skipped, "does_not_fit");
  EXPECT_EQ(r.per_request[2].skipped, "");
  EXPECT_EQ(r.per_request[2].output_tokens, 2);
}

// docs/design.md §5: the same inputs and seed give byte-identical reports (wall time omitted).
TEST(EngineGoldenTest, DeterministicReports) {
  const KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 20);
  EngineConfig e = SmallEngine(32);
  e.speculative.enabled = true;
  e.speculative.method = "eagle";
  e.speculative.num_speculative_tokens = 2;
  e.speculative.acceptance.model = "geometric";
  e.speculative.acceptance.rates = {0.5};
  std::vector<Request> reqs;
  for (int i = 0; i < 30; ++i) {
    reqs.push_back(Req(i, i * 0.5, Concat(Iota(12), Iota(4 + i % 7, 100 * i)), 5 + i % 9));
  }
  ReportOptions ro;
  ro.include_wall_time = false;
  const std::string a = ReplayResultToJson(MustReplay(plan, e, reqs, 7), ro).dump();
  const std::string b = ReplayResultToJson(MustReplay(plan, e, reqs, 7), ro).dump();
  const std::string c = ReplayResultToJson(MustReplay(plan, e, reqs, 8), ro).dump();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);  // the acceptance draws differ
  EXPECT_EQ(a.find("wall_time_s"), std::string::npos);
}

}  // namespace
}  // namespace prefixsim
