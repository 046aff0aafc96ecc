// End-to-end replay benchmark (docs/design.md §6): the Mooncake conversation trace (12,031
// requests) on the Kimi-K3-like model with the DSpark drafter, single thread, trace reading
// included. Reports requests/s and prompt tokens/s of simulated work, per CPU second of the
// (single) benchmark thread, so that a loaded machine does not distort them; on an idle machine
// wall and CPU time agree. Skips if the trace is absent.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "prefixsim/engine.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/replay.h"
#include "prefixsim/trace.h"

namespace prefixsim {
namespace {

const std::string kTrace =
    std::string(PREFIXSIM_REAL_TRACES_DIR) + "/mooncake_conversation_trace.jsonl.zst";

void ReplayMooncake(benchmark::State& state, const char* engine_preset, const char* policy) {
  auto model = LoadModel("kimi-k3-like");
  auto engine = LoadEngine(engine_preset);
  if (!model.ok() || !engine.ok()) {
    state.SkipWithError("cannot load the kimi-k3-like presets");
    return;
  }
  auto plan = ResolveKvPlan(*model, *engine, policy);
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
  int64_t requests = 0, prompt_tokens = 0;
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
    prompt_tokens += result->prompt_tokens;
    hit_rate = result->prefix_cache.hit_rate();
    benchmark::DoNotOptimize(result->num_steps);
  }
  state.counters["requests_per_s"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
  state.counters["prompt_tokens_per_s"] =
      benchmark::Counter(static_cast<double>(prompt_tokens), benchmark::Counter::kIsRate);
  state.counters["hit_rate"] = hit_rate;
}

BENCHMARK_CAPTURE(ReplayMooncake, kimi_dspark_new, "kimi-k3-dspark", "new")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(ReplayMooncake, kimi_dspark_old, "kimi-k3-dspark", "old")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(ReplayMooncake, kimi_nospec_new, "kimi-k3", "new")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace prefixsim
