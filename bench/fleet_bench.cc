// Fleet replay benchmark (issues 10 and 29's speed targets): the Mooncake conversation trace
// (12,031 requests) on the Kimi-K3-like model with the DSpark drafter under `new`, on one
// thread: on 16 replicas behind the kv_aware router, and on one replica, at the trace's rate
// (arguments 1/1: one engine for the whole fleet's load, which it cannot keep up with) and with
// arrivals 16 times slower (1/16: the load each of the 16 replicas gets). bench/fleet_ratio.sh
// prints the wall-time ratios and the simulated engine steps per wall-second of each. Skips if
// the trace is absent.
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
  TraceOptions trace_options;
  trace_options.time_scale = static_cast<double>(state.range(1));
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
  int64_t requests = 0, steps = 0;
  double hit_rate = 0;
  for (auto _ : state) {
    auto reader = OpenTrace(kTrace, trace_options);
    if (!reader.ok()) {
      state.SkipWithError("cannot open trace");
      return;
    }
    ReplayOptions options;
    options.record_requests = false;
    options.threads = 1;
    auto result = Replay(*plan, *model, *engine, **reader, options);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    requests += result->requests;
    steps += result->num_steps;
    hit_rate = result->prefix_cache.hit_rate();
    benchmark::DoNotOptimize(result->num_steps);
  }
  state.counters["requests_per_s"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
  state.counters["steps_per_s"] =
      benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsRate);
  state.counters["hit_rate"] = hit_rate;
}

BENCHMARK_CAPTURE(ReplayFleetMooncake, kv_aware, "kv_aware")
    ->ArgNames({"replicas", "time_scale"})
    ->Args({1, 1})
    ->Args({1, 16})
    ->Args({16, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace prefixsim
