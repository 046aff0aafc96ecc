// Fleet replay benchmark (issue 10's speed target): the Mooncake conversation trace (12,031
// requests) on the Kimi-K3-like model with the DSpark drafter under `new`, once on one replica
// and once on 16 replicas behind the kv_aware router (same requests; routing is O(prompt blocks)
// per request and replica). bench/fleet_ratio.sh runs both and prints the wall-time ratio, which
// must stay at most 1.5. Skips if the trace is absent.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "prefixsim/engine.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/trace.h"

namespace prefixsim {
namespace {

const std::string kTrace =
    std::string(PREFIXSIM_REAL_TRACES_DIR) + "/mooncake_conversation_trace.jsonl.zst";

void ReplayFleetMooncake(benchmark::State& state, const char* router) {
  auto model = LoadModel("kimi-k3-like");
  auto engine = LoadEngine("kimi-k3-dspark");
  if (!model.ok() || !engine.ok()) {
    state.SkipWithError("cannot load the kimi-k3-like presets");
    return;
  }
  engine->fleet.replicas = static_cast<int>(state.range(0));
  engine->fleet.router = router;
  auto plan = ResolveKvPlan(*model, *engine, "new");
  if (!plan.ok()) {
    state.SkipWithError(std::string(plan.status().message()).c_str());
    return;
  }
  if (std::FILE* f = std::fopen(kTrace.c_str(), "r")) {
    std::fclose(f);
  } else {
    state.SkipWithError("Mooncake conversation trace not found");
    return;
  }
  int64_t requests = 0;
  double hit_rate = 0;
  for (auto _ : state) {
    auto reader = OpenTrace(kTrace);
    if (!reader.ok()) {
      state.SkipWithError("cannot open trace");
      return;
    }
    ReplayOptions options;
    options.record_requests = false;
    auto result = Replay(*plan, *model, *engine, **reader, options);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    requests += result->requests;
    hit_rate = result->prefix_cache.hit_rate();
    benchmark::DoNotOptimize(result->num_steps);
  }
  state.counters["requests_per_s"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
  state.counters["hit_rate"] = hit_rate;
}

BENCHMARK_CAPTURE(ReplayFleetMooncake, kv_aware, "kv_aware")
    ->Arg(1)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace prefixsim
