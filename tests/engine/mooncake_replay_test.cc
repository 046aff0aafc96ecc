// The PR #53007 case (reference §0, §13.B) on the real Mooncake conversation trace: Kimi-K3-like
// with the DSpark drafter (3 speculative tokens). The `new` policy keeps the hit alignment at 1536
// instead of 13,824, so its hit rate must be clearly above `old`'s and within a point of the run
// without speculative decoding. Skips when the trace is absent.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "prefixsim/engine.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/trace.h"

namespace prefixsim {
namespace {

const std::string kTrace =
    std::string(PREFIXSIM_REAL_TRACES_DIR) + "/mooncake_conversation_trace.jsonl";

ReplayResult RunMooncake(const char* engine_preset, const char* policy) {
  auto model = LoadModel("kimi-k3-like");
  auto engine = LoadEngine(engine_preset);
  EXPECT_TRUE(model.ok() && engine.ok());
  if (!model.ok() || !engine.ok()) return {};
  auto plan = ResolveKvPlan(*model, *engine, policy);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  auto reader = OpenTrace(kTrace);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  ReplayOptions options;
  options.seed = 1;
  options.record_requests = false;
  auto result = Replay(*plan, *model, *engine, **reader, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : ReplayResult{};
}

TEST(MooncakeReplayTest, NewPolicyRecoversTheNoSpecHitRate) {
  if (std::FILE* f = std::fopen(kTrace.c_str(), "r")) {
    std::fclose(f);
  } else {
    GTEST_SKIP() << "no " << kTrace;
  }
  const ReplayResult old_r = RunMooncake("kimi-k3-dspark", "old");
  const ReplayResult new_r = RunMooncake("kimi-k3-dspark", "new");
  const ReplayResult nospec = RunMooncake("kimi-k3", "new");
  for (const ReplayResult* r : {&old_r, &new_r, &nospec}) {
    std::printf("%-4s A=%-6lld blocks=%-6lld hit_rate=%.4f loss/req=%.0f preemptions=%lld "
                "evicted=%lld finished=%lld\n",
                r->policy.c_str(), static_cast<long long>(r->plan.hit_alignment),
                static_cast<long long>(r->plan.num_blocks), r->prefix_cache.hit_rate(),
                r->prefix_cache.requests > 0
                    ? static_cast<double>(r->alignment_loss_tokens) / r->prefix_cache.requests
                    : 0.0,
                static_cast<long long>(r->preemptions), static_cast<long long>(r->evicted_blocks),
                static_cast<long long>(r->finished_requests));
  }
  EXPECT_EQ(old_r.requests, 12031);
  EXPECT_EQ(old_r.plan.hit_alignment, 13824);
  EXPECT_EQ(new_r.plan.hit_alignment, 1536);
  EXPECT_EQ(nospec.plan.hit_alignment, 1536);
  EXPECT_GT(new_r.prefix_cache.hit_rate(), old_r.prefix_cache.hit_rate() + 0.01);
  EXPECT_NEAR(new_r.prefix_cache.hit_rate(), nospec.prefix_cache.hit_rate(), 0.01);
  EXPECT_GT(old_r.alignment_loss_tokens, new_r.alignment_loss_tokens);
}

}  // namespace
}  // namespace prefixsim
