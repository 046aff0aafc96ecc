// The kernel grid: what `prefixsim kernel-bench` asks the CUDA tool to time (docs/cuda.md), and
// the file both sides read. Plain C++ (no Abseil, no CUDA) because the CUDA tool that parses the
// file is built on the device machine, which has only the CUDA toolkit; errors are strings.
//
// File format: '#' lines are comments (kept as provenance), then a header line naming the
// columns of kGridColumns in that order, then one comma-separated line per point.
#ifndef PREFIXSIM_SIM_CUDA_KERNEL_GRID_H_
#define PREFIXSIM_SIM_CUDA_KERNEL_GRID_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace prefixsim::cuda {

// The operations timed, one kernel each (docs/cuda.md §Kernels).
//   decode:      paged attention, q_tokens = 1 + speculative width per sequence
//   prefill:     a chunk of q_tokens queries against its paged prefix, causal inside the chunk
//   mla_decode / mla_prefill: the same over MLA latent rows, absorbed form
//   append:      writing the step's q_tokens new tokens per sequence into their page slots
//   state_step:  a mamba / linear-attention state page read, updated and written per sequence
//   state_copy:  a state page copied to another block (caching a state at a block boundary)
enum class KernelOp { kDecode, kPrefill, kMlaDecode, kMlaPrefill, kAppend, kStateStep, kStateCopy };
std::string_view KernelOpName(KernelOp op);
bool ParseKernelOp(std::string_view name, KernelOp* op);

struct GridPoint {
  KernelOp op = KernelOp::kDecode;
  std::string policies;  // '+'-joined policies whose plans have this group shape
  std::string kind;      // the group's LayerKind name (full_attention, mla, sliding_window, ...)
  int block_size = 0;    // tokens per block (KvGroup::block_size)
  int kernel_block_size = 0;
  int64_t page_bytes = 0;  // one layer's page, padding included (KvGroup::page_bytes)
  int num_layers = 0;      // real layers of the group (the time is per layer)
  int elem_bytes = 2;      // 2 = bf16, 1 = fp8 e4m3 (KV); state pages are float32
  int q_heads = 0;
  int kv_heads = 0;
  int k_dim = 0;       // MLA: latent + rope
  int v_dim = 0;       // MLA: latent
  int64_t window = 0;  // sliding_window tokens (0: none)
  int64_t chunk = 0;   // chunked_local chunk (0: none)
  int64_t state_bytes = 0;
  int batch = 0;        // sequences
  int q_tokens = 0;     // query (new) tokens per sequence
  int64_t context = 0;  // KV tokens per sequence after the step
};

// The columns, in file order.
extern const char* const kGridColumns[];
extern const int kNumGridColumns;

std::string FormatGridHeader();
std::string FormatGridPoint(const GridPoint& p);
// Parses a whole grid file; on error returns false with `error` naming the line.
bool ParseGridFile(std::string_view text, std::vector<GridPoint>* points,
                   std::vector<std::string>* comments, std::string* error);

}  // namespace prefixsim::cuda

#endif  // PREFIXSIM_SIM_CUDA_KERNEL_GRID_H_
