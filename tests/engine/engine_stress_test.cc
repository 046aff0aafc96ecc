// Randomized replays on small caches with the KV invariant checker on (every operation): every
// request is accounted for, outputs are exact, hits are aligned and never exceed queries.
#include <gtest/gtest.h>

#include <random>

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

struct Case {
  const char* name;
  KvPlan plan;
};

TEST(EngineStressTest, RandomWorkloadsKeepAccountsExact) {
  const std::vector<Case> cases = {
      {"unitary", Unitary(LayerKind::kFullAttention, 4, 40)},
      {"hybrid_swa_mamba",
       Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kSlidingWindow, 8, 16),
             Group(LayerKind::kMamba, 8)},
            90, 8, 8, 8)},
  };
  int64_t total_preemptions = 0, total_hits = 0, total_drafts = 0;
  for (const Case& c : cases) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      std::mt19937_64 rng(seed);
      std::vector<Request> reqs;
      int64_t want_outputs = 0;
      for (int i = 0; i < 40; ++i) {
        const int prefix = static_cast<int>(rng() % 3);
        const int prefix_len = 8 * static_cast<int>(rng() % 5);
        const int suffix_len = 1 + static_cast<int>(rng() % 40);
        const int outputs = 1 + static_cast<int>(rng() % 20);
        reqs.push_back(
            Req(i, i * 0.3,
                Concat(Iota(prefix_len, 1000 * (prefix + 1)), Iota(suffix_len, 100000 + 100 * i)),
                outputs));
        want_outputs += outputs;
      }
      EngineConfig e = SmallEngine(32);
      e.max_num_seqs = 4 + static_cast<int>(seed % 3);
      e.long_prefill_token_threshold = seed % 2 == 0 ? 12 : 0;
      e.speculative.enabled = seed % 2 == 1;
      e.speculative.method = "eagle";
      e.speculative.num_speculative_tokens = 2;
      e.speculative.acceptance.model = "geometric";
      e.speculative.acceptance.rates = {0.6};
      const ReplayResult r = MustReplay(c.plan, e, reqs, seed);
      SCOPED_TRACE(std::string(c.name) + " seed " + std::to_string(seed));
      total_preemptions += r.preemptions;
      total_hits += r.prefix_cache.hits;
      total_drafts += r.spec_decode.draft_tokens;
      EXPECT_EQ(r.requests, 40);
      EXPECT_EQ(r.skipped_does_not_fit + r.skipped_prompt_too_long, 0);
      EXPECT_EQ(r.finished_requests, 40);
      EXPECT_EQ(r.output_tokens, want_outputs);
      EXPECT_EQ(r.prefix_cache.requests, 40);
      EXPECT_LE(r.prefix_cache.hits, r.prefix_cache.queries);
      EXPECT_EQ(r.prefix_cache.hits % c.plan.hit_alignment, 0);
      EXPECT_EQ(r.prefix_cache.preempted_requests, r.preemptions);
      EXPECT_LE(r.prefix_cache.preempted_hits, r.prefix_cache.preempted_queries);
      EXPECT_LE(r.max_running, e.max_num_seqs);
      for (const RequestRecord& rec : r.per_request) {
        EXPECT_GE(rec.first_token_ns, rec.arrival_ns);
        EXPECT_GE(rec.finish_ns, rec.first_token_ns);
      }
    }
  }
  // The workloads do exercise preemption, prefix hits and speculation.
  std::printf("preemptions %lld hits %lld draft tokens %lld\n",
              static_cast<long long>(total_preemptions), static_cast<long long>(total_hits),
              static_cast<long long>(total_drafts));
  EXPECT_GT(total_preemptions, 0);
  EXPECT_GT(total_hits, 0);
  EXPECT_GT(total_drafts, 0);
}

}  // namespace
}  // namespace prefixsim
