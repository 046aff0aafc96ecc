// The analytic step-time model (sim/cost/analytic.cc): monotone in work, GPU presets, the
// per-block term that gives block size a cost, and its errors.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace prefixsim
