// The continuous-batching scheduler step by step (docs/semantics.md §11), driven by hand: the test
// plays the engine's part after each step (computed tokens advance; a step that reaches the end of
// the sequence samples one token, all drafts rejected, and the drafter proposes k new drafts).
#include "sim/sched/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "prefixsim/kv_cache_manager.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using testing_kv::Checked;
using testing_kv::Iota;
using testing_kv::Literal;
using testing_kv::Unitary;

constexpr int kDrafts = 2;  // k

std::unique_ptr<SimRequest> Prompt(uint64_t id, int tokens, uint32_t first) {
  auto r = std::make_unique<SimRequest>();
  r->request = std::make_unique<Request>(Literal(id, Iota(tokens, first), 16));
  r->prompt_tokens = r->num_tokens = tokens;
  r->max_outputs = 16;
  return r;
}

// What the engine does with a finished step (sim/engine/simulator.cc FinishStep), with every
// draft rejected.
void FinishStep(KvCacheManager& kv, const std::vector<ScheduledSeq>& batch) {
  for (const ScheduledSeq& s : batch) {
    SimRequest* r = s.req;
    r->num_computed += s.num_new_tokens;
    if (r->num_computed < r->num_tokens) continue;  // a prefill chunk
    ASSERT_EQ(r->num_computed, r->num_tokens + s.num_drafts);
    r->num_computed -= s.num_drafts;
    r->num_outputs += 1;
    r->num_tokens += 1;
    kv.SetNumTokens(r->kv, r->num_tokens);
    r->num_drafts = kDrafts;
  }
}

// docs/semantics.md §11: a preempted request is reset to num_computed_tokens = 0 and its
// spec_token_ids are dropped, so its re-prefill verifies no drafts; drafts come back only after
// it samples again. Unitary full attention, B = 4, 5 usable blocks; prefix caching off (the resumed
// request recomputes everything); long_prefill_token_threshold 6; k = 2 with no lookahead slots
// (an ngram-style proposer).
//   step 1: A and B (8-token prompts) prefill 6 tokens each (2 blocks each);
//   step 2: both finish their prompts (2 tokens each) and sample: num_tokens 9, 2 drafts each;
//   step 3: A verifies 1 + 2 tokens (11 tokens: a 3rd block, the last free one); B needs a 3rd
//           block too and is preempted (it is the last running request);
//   A finishes (its blocks come back);
//   step 4: B is re-admitted: 9 tokens to recompute, the first chunk 6;
//   step 5: the rest of B's sequence, 9 - 6 = 3 tokens and no draft.
TEST(SchedulerTest, PreemptionDropsTheDrafts) {
  KvPlan plan = Unitary(LayerKind::kFullAttention, 4, 6);
  plan.enable_prefix_caching = false;
  KvCacheManager kv(plan, Checked());
  SchedulerConfig config;
  config.max_num_batched_tokens = 64;
  config.long_prefill_token_threshold = 6;
  config.enable_prefix_caching = false;
  Scheduler sched(config, &kv);
  std::unique_ptr<SimRequest> a = Prompt(1, 8, 1), b = Prompt(2, 8, 100);
  sched.AddWaiting(a.get());
  sched.AddWaiting(b.get());
  std::vector<ScheduledSeq> batch;

  sched.Schedule(&batch);  // step 1
  ASSERT_EQ(batch.size(), 2u);
  FinishStep(kv, batch);
  sched.Schedule(&batch);  // step 2
  ASSERT_EQ(batch.size(), 2u);
  FinishStep(kv, batch);
  ASSERT_EQ(b->num_tokens, 9);
  ASSERT_EQ(b->num_drafts, kDrafts);

  sched.Schedule(&batch);  // step 3
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].req, a.get());
  EXPECT_EQ(batch[0].num_new_tokens, 1 + kDrafts);
  EXPECT_EQ(batch[0].num_drafts, kDrafts);
  EXPECT_EQ(sched.counters().preemptions, 1);
  EXPECT_EQ(b->num_preemptions, 1);
  EXPECT_EQ(b->num_computed, 0);
  EXPECT_EQ(b->num_drafts, 0);
  ASSERT_EQ(sched.num_waiting(), 1u);
  FinishStep(kv, batch);

  a->finished = true;  // A is done: its blocks are freed
  kv.Free(a->kv);
  sched.RemoveFinished();

  sched.Schedule(&batch);  // step 4
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].req, b.get());
  EXPECT_EQ(batch[0].num_new_tokens, 6);
  FinishStep(kv, batch);
  sched.Schedule(&batch);  // step 5
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].num_new_tokens, 3);
  EXPECT_EQ(batch[0].num_drafts, 0);
  EXPECT_EQ(batch[0].context_tokens, 9);
  FinishStep(kv, batch);
  EXPECT_EQ(b->num_tokens, 10);  // it sampled again: drafts proposed for the next step
  EXPECT_EQ(b->num_drafts, kDrafts);
  kv.Free(b->kv);
}

}  // namespace
}  // namespace prefixsim
