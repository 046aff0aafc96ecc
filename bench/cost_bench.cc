// Micro benchmarks of the per-step hot paths outside the KV cache: the analytic step cost (it runs
// over every sequence of every step) and the speculative acceptance draws (one per verified draft
// sequence), on the Kimi-K3-like plan with the DSpark drafter. A batch like the Mooncake replay's:
// ~115 decoding sequences with 1 + 3 tokens each at contexts up to 200k, plus one prefill chunk.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "sim/cost/cost_model.h"
#include "sim/spec/acceptance_model.h"

namespace prefixsim {
namespace {

std::vector<SeqWork> DecodeBatch(int num_seqs) {
  std::mt19937_64 rng(1);
  std::vector<SeqWork> batch;
  for (int i = 0; i < num_seqs; ++i) {
    batch.push_back({4, 1000 + static_cast<int64_t>(rng() % 200000)});
  }
  batch.push_back({4096, 40000});  // a prefill chunk rides along
  return batch;
}

void StepTimeAnalyticKimi(benchmark::State& state) {
  auto model = LoadModel("kimi-k3-like");
  auto engine = LoadEngine("kimi-k3-dspark");
  if (!model.ok() || !engine.ok()) {
    state.SkipWithError("cannot load the kimi-k3-like presets");
    return;
  }
  auto plan = ResolveKvPlan(*model, *engine, "new");
  if (!plan.ok()) {
    state.SkipWithError("cannot resolve the plan");
    return;
  }
  CostModelContext ctx;
  ctx.plan = &*plan;
  ctx.model = &*model;
  ctx.engine = &*engine;
  auto cost = NewCostModel(engine->cost_model, ctx);
  if (!cost.ok()) {
    state.SkipWithError("cannot build the cost model");
    return;
  }
  const std::vector<SeqWork> batch = DecodeBatch(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize((*cost)->StepTimeNs(batch));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(batch.size()));
}
BENCHMARK(StepTimeAnalyticKimi)->Arg(115);

void AcceptancePerPosition(benchmark::State& state) {
  AcceptanceConfig config;
  config.model = "per_position";
  config.rates = {0.8, 0.6, 0.4};  // the kimi-k3-dspark preset
  auto model = NewAcceptanceModel(config, 3);
  if (!model.ok()) {
    state.SkipWithError("cannot build the acceptance model");
    return;
  }
  Mt19937_64 rng(7);
  for (auto _ : state) benchmark::DoNotOptimize((*model)->Sample(3, rng));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(AcceptancePerPosition);

}  // namespace
}  // namespace prefixsim
