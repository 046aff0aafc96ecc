// Throughput of `prefixsim analyze` on the Mooncake conversation trace (prompt tokens/s and
// requests/s of analysed trace): end to end from the file, and on requests already in memory
// (the analysis alone), each with and without the capacity curve.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>
#include <vector>

#include "prefixsim/analyze.h"
#include "prefixsim/trace.h"

namespace prefixsim {
namespace {

const std::string& ConversationTrace() {
  static const std::string path =
      std::string(PREFIXSIM_REAL_TRACES_DIR) + "/mooncake_conversation_trace.jsonl.zst";
  return path;
}

void SetCounters(benchmark::State& state, const AnalyzeResult& r) {
  state.counters["prompt_tokens/s"] = benchmark::Counter(
      static_cast<double>(r.prompt_tokens), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["requests/s"] = benchmark::Counter(static_cast<double>(r.requests),
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

void BM_AnalyzeConversationFile(benchmark::State& state) {
  if (!std::filesystem::exists(ConversationTrace())) {
    state.SkipWithError("conversation trace not present");
    return;
  }
  AnalyzeOptions options;
  options.capacity_curve = state.range(0) != 0;
  AnalyzeResult last;
  for (auto _ : state) {
    auto r = AnalyzeTraceFile(ConversationTrace(), {}, options);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    last = *std::move(r);
  }
  SetCounters(state, last);
}
BENCHMARK(BM_AnalyzeConversationFile)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_AnalyzeConversationInMemory(benchmark::State& state) {
  auto reader = OpenTrace(ConversationTrace());
  if (!reader.ok()) {
    state.SkipWithError(std::string(reader.status().message()).c_str());
    return;
  }
  std::vector<Request> requests;
  Request req;
  while (true) {
    auto more = (*reader)->Next(&req);
    if (!more.ok() || !*more) break;
    requests.push_back(req);
  }
  AnalyzeOptions options;
  options.capacity_curve = state.range(0) != 0;
  AnalyzeResult last;
  for (auto _ : state) {
    auto r = AnalyzeRequests(requests, options);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    last = *std::move(r);
  }
  SetCounters(state, last);
}
BENCHMARK(BM_AnalyzeConversationInMemory)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace prefixsim
