// The CUDA backend's kernels (docs/cuda.md §Kernels): paged attention (decode, speculative
// verify, chunked prefill; MHA/GQA and MLA's absorbed latent form), the KV append, and the state
// step and copy. Each takes a block table and the page layout of one KV cache group exactly as
// the plan resolves it (sim/cuda/reference.h's PageLayout), and computes what the CPU reference
// of the same name computes.
#ifndef PREFIXSIM_SIM_CUDA_KERNELS_CUH_
#define PREFIXSIM_SIM_CUDA_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace prefixsim::cuda {

struct DevLayout {
  int block_size = 0;
  int kernel_block_size = 0;
  int64_t page_bytes = 0;
  int kv_heads = 0;
  int k_dim = 0;
  int v_dim = 0;
  int v_in_k = 0;
  int elem_bytes = 2;  // 2 bf16, 1 fp8 e4m3
};

// Device pointers and sizes of one paged-attention launch. tables: batch rows of max_blocks
// kernel-block ids; context, q_len, q_start (first query row of each sequence) per sequence;
// q [rows][q_heads][k_dim], out [rows][q_heads][v_dim], float.
struct AttentionArgs {
  DevLayout layout;
  const uint8_t* pool = nullptr;
  const int32_t* tables = nullptr;
  int max_blocks = 0;
  const int64_t* context = nullptr;
  const int32_t* q_len = nullptr;
  const int64_t* q_start = nullptr;
  int batch = 0;
  int max_q_len = 0;
  int64_t max_keys = 0;      // the longest key range of any query tile (for the split count)
  int64_t split_keys = 256;  // the fewest keys of a split (the checks lower it to test splits)
  int q_heads = 0;
  float scale = 1;
  int64_t window = 0;
  int64_t chunk = 0;
  const float* q = nullptr;
  float* out = nullptr;
};

// Launch geometry and the split-K workspace size of a launch; fills `splits`.
struct AttentionPlan {
  int rows_per_cta = 0;
  int heads_per_tile = 0;
  int tokens_per_tile = 0;
  int tiles_per_seq = 0;
  int splits = 1;
  size_t workspace_bytes = 0;
};
// Error text (empty when fine) for shapes the kernels do not support.
const char* PlanAttention(const AttentionArgs& a, int num_sms, AttentionPlan* plan);
// Runs the attention kernel and the split combine on `stream`; `workspace` holds
// plan.workspace_bytes.
cudaError_t LaunchAttention(const AttentionArgs& a, const AttentionPlan& plan, void* workspace,
                            cudaStream_t stream);

// KV append: token i of the step writes rows k_new[i] (kv_heads x k row bytes) and v_new[i] to
// position pos[i] of sequence seq[i].
cudaError_t LaunchAppend(const DevLayout& layout, uint8_t* pool, const int32_t* tables,
                         int max_blocks, const int32_t* seq, const int64_t* pos, int num_tokens,
                         const uint8_t* k_new, const uint8_t* v_new, cudaStream_t stream);

// State step (reference.h ReferenceStateStep); `out` [batch][128] is zeroed by the launch.
cudaError_t LaunchStateStep(uint8_t* pool, int64_t page_bytes, int64_t state_bytes,
                            const int32_t* state_block, int batch, const float* g, const float* k,
                            const float* q, const float* v, float* out, cudaStream_t stream);
cudaError_t LaunchStateCopy(uint8_t* pool, int64_t page_bytes, int64_t state_bytes,
                            const int32_t* src, const int32_t* dst, int pairs, cudaStream_t stream);

// Fills `bytes` of `p` with pseudo-random data of element size `elem_bytes` (1 fp8 without NaNs,
// 2 bf16 in [-1, 1], 4 float in [-1, 1]) from `seed`.
cudaError_t LaunchFillRandom(void* p, size_t bytes, int elem_bytes, uint32_t seed,
                             cudaStream_t stream);

}  // namespace prefixsim::cuda

#endif  // PREFIXSIM_SIM_CUDA_KERNELS_CUH_
