// prefix_cache_retention_interval (docs/semantics.md §10.2; vLLM's reachable_block_mask of the
// sliding-window and mamba managers, _validate_prefix_cache_retention_interval, and the default
// resolution of PRs #52216, #55760 and #55861): what each retention keeps, end to end through
// KvCacheManager on hand-made plans, and how the planner resolves and validates it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "prefixsim/engine_config.h"
#include "prefixsim/kv_cache_manager.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

using ::testing::HasSubstr;
using testing_kv::Checked;
using testing_kv::Concat;
using testing_kv::Group;
using testing_kv::Iota;
using testing_kv::Literal;
using testing_kv::Plan;

// Runs `r`'s prefill in steps ending at `ends` (each its own step) and frees it; returns the hit
// its lookup gave.
int64_t RunAlone(KvCacheManager& m, const Request& r, const std::vector<int64_t>& ends) {
  m.NewStep();
  m.AddRequest(&r);
  const PrefixHit hit = m.GetComputedBlocks(r.id);
  int64_t computed = 0;
  for (int64_t end : ends) {
    if (end <= std::max(computed, hit.hit_tokens)) continue;
    const bool first = computed == 0;
    const int64_t from = first ? hit.hit_tokens : computed;
    EXPECT_TRUE(m.AllocateSlots(r.id, computed, end - from, first ? hit.hit_tokens : 0, 0));
    computed = end;
    m.NewStep();
  }
  m.Free(r.id);
  m.RemoveRequest(r.id);
  return hit.hit_tokens;
}

// The hit of a fresh request with `tokens` on `m` (looked up, then dropped).
int64_t Lookup(KvCacheManager& m, uint64_t id, const std::vector<uint32_t>& tokens) {
  const Request r = Literal(id, tokens);
  m.NewStep();
  m.AddRequest(&r);
  const int64_t hit = m.GetComputedBlocks(r.id).hit_tokens;
  m.Free(r.id);
  m.RemoveRequest(r.id);
  return hit;
}

KvPlan WithRetention(KvPlan plan, std::optional<int64_t> retention) {
  plan.retention_interval = retention;
  return plan;
}

// A sliding window of 9 tokens on 4-token blocks needs the 2 blocks before a hit's end. A 40-token
// prompt: dense keeps every block; 0 keeps the 2 before its replay boundary (39, floored to 36):
// blocks 7 and 8; 16 also keeps the 2 before every 16-token boundary (blocks 2, 3, 6, 7). The same
// prompt and 3 more tokens hits 40 (dense) or 36 (blocks 8 and 9 are needed for 40); a prompt
// sharing the first 24 tokens hits 24 (dense), nothing (0), or 16 (16).
TEST(RetentionTest, SlidingWindowKeepsTheWindowBeforeEachCheckpoint) {
  const std::vector<uint32_t> doc = Iota(40);
  const std::vector<uint32_t> prefix24(doc.begin(), doc.begin() + 24);
  struct Case {
    std::optional<int64_t> retention;
    int64_t cached, same, shared24;
  };
  for (const Case& c : {Case{std::nullopt, 10, 40, 24}, Case{0, 2, 36, 0}, Case{16, 5, 36, 16}}) {
    SCOPED_TRACE(c.retention ? std::to_string(*c.retention) : "dense");
    for (bool hybrid : {false, true}) {
      SCOPED_TRACE(hybrid ? "full attention + SWA" : "SWA only");
      const KvPlan plan =
          hybrid
              ? Plan({Group(LayerKind::kFullAttention, 4), Group(LayerKind::kSlidingWindow, 4, 9)},
                     64, 4, 4, 4)
              : Plan({Group(LayerKind::kSlidingWindow, 4, 9)}, 64, 4, 4, 4);
      KvCacheManager m(WithRetention(plan, c.retention), Checked());
      EXPECT_EQ(RunAlone(m, Literal(1, doc, 1), {40}), 0);
      // Full attention is dense at every retention: 10 blocks of its own.
      EXPECT_EQ(m.counters().cached_blocks, c.cached + (hybrid ? 10 : 0));
      EXPECT_EQ(Lookup(m, 2, Concat(doc, {7, 7, 7})), c.same);
      EXPECT_EQ(Lookup(m, 3, Concat(prefix24, Iota(10, 900))), c.shared24);
    }
  }
}

// Mamba (align mode, block 32) next to full attention: a state is published only where a step ends.
// r0 (100 tokens) steps to 32, 64, 96 and 100. Dense keeps the states at 32, 64 and 96; 0 only the
// one at its replay boundary (99 floored to 96); 64 the ones at 64 and 96. r1 = r0[:70] + 30 new
// hits 64, 0 and 64.
TEST(RetentionTest, MambaKeepsTheStateAtEachCheckpoint) {
  const std::vector<uint32_t> r0 = Iota(100);
  const std::vector<uint32_t> r1 =
      Concat(std::vector<uint32_t>(r0.begin(), r0.begin() + 70), Iota(30, 5000));
  const KvPlan plan =
      Plan({Group(LayerKind::kFullAttention, 32), Group(LayerKind::kMamba, 32)}, 64, 32, 32, 32);
  struct Case {
    std::optional<int64_t> retention;
    int64_t hit;
  };
  for (const Case& c : {Case{std::nullopt, 64}, Case{0, 0}, Case{64, 64}}) {
    SCOPED_TRACE(c.retention ? std::to_string(*c.retention) : "dense");
    KvCacheManager m(WithRetention(plan, c.retention), Checked());
    RunAlone(m, Literal(1, r0, 1), {32, 64, 96, 100});
    EXPECT_EQ(Lookup(m, 2, r1), c.hit);
  }
}

