// The analytic step-time model (sim/cost/analytic.cc): monotone in work, GPU presets, the
// per-block term that gives block size a cost, and its errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "sim/cost/cost_model.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace {

struct Fixture {
  ModelSpec model;
  EngineConfig engine;
  KvPlan plan;
  Fixture(int block_size, const char* gpu) {
    LayerSpec l;
    l.kind = LayerKind::kFullAttention;
    l.count = 32;
    l.num_kv_heads = 8;
    l.head_size = 128;
    model.layers.push_back(l);
    engine.cost_model.gpu = gpu;
    plan = testing_kv::Unitary(LayerKind::kFullAttention, block_size, 1000);
  }
  std::unique_ptr<CostModel> Make() {
    CostModelContext ctx;
    ctx.plan = &plan;
    ctx.model = &model;
    ctx.engine = &engine;
    auto m = NewCostModel(engine.cost_model, ctx);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *std::move(m) : nullptr;
  }
};

TEST(AnalyticCostModelTest, MonotoneInTokensAndContext) {
  Fixture f(16, "h100");
  auto m = f.Make();
  ASSERT_NE(m, nullptr);
  const std::vector<SeqWork> small = {{1, 1000}};
  const std::vector<SeqWork> more_ctx = {{1, 100000}};
  const std::vector<SeqWork> prefill = {{8192, 8192}};
  const std::vector<SeqWork> batch = {{1, 1000}, {1, 1000}, {1, 1000}};
  EXPECT_GT(m->StepTimeNs(small), 0);
  EXPECT_GT(m->StepTimeNs(more_ctx), m->StepTimeNs(small));
  EXPECT_GT(m->StepTimeNs(prefill), m->StepTimeNs(small));
  EXPECT_GE(m->StepTimeNs(batch), m->StepTimeNs(small));
  // A prefill of 8192 tokens of a ~6.4 B-parameter estimate is compute-bound: ~2·P·T / (0.5 peak).
  const double expected_s = 2.0 * 32 * 2e8 * 8192 / (0.5 * 989e12);
  EXPECT_GT(m->StepTimeNs(prefill), expected_s * 1e9);
}

TEST(AnalyticCostModelTest, H200DecodesFasterThanH100) {
  Fixture a(16, "h100"), b(16, "h200");
  const std::vector<SeqWork> decode = {{1, 32000}, {1, 32000}};
  EXPECT_LT(b.Make()->StepTimeNs(decode), a.Make()->StepTimeNs(decode));
}

TEST(AnalyticCostModelTest, SmallerBlocksCostMore) {
  Fixture a(16, "h200"), b(1024, "h200");
  const std::vector<SeqWork> decode = {{1, 100000}, {1, 100000}};
  EXPECT_GT(a.Make()->StepTimeNs(decode), b.Make()->StepTimeNs(decode));
}

TEST(AnalyticCostModelTest, ActiveParamsOverrideAndErrors) {
  Fixture f(16, "h200");
  CostModelContext ctx;
  ctx.plan = &f.plan;
  ctx.model = &f.model;
  ctx.engine = &f.engine;
  ctx.active_params = 70e9;
  auto big = NewCostModel(f.engine.cost_model, ctx);
  ASSERT_TRUE(big.ok());
  const std::vector<SeqWork> prefill = {{4096, 4096}};
  EXPECT_GT((*big)->StepTimeNs(prefill), f.Make()->StepTimeNs(prefill));
  f.engine.cost_model.gpu = "tpu";
  EXPECT_EQ(NewCostModel(f.engine.cost_model, ctx).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LookupGpu("h200")->hbm_bytes_per_s, 4.8e12);
}

// StepTimeNs works on classes of layers (by window) and of groups (by block shape). This is the
// model's formula (the header comment of sim/cost/analytic.cc) written layer by layer and group by
// group, as a reader would: the two must give the same nanoseconds on every batch, here on the
// Kimi-K3-like plan with the drafter (MLA, a sliding window, 14 KDA state groups).
TEST(AnalyticCostModelTest, ClassSumsEqualTheFormulaLayerByLayer) {
  auto model = LoadModel("kimi-k3-like");
  ASSERT_TRUE(model.ok()) << model.status();
  auto engine = LoadEngine("kimi-k3-dspark");
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto plan = ResolveKvPlan(*model, *engine, "new");
  ASSERT_TRUE(plan.ok()) << plan.status();
  CostModelContext ctx;
  ctx.plan = &*plan;
  ctx.model = &*model;
  ctx.engine = &*engine;
  auto m = NewCostModel(engine->cost_model, ctx);
  ASSERT_TRUE(m.ok()) << m.status();
  auto gpu = LookupGpu(engine->cost_model.gpu);
  ASSERT_TRUE(gpu.ok());

  const int k = engine->speculative.num_speculative_tokens;
  // The preset's active parameters, plus the drafter's layers once per speculative pass.
  double active = model->active_params;
  for (const LayerSpec& l : model->layers) {
    if (l.drafter) active += 2.0e8 * l.count * k;
  }
  const int tp = engine->tensor_parallel_size;
  auto formula = [&](const std::vector<SeqWork>& batch) {
    double tokens = 0, attn_flops = 0, kv_bytes = 0, block_entries = 0;
    for (const SeqWork& s : batch) {
      const double n = static_cast<double>(s.new_tokens);
      tokens += n;
      for (const LayerSpec& l : model->layers) {
        if (l.kind == LayerKind::kMamba) {
          kv_bytes += 2.0 * static_cast<double>(l.state_bytes) * l.count;
          continue;
        }
        const int64_t window = l.kind == LayerKind::kSlidingWindow ? l.sliding_window : 0;
        const double v =
            static_cast<double>(window > 0 ? std::min(s.context_tokens, window) : s.context_tokens);
        attn_flops += 4.0 * 4096 * n * std::max(v - 0.5 * std::min(n, v), 1.0) * l.count;
        kv_bytes += static_cast<double>(l.BytesPerToken()) * l.count * v;
      }
      for (const KvGroup& g : plan->groups) {
        if (g.kind == LayerKind::kMamba) {
          block_entries += 1;
          continue;
        }
        const int64_t window =
            g.kind == LayerKind::kSlidingWindow ? g.sliding_window + g.block_size : 0;
        const int64_t visible = window > 0 ? std::min(s.context_tokens, window) : s.context_tokens;
        block_entries += static_cast<double>((visible + g.block_size - 1) / g.block_size);
      }
    }
    const double flops = 2.0 * active * tokens / tp + attn_flops;
    const double bytes = 2.0 * active / tp + kv_bytes;
    const double t =
        std::max(flops / (gpu->peak_flops * 0.5), bytes / (gpu->hbm_bytes_per_s * 0.7)) + 2e-3 +
        20e-9 * block_entries;
    return std::max<int64_t>(1, static_cast<int64_t>(std::llround(t * 1e9)));
  };
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<SeqWork> batch;
    const int seqs = 1 + static_cast<int>(rng() % 256);
    for (int i = 0; i < seqs; ++i) {
      const int64_t ctx_tokens = 1 + static_cast<int64_t>(rng() % 262144);
      const int64_t n = rng() % 4 == 0 ? 1 + static_cast<int64_t>(rng() % 8192) : 1 + k;
      batch.push_back({std::min(n, ctx_tokens), ctx_tokens});
    }
    ASSERT_EQ((*m)->StepTimeNs(batch), formula(batch)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace prefixsim
