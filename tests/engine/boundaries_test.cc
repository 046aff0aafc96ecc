// Exact boundaries of the engine's limits, and the preempted-admission figures of a run that
// preempts, checked against independent counts (issue 33, areas 2 and 3; docs/semantics.md §2.3,
// §11, §12).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "prefixsim/engine.h"
#include "tests/engine/engine_test_util.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using testing_engine::MustReplay;
using testing_engine::Req;
using testing_engine::SmallEngine;
using testing_kv::Iota;
using testing_kv::Unitary;

KvPlan FullPlan(int64_t num_blocks = 256) {
  return Unitary(LayerKind::kFullAttention, 16, num_blocks);
}

// docs/semantics.md §2.3 / §11: a prompt of exactly max_model_len leaves no room for an output
// token and is rejected; one token shorter is served with its single output token.
TEST(BoundariesTest, PromptOfExactlyMaxModelLenIsRejected) {
  EngineConfig e = SmallEngine(256);
  e.max_model_len = 64;
  ReplayResult r = MustReplay(FullPlan(), e, {Req(0, 0, Iota(64), 8)});
  EXPECT_EQ(r.skipped_prompt_too_long, 1);
  EXPECT_EQ(r.finished_requests, 0);
  ASSERT_EQ(r.per_request.size(), 1u);
  EXPECT_EQ(r.per_request[0].skipped, "prompt_too_long");
  r = MustReplay(FullPlan(), e, {Req(0, 0, Iota(63), 8)});
  EXPECT_EQ(r.skipped_prompt_too_long, 0);
  EXPECT_EQ(r.finished_requests, 1);
  EXPECT_EQ(r.output_tokens, 1);
}

// docs/semantics.md §11: the sequence stops at max_model_len. A prompt plus output reaching it
// exactly generates every output token; one more output token is cut.
TEST(BoundariesTest, PromptPlusOutputReachingMaxModelLen) {
  EngineConfig e = SmallEngine(256);
  e.max_model_len = 64;
  ReplayResult r = MustReplay(FullPlan(), e, {Req(0, 0, Iota(48), 16)});
  EXPECT_EQ(r.finished_requests, 1);
  EXPECT_EQ(r.output_tokens, 16);
  // Prefill 48, then one token per step; the last sampled token is never run through the model.
  EXPECT_EQ(r.computed_tokens, 63);
  r = MustReplay(FullPlan(), e, {Req(0, 0, Iota(48), 17)});
  EXPECT_EQ(r.output_tokens, 16);
  EXPECT_EQ(r.computed_tokens, 63);
}

// docs/semantics.md §11: a running request is scheduled at most up to max_model_len - 1 computed
// tokens, drafts included. k = 3 drafts, all accepted, prompt 48 + 16 outputs = max_model_len 64:
// prefill 48 (token 1), three verifications of 1 + 3 (tokens 2..13, computed 60), then the cap
// leaves 3 (1 + 2 drafts: tokens 14..16), 63 computed in all.
TEST(BoundariesTest, DraftsStopAtMaxModelLenMinusOne) {
  EngineConfig e = SmallEngine(256);
  e.max_model_len = 64;
  e.speculative.enabled = true;
  e.speculative.method = "eagle";
  e.speculative.num_speculative_tokens = 3;
  e.speculative.acceptance.model = "geometric";
  e.speculative.acceptance.rates = {1.0};
  const ReplayResult r = MustReplay(FullPlan(), e, {Req(0, 0, Iota(48), 16)});
  EXPECT_EQ(r.finished_requests, 1);
  EXPECT_EQ(r.output_tokens, 16);
  EXPECT_EQ(r.computed_tokens, 63);
  EXPECT_EQ(r.spec_decode.draft_tokens, 3 + 3 + 3 + 2);
  EXPECT_EQ(r.num_steps, 5);
}

// docs/semantics.md §11: without chunked prefill a prompt is admitted only whole; one exactly
// equal to the token budget fits.
TEST(BoundariesTest, UnchunkedPromptEqualToTheBudgetIsAdmitted) {
  EngineConfig e = SmallEngine(64);
  e.enable_chunked_prefill = false;
  const ReplayResult r = MustReplay(FullPlan(), e, {Req(0, 0, Iota(64), 2)});
  EXPECT_EQ(r.finished_requests, 1);
  EXPECT_EQ(r.output_tokens, 2);
  // The whole prompt in the first step, one decode step after it.
  EXPECT_EQ(r.num_steps, 2);
}

// docs/semantics.md §11: at most max_num_seqs requests run at once; exactly max_num_seqs do when
// that many are waiting.
TEST(BoundariesTest, MaxNumSeqsReachedExactly) {
  EngineConfig e = SmallEngine(1024);
  e.max_num_seqs = 4;
  std::vector<Request> four, five;
  for (int i = 0; i < 5; ++i) {
    Request q = Req(i, 0, Iota(16, 1000 * i + 1), 8);
    if (i < 4) four.push_back(q);
    five.push_back(q);
  }
  ReplayResult r = MustReplay(FullPlan(), e, four);
  EXPECT_EQ(r.max_running, 4);
  EXPECT_EQ(r.finished_requests, 4);
  r = MustReplay(FullPlan(), e, five);
  EXPECT_EQ(r.max_running, 4);
  EXPECT_EQ(r.finished_requests, 5);
  // The fifth waits for a slot: its first token comes after the first four finish.
  ASSERT_EQ(r.per_request.size(), 5u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_GE(r.per_request[4].first_token_ns, r.per_request[i].finish_ns);
  }
}

// docs/semantics.md §11 (recompute preemption) and §12 (a re-admission of a preempted request
// counts in the preempted_* fields, with num_tokens queried). Four 32-token prompts growing to 72
// tokens each in a pool of 8 usable 16-token blocks must preempt. Independent counts from the
// per-request records: every preemption of a finished request is one re-admission, first
// admissions are one per request, and a re-admission queries the prompt plus the outputs so far.
TEST(PreemptionReportTest, PreemptedFiguresMatchTheRequestRecords) {
  EngineConfig e = SmallEngine(1024);
  std::vector<Request> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(Req(i, 0, Iota(32, 1000 * i + 1), 40));
  const ReplayResult r = MustReplay(FullPlan(/*num_blocks=*/9), e, requests);
  ASSERT_EQ(r.finished_requests, 4);
  ASSERT_GT(r.preemptions, 0);
  int64_t preemptions = 0, min_queries = 0, max_queries = 0;
  for (const RequestRecord& rec : r.per_request) {
    EXPECT_EQ(rec.skipped, "");
    preemptions += rec.preemptions;
    min_queries += rec.preemptions * rec.prompt_tokens;
    max_queries += rec.preemptions * (rec.prompt_tokens + rec.output_tokens - 1);
  }
  EXPECT_EQ(r.preemptions, preemptions);
  EXPECT_EQ(r.prefix_cache.requests, 4);
  EXPECT_EQ(r.prefix_cache.queries, 4 * 32);
  EXPECT_EQ(r.prefix_cache.preempted_requests, preemptions);
  EXPECT_GE(r.prefix_cache.preempted_queries, min_queries);
  EXPECT_LE(r.prefix_cache.preempted_queries, max_queries);
  EXPECT_LE(r.prefix_cache.preempted_hits, r.prefix_cache.preempted_queries);
}

}  // namespace
}  // namespace prefixsim
