// Step-time cost models: how long one engine step (one forward pass over a batch) takes in
// simulated time. A model is one file in sim/cost/ plus one registration line in
// sim/cost/cost_registry.cc; EngineConfig::cost_model.kind selects it.
#ifndef PREFIXSIM_SIM_COST_COST_MODEL_H_
#define PREFIXSIM_SIM_COST_COST_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"

namespace prefixsim {

// One request's share of a step.
struct SeqWork {
  int64_t new_tokens = 0;      // tokens run through the model this step (incl. drafts)
  int64_t context_tokens = 0;  // KV length after this step (computed + new)
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string_view name() const = 0;
  // Simulated duration of one step over `batch` (non-empty), in nanoseconds, > 0.
  virtual int64_t StepTimeNs(absl::Span<const SeqWork> batch) const = 0;
  // Of every duration StepTimeNs returned so far, the part the model spends in attention kernels
  // (what `compare` reports as the kernel share); 0 for models that do not split a step.
  virtual int64_t kernel_ns() const { return 0; }
};

// What a cost model may look at besides its own configuration.
struct CostModelContext {
  const KvPlan* plan = nullptr;
  const ModelSpec* model = nullptr;
  const EngineConfig* engine = nullptr;
  // Analytic model: active parameters per forward pass (all ranks); 0 = estimate from the model.
  double active_params = 0;
};

using CostModelFactory = absl::StatusOr<std::unique_ptr<CostModel>> (*)(
    const CostModelConfig& config, const CostModelContext& context);

// Factories, one per file.
absl::StatusOr<std::unique_ptr<CostModel>> NewAnalyticCostModel(const CostModelConfig& config,
                                                                const CostModelContext& context);
absl::StatusOr<std::unique_ptr<CostModel>> NewTableCostModel(const CostModelConfig& config,
                                                             const CostModelContext& context);
absl::StatusOr<std::unique_ptr<CostModel>> NewMeasuredCostModel(const CostModelConfig& config,
                                                                const CostModelContext& context);

// The model registered under config.kind.
absl::StatusOr<std::unique_ptr<CostModel>> NewCostModel(const CostModelConfig& config,
                                                        const CostModelContext& context);
std::vector<std::string> RegisteredCostModels();

// --- analytic model internals, exposed for tests ---
struct GpuSpec {
  std::string name;
  double peak_flops = 0;       // dense bf16 FLOP/s
  double hbm_bytes_per_s = 0;  // memory bandwidth
};
// Presets: "h100" (SXM), "h200". NotFound otherwise.
absl::StatusOr<GpuSpec> LookupGpu(std::string_view name);
std::vector<std::string> GpuPresetNames();

// --- table model internals, exposed for tests ---
// A rectilinear grid of measured step times: time_us[i][j] at (num_tokens[i], context_tokens[j]).
struct StepTimeTable {
  std::vector<double> num_tokens;      // strictly increasing
  std::vector<double> context_tokens;  // strictly increasing
  std::vector<std::vector<double>> time_us;
  // Bilinear interpolation; linear extrapolation past the last point of an axis (a step over
  // more tokens costs proportionally more), clamped at the first point.
  double Interpolate(double num_tokens, double context_tokens) const;
};
// Parses the CSV (header `num_tokens,context_tokens,time_us`, one row per grid point, all
// combinations present). `source` names the file in errors (InvalidArgument with line numbers).
absl::StatusOr<StepTimeTable> ParseStepTimeTable(std::string_view csv, std::string_view source);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_COST_COST_MODEL_H_
