// Randomized engine-like workloads against KvCacheManager with the invariant checker on after
// every operation, plus an oracle on every hit: a hit can never exceed what some request really
// computed with the same prefix (and, without eviction in a unitary full-attention model, it is
// exactly that, rounded to the block).
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "prefixsim/kv_cache_manager.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using testing_kv::Group;
using testing_kv::Plan;

struct Sim {
  Request req;
  std::vector<uint64_t> tokens;  // oracle view: prompt ids, then unique generated ids
  int64_t computed = 0;
  int64_t num_tokens = 0;
  int64_t verified_max = 0;  // most verified tokens ever computed (what may have been cached)
  bool running = false;
  bool in_prefill = false;
  bool done = false;
};

int64_t Lcp(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b, int64_t n) {
  int64_t i = 0;
  const int64_t m =
      std::min<int64_t>({n, static_cast<int64_t>(a.size()), static_cast<int64_t>(b.size())});
  while (i < m && a[i] == b[i]) ++i;
  return i;
}

void RunWorkload(const KvPlan& plan, uint64_t seed, int num_requests, bool exact_oracle,
                 int64_t reprefill = 0) {
  std::mt19937_64 rng(seed);
  KvCacheOptions opt;
  opt.check_invariants = true;
  opt.num_reprefillable_tokens = reprefill;
  opt.max_model_len = 200;
  KvCacheManager m(plan, opt);
  const int64_t a = plan.groups.size() == 1 ? plan.groups[0].block_size : plan.hit_alignment;
  std::vector<std::vector<uint32_t>> families(4);
  for (auto& f : families) {
    f.resize(80);
    for (auto& t : f) t = static_cast<uint32_t>(rng() % 50);
  }
  std::vector<std::unique_ptr<Sim>> sims;
  for (int i = 0; i < num_requests; ++i) {
    auto s = std::make_unique<Sim>();
    const auto& fam = families[rng() % families.size()];
    const int shared = static_cast<int>(rng() % 70);
    const int len = shared + 1 + static_cast<int>(rng() % 40);
    std::vector<uint32_t> toks(fam.begin(), fam.begin() + shared);
    while (static_cast<int>(toks.size()) < len) toks.push_back(1000 + rng() % 100000);
    s->req = testing_kv::Literal(i, toks, 1 + rng() % 20);
    if (rng() % 3 == 0) s->req.namespace_key = rng() % 2;
    for (uint32_t t : toks) s->tokens.push_back(t | (s->req.namespace_key << 40));
    for (int p = 0; p < s->req.output_tokens + 4; ++p) {
      s->tokens.push_back((uint64_t{1} << 50) + static_cast<uint64_t>(i) * 1000 + p);
    }
    s->num_tokens = s->req.prompt_tokens;
    sims.push_back(std::move(s));
  }
  std::deque<Sim*> waiting;
  std::vector<Sim*> running;
  int next = 0;
  int64_t total_hits = 0;
  auto oracle_best = [&](const Sim& q, int64_t max_hit) {
    int64_t best = 0;
    for (const auto& s : sims) {
      if (s->verified_max == 0) continue;
      best = std::max(best, std::min(Lcp(q.tokens, s->tokens, max_hit), s->verified_max));
    }
    return best;
  };
  auto preempt = [&](Sim* s) {
    m.Free(s->req.id);
    s->computed = 0;
    s->running = false;
    running.erase(std::find(running.begin(), running.end(), s));
    waiting.push_front(s);
  };
  for (int op = 0; op < 4000 && !(next == num_requests && waiting.empty() && running.empty());
       ++op) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 3 || running.empty()) {
      if (waiting.empty() && next < num_requests) {
        m.AddRequest(&sims[next]->req);
        waiting.push_back(sims[next++].get());
      }
      if (waiting.empty()) continue;
      Sim* s = waiting.front();
      const PrefixHit hit = m.GetComputedBlocks(s->req.id);
      const int64_t max_hit = s->num_tokens - 1;
      ASSERT_EQ(hit.hit_tokens % a, 0);
      ASSERT_LE(hit.hit_tokens + hit.alignment_loss_tokens, std::max<int64_t>(max_hit, 0));
      const int64_t best = oracle_best(*s, max_hit);
      ASSERT_LE(hit.hit_tokens + hit.alignment_loss_tokens, best) << "op " << op;
      // The shadow holds only computed prefixes, capped the same way (lost_to_alignment_tokens).
      ASSERT_GE(hit.lost_to_alignment_tokens, 0);
      ASSERT_LE(hit.hit_tokens + hit.lost_to_alignment_tokens, std::max<int64_t>(max_hit, 0));
      ASSERT_LE(hit.hit_tokens + hit.lost_to_alignment_tokens, best) << "op " << op;
      if (exact_oracle) {
        ASSERT_EQ(m.counters().evicted_blocks, 0);
        ASSERT_EQ(hit.hit_tokens, best / a * a) << "op " << op;
      }
      total_hits += hit.hit_tokens;
      const int64_t chunk = 1 + static_cast<int64_t>(rng() % 48);
      const int64_t n_new = std::min(chunk, s->num_tokens - hit.hit_tokens);
      if (m.AllocateSlots(s->req.id, 0, n_new, hit.hit_tokens, 0)) {
        waiting.pop_front();
        s->computed = hit.hit_tokens + n_new;
        s->verified_max = std::max(s->verified_max, std::min(s->computed, s->num_tokens));
        s->running = true;
        s->in_prefill = true;
        running.push_back(s);
        if (s->computed == s->num_tokens) {
          s->in_prefill = false;
          s->num_tokens += 1;  // sampled
          m.SetNumTokens(s->req.id, s->num_tokens);
        }
      } else {
        ASSERT_EQ(m.NumHeldBlocks(s->req.id), 0);
      }
      continue;
    }
    Sim* s = running[rng() % running.size()];
    if (kind == 9) {
      preempt(s);
      continue;
    }
    const int64_t prompt = s->req.prompt_tokens;
    if (s->in_prefill) {
      // Prefill chunk.
      const int64_t n_new = std::min<int64_t>(1 + rng() % 32, s->num_tokens - s->computed);
      if (!m.AllocateSlots(s->req.id, s->computed, n_new, 0, 0)) {
        preempt(s);
        continue;
      }
      s->computed += n_new;
      s->verified_max = std::max(s->verified_max, std::min(s->computed, s->num_tokens));
      if (s->computed == s->num_tokens) {
        s->in_prefill = false;
        s->num_tokens += 1;  // next token sampled
        m.SetNumTokens(s->req.id, s->num_tokens);
      }
      continue;
    }
    // Decode with k drafts (EAGLE-like: k lookahead slots), accept some.
    const int64_t k = static_cast<int64_t>(rng() % 3);
    // The drafts the last step accepted are verified: this call publishes a mamba state at a
    // boundary they crossed (docs/reference-notes.md §2) before it checks for free blocks, so
    // even when it fails and the request is preempted.
    s->verified_max = std::max(s->verified_max, s->computed);
    if (!m.AllocateSlots(s->req.id, s->computed, 1 + k, 0, k)) {
      preempt(s);
      continue;
    }
    // Only verified tokens were cacheable in this step: up to num_tokens = computed + 1.
    s->verified_max = std::max(s->verified_max, s->computed + 1);
    const int64_t accepted = static_cast<int64_t>(rng() % (k + 1));
    s->computed += 1 + accepted;
    s->num_tokens = s->computed + 1;
    m.SetNumTokens(s->req.id, s->num_tokens);
    if (s->num_tokens - prompt >= s->req.output_tokens) {
      m.Free(s->req.id);
      m.RemoveRequest(s->req.id);
      running.erase(std::find(running.begin(), running.end(), s));
      s->done = true;
    }
  }
  for (Sim* s : running) m.Free(s->req.id);
  m.CheckInvariants();
  EXPECT_EQ(m.num_free_blocks(), m.num_usable_blocks());
  EXPECT_GT(m.counters().cached_blocks, 0);
  EXPECT_GT(total_hits, 0);
  EXPECT_EQ(m.counters().hash_collisions, 0);
}

