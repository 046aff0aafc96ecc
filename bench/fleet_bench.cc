// Fleet replay benchmark: the Mooncake conversation trace
// (12,031 requests) on the Kimi-K3-like model with the DSpark drafter under `new`, on one
// thread: on 16 replicas behind the kv_aware router, and on one replica, at the trace's rate
// (arguments 1/1: one engine for the whole fleet's load, which it cannot keep up with) and with
// arrivals 16 times slower (1/16: the load each of the 16 replicas gets). Neither single engine
// simulates what the fleet's replicas do, so ReplayFleetReplicasAlone replays each replica's own
// requests (as the 16-replica fleet routed them) on an engine of its own, one after another: the
// fleet's wall over that sum is the cost of being a fleet (routing, the fleet's index, the
// regret, the arrival-time sighting), the replicas' own work being the same. bench/fleet_ratio.sh
// prints the wall-time ratios and the simulated engine steps per wall-second of each. Skips if
// the trace is absent.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "prefixsim/engine.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/replay.h"
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

// The requests of one replica, from memory.
class RequestsTrace : public TraceReader {
 public:
  explicit RequestsTrace(const std::vector<Request>* requests) : requests_(requests) {}
  absl::StatusOr<bool> Next(Request* out) override {
    if (next_ == requests_->size()) return false;
    *out = (*requests_)[next_];
    out->id = next_++;
    ++stats_.requests;
    return true;
  }
  std::string_view format() const override { return "memory"; }
  const TraceReadStats& stats() const override { return stats_; }

 private:
  const std::vector<Request>* requests_;
  size_t next_ = 0;
  TraceReadStats stats_;
};

void ReplayFleetReplicasAlone(benchmark::State& state) {
  constexpr int kReplicas = 16;
  auto model = LoadModel("kimi-k3-like");
  auto engine = LoadEngine("kimi-k3-dspark");
  if (!model.ok() || !engine.ok()) {
    state.SkipWithError("cannot load the kimi-k3-like presets");
    return;
  }
  engine->fleet.replicas = kReplicas;
  engine->fleet.router = "kv_aware";
  auto plan = ResolveKvPlan(*model, *engine, "new");
  auto fleet_reader = OpenTrace(kTrace);
  if (!plan.ok() || !fleet_reader.ok()) {
    state.SkipWithError("cannot resolve the plan or open the Mooncake conversation trace");
    return;
  }
  ReplayOptions options;
  options.threads = 1;
  auto fleet = Replay(*plan, *model, *engine, **fleet_reader, options);
  auto reader = OpenTrace(kTrace);
  if (!fleet.ok() || !reader.ok()) {
    state.SkipWithError("the fleet's replay failed");
    return;
  }
  std::vector<std::vector<Request>> parts(kReplicas);
  Request request;
  for (const RequestRecord& record : fleet->per_request) {
    auto more = (*reader)->Next(&request);
    if (!more.ok() || !*more) {
      state.SkipWithError("the trace ended before the fleet's records");
      return;
    }
    parts[record.replica].push_back(std::move(request));
    request = Request{};
  }
  engine->fleet.replicas = 1;
  options.record_requests = false;
  int64_t requests = 0, steps = 0;
  PrefixCacheStats cache;
  for (auto _ : state) {
    cache = PrefixCacheStats{};
    for (const std::vector<Request>& part : parts) {
      RequestsTrace trace(&part);
      auto result = Replay(*plan, *model, *engine, trace, options);
      if (!result.ok()) {
        state.SkipWithError(std::string(result.status().message()).c_str());
        return;
      }
      requests += result->requests;
      steps += result->num_steps;
      cache.hits += result->prefix_cache.hits;
      cache.queries += result->prefix_cache.queries;
    }
  }
  state.counters["requests_per_s"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
  state.counters["steps_per_s"] =
      benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsRate);
  // The fleet's, when the replicas alone simulate what they did in it.
  state.counters["hit_rate"] = cache.hit_rate();
}

BENCHMARK(ReplayFleetReplicasAlone)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace prefixsim