// Retention 0 with a shared-prefix junction: r1 = r0[:70] + 30 new finds full attention cached to
// 64 but no state there, so its lookup reports the junction 64 (shared_prefix_boundary); its
// prefill stops there (the scheduler's junction stop) and the state at 64 is kept, as a reachable
// boundary of r1, so r2 = r0[:70] + 20 other tokens hits 64. Without the stop (r1 in one step)
// nothing at 64 is kept and r2 hits nothing.
TEST(RetentionTest, MambaKeepsTheStateAtASharedPrefixJunction) {
  const std::vector<uint32_t> r0 = Iota(100);
  const std::vector<uint32_t> shared(r0.begin(), r0.begin() + 70);
  const KvPlan plan = WithRetention(
      Plan({Group(LayerKind::kFullAttention, 32), Group(LayerKind::kMamba, 32)}, 64, 32, 32, 32),
      0);
  for (bool stop : {true, false}) {
    SCOPED_TRACE(stop ? "stop at the junction" : "no stop");
    KvCacheManager m(plan, Checked());
    RunAlone(m, Literal(1, r0, 1), {32, 64, 96, 100});
    const Request r1 = Literal(2, Concat(shared, Iota(30, 5000)), 1);
    m.NewStep();
    m.AddRequest(&r1);
    const PrefixHit hit = m.GetComputedBlocks(r1.id);
    EXPECT_EQ(hit.hit_tokens, 0);
    EXPECT_EQ(hit.shared_prefix_boundary, 64);
    if (stop) {
      ASSERT_TRUE(m.AllocateSlots(r1.id, 0, 64, 0, 0));
      m.NewStep();
      ASSERT_TRUE(m.AllocateSlots(r1.id, 64, 36, 0, 0));
    } else {
      ASSERT_TRUE(m.AllocateSlots(r1.id, 0, 100, 0, 0));
    }
    m.Free(r1.id);
    m.RemoveRequest(r1.id);
    EXPECT_EQ(Lookup(m, 3, Concat(shared, Iota(20, 9000))), stop ? 64 : 0);
  }
}

absl::StatusOr<KvPlan> Resolve(const char* model_name, const char* engine_name,
                               const std::function<void(EngineConfig&)>& edit = {}) {
  auto engine = LoadEngine(engine_name);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (edit) edit(*engine);
  ModelLoadOptions load;
  load.tensor_parallel_size = engine->tensor_parallel_size;
  auto model = LoadModel(model_name, load);
  EXPECT_TRUE(model.ok()) << model.status();
  return ResolveKvPlan(*model, *engine, "new");
}

// vLLM's default: dense for a hybrid (mamba) model served with an EAGLE-family drafter, 0 for the
// rest (gpt-oss has sliding windows but no mamba; Kimi-K3 without speculation has no drafter).
TEST(RetentionTest, DefaultResolution) {
  auto gpt_oss = Resolve("gpt-oss-20b", "gpt-oss-20b");
  ASSERT_TRUE(gpt_oss.ok()) << gpt_oss.status();
  EXPECT_EQ(gpt_oss->retention_interval, std::optional<int64_t>(0));
  auto kimi = Resolve("kimi-k3-like", "kimi-k3");
  ASSERT_TRUE(kimi.ok()) << kimi.status();
  EXPECT_EQ(kimi->retention_interval, std::optional<int64_t>(0));
  auto dspark = Resolve("kimi-k3-like", "kimi-k3-dspark");
  ASSERT_TRUE(dspark.ok()) << dspark.status();
  EXPECT_EQ(dspark->retention_interval, std::nullopt);
  EXPECT_THAT(dspark->retention_interval_source, HasSubstr("EAGLE-family"));
  // Given, it wins: 0 on the DSpark plan, dense on gpt-oss.
  auto zero = Resolve("kimi-k3-like", "kimi-k3-dspark", [](EngineConfig& e) {
    e.prefix_cache_retention_interval = {RetentionInterval::Kind::kTokens, 0};
  });
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(zero->retention_interval, std::optional<int64_t>(0));
  EXPECT_EQ(zero->retention_interval_source, "engine");
  auto dense = Resolve("gpt-oss-20b", "gpt-oss-20b", [](EngineConfig& e) {
    e.prefix_cache_retention_interval = {RetentionInterval::Kind::kDense, 0};
  });
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(dense->retention_interval, std::nullopt);
}

// _validate_prefix_cache_retention_interval: N must be a multiple of S where there are
// sliding-window or mamba groups; a plan without them accepts only 0.
TEST(RetentionTest, Validation) {
  auto tokens = [](int64_t n) {
    return [n](EngineConfig& e) {
      e.prefix_cache_retention_interval = {RetentionInterval::Kind::kTokens, n};
    };
  };
  auto kimi = Resolve("kimi-k3-like", "kimi-k3", tokens(3 * 1536));
  ASSERT_TRUE(kimi.ok()) << kimi.status();
  EXPECT_EQ(kimi->retention_interval, std::optional<int64_t>(3 * 1536));
  auto off = Resolve("kimi-k3-like", "kimi-k3", tokens(1000));
  ASSERT_FALSE(off.ok());
  EXPECT_EQ(off.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(off.status().message()),
              HasSubstr("prefix_cache_retention_interval 1000 must be a multiple of the scheduler "
                        "block size 1536"));
  auto llama = Resolve("llama-3.1-8b-layout", "llama-3.1-8b", tokens(16));
  ASSERT_FALSE(llama.ok());
  EXPECT_THAT(std::string(llama.status().message()), HasSubstr("no sliding-window or mamba group"));
  EXPECT_TRUE(Resolve("llama-3.1-8b-layout", "llama-3.1-8b", tokens(0)).ok());
}

}  // namespace
}  // namespace prefixsim