TEST(KvStressTest, UnitaryExactOracleWithoutEviction) {
  KvPlan plan = testing_kv::Unitary(LayerKind::kFullAttention, 4, 3000);
  for (uint64_t seed = 1; seed <= 3; ++seed) RunWorkload(plan, seed, 60, /*exact=*/true);
}

TEST(KvStressTest, UnitaryUnderPressure) {
  KvPlan plan = testing_kv::Unitary(LayerKind::kFullAttention, 4, 48);
  for (uint64_t seed = 1; seed <= 3; ++seed) RunWorkload(plan, seed, 80, false);
  plan.groups[0].is_eagle_group = true;
  RunWorkload(plan, 9, 80, false);
}

TEST(KvStressTest, HybridFullAndSlidingWindow) {
  RunWorkload(Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 4, 9)},
                   80, 4, 4, 4),
              11, 80, false);
  RunWorkload(Plan({Group(LayerKind::kFullAttention, 8), Group(LayerKind::kSlidingWindow, 4, 13),
                    Group(LayerKind::kSlidingWindow, 4, 13)},
                   120, 8, 4, 8),
              12, 80, false);
  RunWorkload(Plan({Group(LayerKind::kFullAttention, 8, 0, true),
                    Group(LayerKind::kSlidingWindow, 4, 6, true)},
                   100, 8, 4, 8),
              13, 80, false, /*reprefill=*/1);
}

TEST(KvStressTest, HybridWithMambaAndChunked) {
  RunWorkload(Plan({Group(LayerKind::kMla, 8), Group(LayerKind::kMamba, 8)}, 60, 8, 8, 8), 21, 80,
              false);
  RunWorkload(Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 8, 9),
                    Group(LayerKind::kChunkedLocal, 8, 0, false, 16)},
                   120, 8, 4, 8),
              22, 80, false);
  RunWorkload(Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 6, 13),
                    Group(LayerKind::kMamba, 12)},
                   150, 12, 2, 12),
              23, 80, false);
}

TEST(KvStressTest, PartialHits) {
  KvPlan plan = Plan({Group(LayerKind::kMla, 8), Group(LayerKind::kMamba, 8)}, 80, 8, 2, 2);
  plan.partial_hits = true;
  RunWorkload(plan, 31, 80, false);
  KvPlan three = Plan(
      {Group(LayerKind::kFullAttention, 4), Group(LayerKind::kMla, 8), Group(LayerKind::kMamba, 8)},
      120, 8, 2, 2);
  three.partial_hits = true;
  RunWorkload(three, 32, 80, false);
  KvPlan eagle = Plan({Group(LayerKind::kMla, 8, 0, /*eagle=*/true), Group(LayerKind::kMamba, 8)},
                      80, 8, 2, 2);
  eagle.partial_hits = true;
  RunWorkload(eagle, 33, 80, false);
}

}  // namespace
}  // namespace prefixsim
