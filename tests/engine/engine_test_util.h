// Helpers for the engine tests: an in-memory trace, a constant-step-time cost model, small engines.
#ifndef PREFIXSIM_TESTS_ENGINE_ENGINE_TEST_UTIL_H_
#define PREFIXSIM_TESTS_ENGINE_ENGINE_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "prefixsim/engine.h"
#include "prefixsim/replay.h"
#include "prefixsim/trace.h"
#include "tests/kv/kv_test_util.h"

namespace prefixsim {
namespace testing_engine {

class VectorTrace : public TraceReader {
 public:
  explicit VectorTrace(std::vector<Request> requests) : requests_(std::move(requests)) {}
  absl::StatusOr<bool> Next(Request* out) override {
    if (next_ >= requests_.size()) return false;
    *out = requests_[next_++];
    stats_.records += 1;
    stats_.requests += 1;
    return true;
  }
  std::string_view format() const override { return "vector"; }
  const TraceReadStats& stats() const override { return stats_; }

 private:
  std::vector<Request> requests_;
  size_t next_ = 0;
  TraceReadStats stats_;
};

// A request with literal prompt tokens arriving at `arrival_ms`.
inline Request Req(uint64_t id, double arrival_ms, std::vector<uint32_t> tokens, int64_t outputs) {
  Request r = testing_kv::Literal(id, std::move(tokens), outputs);
  r.arrival_ns = static_cast<int64_t>(arrival_ms * 1e6);
  return r;
}

// Every step takes exactly `step_us` microseconds (a one-point table).
inline std::string ConstantStepTable(double step_us) {
  static int counter = 0;
  const std::string path = ::testing::TempDir() + "/" + std::to_string(getpid()) + "_const_step_" +
                           std::to_string(counter++) + ".csv";
  std::ofstream out(path);
  out << "num_tokens,context_tokens,time_us\n1,1," << step_us << "\n";
  return path;
}

inline EngineConfig SmallEngine(int64_t budget, double step_us = 1000) {
  EngineConfig e;
  e.max_num_batched_tokens = budget;
  e.max_num_seqs = 256;
  e.max_model_len = 1 << 20;
  e.cost_model.kind = "table";
  e.cost_model.table_path = ConstantStepTable(step_us);
  return e;
}

// SmallEngine with a CPU tier of `slots` 1 KiB slots (one block of a one-group test plan each).
inline EngineConfig WithCpuTier(double slots) {
  EngineConfig e = SmallEngine(8192);
  e.kv_offload.kv_offloading_size_gib = slots * 1024.0 / (1LL << 30);
  return e;
}

inline ReplayResult MustReplay(const KvPlan& plan, const EngineConfig& engine,
                               std::vector<Request> requests, uint64_t seed = 0) {
  VectorTrace trace(std::move(requests));
  ReplayOptions options;
  options.seed = seed;
  options.check_invariants = true;
  auto result = Replay(plan, ModelSpec{}, engine, trace, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : ReplayResult{};
}

}  // namespace testing_engine
}  // namespace prefixsim

#endif  // PREFIXSIM_TESTS_ENGINE_ENGINE_TEST_UTIL_H_
