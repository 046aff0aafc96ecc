// Builds the kernel grid of `prefixsim kernel-bench` from the plans of several block-size
// policies (docs/cuda.md §Grid): every distinct group shape (kind, block size, kernel block size,
// page bytes, heads, dims, window) of any policy's plan, times the grid's axes.
#ifndef PREFIXSIM_SIM_CUDA_GRID_BUILDER_H_
#define PREFIXSIM_SIM_CUDA_GRID_BUILDER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prefixsim/engine_config.h"
#include "prefixsim/kv_plan.h"
#include "prefixsim/model.h"
#include "sim/cuda/kernel_grid.h"

namespace prefixsim::cuda {

struct GridAxes {
  std::vector<int> batches = {1, 8, 32, 64, 128};
  std::vector<int64_t> contexts = {1024, 4096, 8192, 16384, 32768};
  std::vector<int> prefill_chunks = {512, 2048};
  // Query heads per KV head of the (GQA) attention layers, and query heads of MLA layers, per
  // rank: the model files give KV shapes only. Defaults: 8 (a common GQA ratio) and 16 (Kimi
  // K2's 64 heads over TP 4); docs/cuda.md lists them as assumptions.
  int q_heads_per_kv = 8;
  int mla_q_heads = 16;
};

struct KernelGrid {
  std::vector<GridPoint> points;
  std::vector<std::string> notes;  // assumptions and skipped groups, written as '#' comments
};

// `plans` are the plans of one model and engine under different policies. Speculative widths:
// 0, and the engine's num_speculative_tokens when speculation is enabled.
absl::StatusOr<KernelGrid> BuildKernelGrid(const ModelSpec& model, const EngineConfig& engine,
                                           const std::vector<KvPlan>& plans, const GridAxes& axes);

// The grid file text: `header_comments` (without '#'), the notes, the header, the points.
std::string FormatGridFile(const KernelGrid& grid, const std::vector<std::string>& header_comments);

}  // namespace prefixsim::cuda

#endif  // PREFIXSIM_SIM_CUDA_GRID_BUILDER_H_
