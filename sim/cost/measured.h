// The measured step-time model's internals (sim/cost/measured.cc; docs/cuda.md §Cost model),
// exposed for tests.
#ifndef PREFIXSIM_SIM_COST_MEASURED_H_
#define PREFIXSIM_SIM_COST_MEASURED_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "sim/cost/cost_model.h"

namespace prefixsim {

// One kernel's measured times for one group shape: (op, kind, block size, kernel block size,
// page bytes, query tokens; the latter 0 where it is an axis).
using KernelShapeKey = std::tuple<std::string, std::string, int, int, int64_t, int>;

struct KernelTimes {
  // decode / mla_decode: num_tokens axis = batch, context axis = context, per q_tokens.
  // prefill / mla_prefill: num_tokens axis = chunk (q_tokens), context axis = the prefix before
  // the chunk (context - q_tokens), batch 1.
  // append: num_tokens axis = rows written (batch x q_tokens), one context point.
  // state_step / state_copy: num_tokens axis = batch, one context point.
  std::map<KernelShapeKey, StepTimeTable> tables;
  double copy_bytes_per_s = 0;
  double gemm_flops_per_s = 0;
  bool synthetic = false;  // a '# synthetic:' header comment: not a measurement
  std::string gpu;
};

// Parses prefixsim_kernel_bench's CSV (header comments '# key: value', then the grid columns
// plus time_us; check_ok, when present, must be 1 on every row). `source` names the file in
// errors.
absl::StatusOr<KernelTimes> ParseKernelCsv(std::string_view csv, std::string_view source);

// The kernel part of a step on one plan, in microseconds (what `compare` reports as the kernel
// share): Σ over the plan's groups of the group's layers x its kernels' interpolated times.
// NotFound when a group's shape has no measured times.
absl::StatusOr<double> KernelStepUs(const KernelTimes& times, const KvPlan& plan,
                                    absl::Span<const SeqWork> batch);

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_COST_MEASURED_H_
