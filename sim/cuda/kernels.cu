// Kernels of the CUDA backend (kernels.cuh; docs/cuda.md). Correctness first: plain CUDA C++
// (no tensor cores, no TMA), 16-byte global loads, fp32 arithmetic in shared memory; not tuned on
// a device.
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>

#include "sim/cuda/kernels.cuh"

// Launches and dynamic shared memory go through these so that tests/cuda/emulate can run the same
// kernels on the CPU (its cuda_runtime.h defines them otherwise).
#ifndef PREFIXSIM_CUDA_EMULATION
#define PREFIXSIM_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#define PREFIXSIM_DYNAMIC_SMEM(type, name) extern __shared__ __align__(16) type name[]
#endif

namespace prefixsim::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kTileTokens = 16;  // keys per shared-memory tile

__device__ __forceinline__ float Bf16Bits(uint32_t bits16) { return __uint_as_float(bits16 << 16); }

__device__ __forceinline__ float Fp8Bits(uint32_t byte) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(byte), __NV_E4M3);
  return __half2float(__half(h));
}

// Converts 16 bytes of elements to floats at dst (8 bf16 or 16 fp8).
__device__ __forceinline__ void Unpack16(const uint4& v, int elem_bytes, float* dst) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  if (elem_bytes == 2) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      dst[2 * i] = Bf16Bits(w[i] & 0xffffu);
      dst[2 * i + 1] = Bf16Bits(w[i] >> 16);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int b = 0; b < 4; ++b) dst[4 * i + b] = Fp8Bits((w[i] >> (8 * b)) & 0xffu);
    }
  }
}

// Byte offset of token t's row of kv head h (K, or V when `value`), as PageLayout::KOffset/VOffset.
__device__ __forceinline__ int64_t RowOffset(const DevLayout& L, const int32_t* table, int64_t t,
                                             int h, bool value) {
  const int sub = L.block_size / L.kernel_block_size;
  const int32_t e = table[t / L.kernel_block_size];
  const int64_t slot = int64_t(e % sub) * L.kernel_block_size + t % L.kernel_block_size;
  const int64_t page = int64_t(e / sub) * L.page_bytes;
  const int64_t k_row = int64_t(L.k_dim) * L.elem_bytes;
  if (!value || L.v_in_k) return page + (slot * L.kv_heads + h) * k_row;
  const int64_t v_row = int64_t(L.v_dim) * L.elem_bytes;
  return page + int64_t(L.block_size) * L.kv_heads * k_row + (slot * L.kv_heads + h) * v_row;
}

__device__ __forceinline__ int64_t VisibleLo(int64_t p, int64_t window, int64_t chunk) {
  if (window > 0) return p - window + 1 > 0 ? p - window + 1 : 0;
  if (chunk > 0) return p / chunk * chunk;
  return 0;
}

// Loads rows of `n` tokens (row `dim` elements, starting at element 0) into dst[token][dim].
__device__ __forceinline__ void LoadTile(const AttentionArgs& a, const int32_t* table, int64_t t0,
                                         int n, int kvh, bool value, int dim, float* dst) {
  const int per16 = 16 / a.layout.elem_bytes;
  const int chunks = dim / per16;
  for (int c = threadIdx.x; c < n * chunks; c += kThreads) {
    const int tt = c / chunks, part = c % chunks;
    const uint8_t* src = a.pool + RowOffset(a.layout, table, t0 + tt, kvh, value) + part * 16;
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(src));
    Unpack16(v, a.layout.elem_bytes, dst + tt * dim + part * per16);
  }
}

// One CTA: a tile of query rows (tokens_per_tile query tokens x heads_per_tile heads of one kv
// head) of one sequence over one split of its key range. Online softmax; the unnormalised
// output and (max, sum) per row go to the workspace for the combine. Each thread owns output
// dims tid + i * kThreads for every row, so the accumulator is indexed by compile-time constants.
template <int DV, int RMAX>
__global__ void __launch_bounds__(kThreads)
    AttentionKernel(AttentionArgs a, int heads_per_tile, int tokens_per_tile, int head_tiles,
                    int q_tiles, float* ws_acc, float* ws_ml) {
  constexpr int DPT = DV / kThreads;
  PREFIXSIM_DYNAMIC_SMEM(float, smem);
  const int k_dim = a.layout.k_dim;
  float* qs = smem;
  float* ks = qs + RMAX * k_dim;
  float* vs = ks + kTileTokens * k_dim;
  float* ss = vs + (a.layout.v_in_k ? 0 : kTileTokens * DV);
  float* row_m = ss + RMAX * kTileTokens;
  float* row_l = row_m + RMAX;
  float* row_alpha = row_l + RMAX;

  const int seq = blockIdx.z;
  const int split = blockIdx.x, splits = gridDim.x;
  const int tile = blockIdx.y;
  const int kvh = tile / (head_tiles * q_tiles);
  const int ht = (tile / q_tiles) % head_tiles;
  const int qt = tile % q_tiles;
  const int ql = a.q_len[seq];
  const int q0 = qt * tokens_per_tile;
  if (q0 >= ql) return;  // the combine skips this tile too
  const int nq = min(tokens_per_tile, ql - q0);
  const int rows = nq * heads_per_tile;
  const int group = a.q_heads / a.layout.kv_heads;
  const int h0 = kvh * group + ht * heads_per_tile;
  const int64_t ctx = a.context[seq];
  const int64_t p_first = ctx - ql + q0;
  const int64_t lo = VisibleLo(p_first, a.window, a.chunk);
  const int64_t hi = p_first + nq - 1;
  const int64_t len = hi - lo + 1;
  int64_t per_split = (len + splits - 1) / splits;
  per_split = (per_split + kTileTokens - 1) / kTileTokens * kTileTokens;
  const int64_t s_lo = lo + split * per_split;
  const int64_t s_hi = min(hi, s_lo + per_split - 1);
  const int32_t* table = a.tables + int64_t(seq) * a.max_blocks;

  for (int i = threadIdx.x; i < RMAX * k_dim; i += kThreads) {
    const int r = i / k_dim, d = i % k_dim;
    float v = 0;
    if (r < rows) {
      const int64_t qrow = a.q_start[seq] + q0 + r / heads_per_tile;
      v = a.q[(qrow * a.q_heads + h0 + r % heads_per_tile) * k_dim + d];
    }
    qs[i] = v;
  }
  if (threadIdx.x < RMAX) {
    row_m[threadIdx.x] = -INFINITY;
    row_l[threadIdx.x] = 0;
  }
  float acc[DPT][RMAX];
#pragma unroll
  for (int i = 0; i < DPT; ++i) {
#pragma unroll
    for (int r = 0; r < RMAX; ++r) acc[i][r] = 0;
  }
  __syncthreads();

  for (int64_t t0 = s_lo; t0 <= s_hi; t0 += kTileTokens) {
    const int n = s_hi - t0 + 1 < kTileTokens ? int(s_hi - t0 + 1) : kTileTokens;
    LoadTile(a, table, t0, n, kvh, false, k_dim, ks);
    if (!a.layout.v_in_k) LoadTile(a, table, t0, n, kvh, true, DV, vs);
    __syncthreads();
    for (int i = threadIdx.x; i < RMAX * kTileTokens; i += kThreads) {
      const int r = i / kTileTokens, tt = i % kTileTokens;
      float s = -INFINITY;
      if (r < rows && tt < n) {
        const int64_t p = p_first + r / heads_per_tile;
        const int64_t t = t0 + tt;
        if (t <= p && t >= VisibleLo(p, a.window, a.chunk)) {
          const float4* qv = reinterpret_cast<const float4*>(qs + r * k_dim);
          const float4* kv = reinterpret_cast<const float4*>(ks + tt * k_dim);
          float dot = 0;
          for (int d = 0; d < k_dim / 4; ++d) {
            const float4 x = qv[d], y = kv[d];
            dot += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
          }
          s = dot * a.scale;
        }
      }
      ss[i] = s;
    }
    __syncthreads();
    if (threadIdx.x < RMAX) {
      const int r = threadIdx.x;
      float m_tile = -INFINITY;
      for (int tt = 0; tt < kTileTokens; ++tt) m_tile = fmaxf(m_tile, ss[r * kTileTokens + tt]);
      const float m_old = row_m[r];
      const float m_new = fmaxf(m_old, m_tile);
      float alpha = 1, sum = 0;
      if (m_new != -INFINITY) {
        alpha = m_old == -INFINITY ? 0.f : expf(m_old - m_new);
        for (int tt = 0; tt < kTileTokens; ++tt) {
          const float s = ss[r * kTileTokens + tt];
          const float p = s == -INFINITY ? 0.f : expf(s - m_new);
          ss[r * kTileTokens + tt] = p;
          sum += p;
        }
      } else {
        for (int tt = 0; tt < kTileTokens; ++tt) ss[r * kTileTokens + tt] = 0;
      }
      row_m[r] = m_new;
      row_l[r] = row_l[r] * alpha + sum;
      row_alpha[r] = alpha;
    }
    __syncthreads();
    const float* vt = a.layout.v_in_k ? ks : vs;
    const int v_stride = a.layout.v_in_k ? k_dim : DV;
    // Rows past `rows` (a decode fills 8 of 64 with GQA 8) are left alone: `break` keeps the
    // accumulator's indices compile-time constants and skips their work.
#pragma unroll
    for (int r = 0; r < RMAX; ++r) {
      if (r >= rows) break;
      const float alpha = row_alpha[r];
#pragma unroll
      for (int i = 0; i < DPT; ++i) acc[i][r] *= alpha;
    }
    for (int tt = 0; tt < n; ++tt) {
#pragma unroll
      for (int i = 0; i < DPT; ++i) {
        const float v = vt[tt * v_stride + threadIdx.x + i * kThreads];
#pragma unroll
        for (int r = 0; r < RMAX; ++r) {
          if (r >= rows) break;
          acc[i][r] += ss[r * kTileTokens + tt] * v;
        }
      }
    }
    __syncthreads();
  }

  const int64_t base = ((int64_t(seq) * gridDim.y + tile) * splits + split) * RMAX;
#pragma unroll
  for (int r = 0; r < RMAX; ++r) {
    if (r < rows) {
#pragma unroll
      for (int i = 0; i < DPT; ++i)
        ws_acc[(base + r) * DV + threadIdx.x + i * kThreads] = acc[i][r];
    }
  }
  if (int(threadIdx.x) < rows) {
    ws_ml[(base + threadIdx.x) * 2] = row_m[threadIdx.x];
    ws_ml[(base + threadIdx.x) * 2 + 1] = row_l[threadIdx.x];
  }
}

// Merges the splits of one tile: out = Σ_s acc_s e^(m_s - m) / Σ_s l_s e^(m_s - m).
template <int DV, int RMAX>
__global__ void __launch_bounds__(kThreads)
    CombineKernel(AttentionArgs a, int heads_per_tile, int tokens_per_tile, int head_tiles,
                  int q_tiles, int splits, const float* ws_acc, const float* ws_ml) {
  const int seq = blockIdx.y, tile = blockIdx.x;
  const int kvh = tile / (head_tiles * q_tiles);
  const int ht = (tile / q_tiles) % head_tiles;
  const int qt = tile % q_tiles;
  const int ql = a.q_len[seq];
  const int q0 = qt * tokens_per_tile;
  if (q0 >= ql) return;
  const int nq = min(tokens_per_tile, ql - q0);
  const int rows = nq * heads_per_tile;
  const int group = a.q_heads / a.layout.kv_heads;
  const int h0 = kvh * group + ht * heads_per_tile;
  const int64_t base = (int64_t(seq) * gridDim.x + tile) * splits * RMAX;
  for (int i = threadIdx.x; i < rows * DV; i += kThreads) {
    const int r = i / DV, d = i % DV;
    float m = -INFINITY;
    for (int s = 0; s < splits; ++s) m = fmaxf(m, ws_ml[(base + s * RMAX + r) * 2]);
    float num = 0, den = 0;
    for (int s = 0; s < splits; ++s) {
      const float ms = ws_ml[(base + s * RMAX + r) * 2];
      if (ms == -INFINITY) continue;
      const float w = expf(ms - m);
      den += w * ws_ml[(base + s * RMAX + r) * 2 + 1];
      num += w * ws_acc[(base + s * RMAX + r) * DV + d];
    }
    const int64_t qrow = a.q_start[seq] + q0 + r / heads_per_tile;
    a.out[(qrow * a.q_heads + h0 + r % heads_per_tile) * DV + d] = den > 0 ? num / den : 0.f;
  }
}

template <int DV, int RMAX>
size_t AttentionSmem(const AttentionArgs& a) {
  return sizeof(float) *
         (size_t(RMAX) * a.layout.k_dim + size_t(kTileTokens) * a.layout.k_dim +
          (a.layout.v_in_k ? 0 : size_t(kTileTokens) * DV) + size_t(RMAX) * kTileTokens + 3 * RMAX);
}

template <int DV, int RMAX>
cudaError_t Launch(const AttentionArgs& a, const AttentionPlan& plan, void* workspace,
                   cudaStream_t stream) {
  const size_t smem = AttentionSmem<DV, RMAX>(a);
  // Raised once per instantiation and size, not per launch: the host time between a timing
  // event and its launch would count when the kernel is short.
  static size_t raised = 0;
  cudaError_t e = cudaSuccess;
  if (smem > raised) {
    e = cudaFuncSetAttribute(AttentionKernel<DV, RMAX>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(smem));
    if (e != cudaSuccess) return e;
    raised = smem;
  }
  const int head_tiles = (a.q_heads / a.layout.kv_heads) / plan.heads_per_tile;
  const int q_tiles = (a.max_q_len + plan.tokens_per_tile - 1) / plan.tokens_per_tile;
  const int tiles = a.layout.kv_heads * head_tiles * q_tiles;
  float* ws_acc = static_cast<float*>(workspace);
  float* ws_ml = ws_acc + size_t(a.batch) * tiles * plan.splits * RMAX * DV;
  constexpr auto attention = &AttentionKernel<DV, RMAX>;
  constexpr auto combine = &CombineKernel<DV, RMAX>;
  PREFIXSIM_LAUNCH(attention, dim3(plan.splits, tiles, a.batch), kThreads, smem, stream)
  (a, plan.heads_per_tile, plan.tokens_per_tile, head_tiles, q_tiles, ws_acc, ws_ml);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  PREFIXSIM_LAUNCH(combine, dim3(tiles, a.batch), kThreads, 0, stream)
  (a, plan.heads_per_tile, plan.tokens_per_tile, head_tiles, q_tiles, plan.splits, ws_acc, ws_ml);
  return cudaGetLastError();
}

int RowsPerCta(int v_dim) { return v_dim == 128 ? 64 : v_dim == 256 ? 32 : 16; }

__global__ void AppendKernel(DevLayout L, uint8_t* pool, const int32_t* tables, int max_blocks,
                             const int32_t* seq, const int64_t* pos, const uint8_t* k_new,
                             const uint8_t* v_new) {
  const int token = blockIdx.x;
  const int32_t* table = tables + int64_t(seq[token]) * max_blocks;
  const int64_t t = pos[token];
  const int k16 = L.k_dim * L.elem_bytes / 16;
  const int v16 = L.v_in_k ? 0 : L.v_dim * L.elem_bytes / 16;
  const int per_head = k16 + v16;
  for (int c = threadIdx.x; c < L.kv_heads * per_head; c += blockDim.x) {
    const int h = c / per_head, part = c % per_head;
    const bool value = part >= k16;
    const int idx = value ? part - k16 : part;
    const uint8_t* src = (value ? v_new + (int64_t(token) * L.kv_heads + h) * v16 * 16
                                : k_new + (int64_t(token) * L.kv_heads + h) * k16 * 16) +
                         idx * 16;
    uint8_t* dst = pool + RowOffset(L, table, t, h, value) + idx * 16;
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  }
}

constexpr int kStateDim = 128;
constexpr int kStateRowsPerCta = 64;

__global__ void __launch_bounds__(kStateDim)
    StateStepKernel(uint8_t* pool, int64_t page_bytes, int64_t rows, const int32_t* state_block,
                    const float* g, const float* k, const float* q, const float* v, float* out) {
  const int seq = blockIdx.y;
  const int c = threadIdx.x;
  float* state = reinterpret_cast<float*>(pool + int64_t(state_block[seq]) * page_bytes);
  const float vc = v[seq * kStateDim + c];
  const int64_t r0 = int64_t(blockIdx.x) * kStateRowsPerCta;
  const int64_t r1 = min(rows, r0 + kStateRowsPerCta);
  float o = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const float s = g[seq * rows + r] * state[r * kStateDim + c] + k[seq * rows + r] * vc;
    state[r * kStateDim + c] = s;
    o += q[seq * rows + r] * s;
  }
  atomicAdd(out + seq * kStateDim + c, o);
}

__global__ void StateCopyKernel(uint8_t* pool, int64_t page_bytes, int64_t state_bytes,
                                const int32_t* src, const int32_t* dst) {
  const int pair = blockIdx.y;
  const uint8_t* s = pool + int64_t(src[pair]) * page_bytes;
  uint8_t* d = pool + int64_t(dst[pair]) * page_bytes;
  const int64_t n16 = state_bytes / 16;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n16;
       i += int64_t(gridDim.x) * blockDim.x) {
    reinterpret_cast<uint4*>(d)[i] = reinterpret_cast<const uint4*>(s)[i];
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (int64_t i = n16 * 16; i < state_bytes; ++i) d[i] = s[i];
  }
}

__device__ __forceinline__ uint32_t Hash(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return uint32_t(x);
}

__global__ void FillKernel(uint8_t* p, size_t n_words, int elem_bytes, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_words;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t h = Hash((uint64_t(seed) << 40) ^ i);
    uint32_t w;
    if (elem_bytes == 4) {
      w = __float_as_uint(float(h) * (2.0f / 4294967296.0f) - 1.0f);
    } else if (elem_bytes == 2) {
      const uint32_t lo = __float_as_uint(float(h & 0xffff) * (2.0f / 65536.0f) - 1.0f) >> 16;
      const uint32_t hi = __float_as_uint(float(h >> 16) * (2.0f / 65536.0f) - 1.0f) >> 16;
      w = lo | (hi << 16);
    } else {
      w = h & 0xb7b7b7b7u;  // exponent <= 6 (|v| < 2): never the NaN pattern
    }
    reinterpret_cast<uint32_t*>(p)[i] = w;
  }
}

}  // namespace

const char* PlanAttention(const AttentionArgs& a, int num_sms, AttentionPlan* plan) {
  const DevLayout& L = a.layout;
  if (L.v_dim != 128 && L.v_dim != 256 && L.v_dim != 512) return "v_dim must be 128, 256 or 512";
  if (L.elem_bytes != 1 && L.elem_bytes != 2) return "elements must be bf16 or fp8";
  if ((L.k_dim * L.elem_bytes) % 16 != 0 || L.k_dim % 16 != 0) {
    return "k_dim must be a multiple of 16";
  }
  if (L.v_in_k && L.v_dim > L.k_dim) return "v_in_k needs v_dim <= k_dim";
  if (a.q_heads % L.kv_heads != 0) return "q_heads must be a multiple of kv_heads";
  const int rmax = RowsPerCta(L.v_dim);
  const int group = a.q_heads / L.kv_heads;
  int nh = std::min(group, rmax);
  while (group % nh != 0) --nh;
  plan->rows_per_cta = rmax;
  plan->heads_per_tile = nh;
  plan->tokens_per_tile = rmax / nh;
  const int head_tiles = group / nh;
  const int q_tiles = (a.max_q_len + plan->tokens_per_tile - 1) / plan->tokens_per_tile;
  plan->tiles_per_seq = L.kv_heads * head_tiles * q_tiles;
  // Enough CTAs for two waves over the multiprocessors, but no split shorter than split_keys.
  const int64_t ctas = int64_t(a.batch) * plan->tiles_per_seq;
  const int64_t want = (2 * int64_t(num_sms) + ctas - 1) / ctas;
  const int64_t most = std::max<int64_t>(1, a.max_keys / std::max<int64_t>(1, a.split_keys));
  plan->splits = int(std::max<int64_t>(1, std::min(want, most)));
  plan->workspace_bytes = sizeof(float) * size_t(ctas) * plan->splits * rmax * (L.v_dim + 2);
  return "";
}

cudaError_t LaunchAttention(const AttentionArgs& a, const AttentionPlan& plan, void* workspace,
                            cudaStream_t stream) {
  switch (a.layout.v_dim) {
    case 128:
      return Launch<128, 64>(a, plan, workspace, stream);
    case 256:
      return Launch<256, 32>(a, plan, workspace, stream);
    case 512:
      return Launch<512, 16>(a, plan, workspace, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchAppend(const DevLayout& layout, uint8_t* pool, const int32_t* tables,
                         int max_blocks, const int32_t* seq, const int64_t* pos, int num_tokens,
                         const uint8_t* k_new, const uint8_t* v_new, cudaStream_t stream) {
  if (num_tokens == 0) return cudaSuccess;
  PREFIXSIM_LAUNCH(AppendKernel, num_tokens, 128, 0, stream)
  (layout, pool, tables, max_blocks, seq, pos, k_new, v_new);
  return cudaGetLastError();
}

cudaError_t LaunchStateStep(uint8_t* pool, int64_t page_bytes, int64_t state_bytes,
                            const int32_t* state_block, int batch, const float* g, const float* k,
                            const float* q, const float* v, float* out, cudaStream_t stream) {
  const int64_t rows = state_bytes / (4 * kStateDim);
  cudaError_t e = cudaMemsetAsync(out, 0, sizeof(float) * batch * kStateDim, stream);
  if (e != cudaSuccess || rows == 0) return e;
  const dim3 grid(unsigned((rows + kStateRowsPerCta - 1) / kStateRowsPerCta), batch);
  PREFIXSIM_LAUNCH(StateStepKernel, grid, kStateDim, 0, stream)
  (pool, page_bytes, rows, state_block, g, k, q, v, out);
  return cudaGetLastError();
}

cudaError_t LaunchStateCopy(uint8_t* pool, int64_t page_bytes, int64_t state_bytes,
                            const int32_t* src, const int32_t* dst, int pairs,
                            cudaStream_t stream) {
  if (pairs == 0) return cudaSuccess;
  const int64_t n16 = state_bytes / 16;
  const unsigned chunks =
      unsigned(std::max<int64_t>(1, std::min<int64_t>(64, (n16 + 4095) / 4096)));
  PREFIXSIM_LAUNCH(StateCopyKernel, dim3(chunks, pairs), 256, 0, stream)
  (pool, page_bytes, state_bytes, src, dst);
  return cudaGetLastError();
}

cudaError_t LaunchFillRandom(void* p, size_t bytes, int elem_bytes, uint32_t seed,
                             cudaStream_t stream) {
  PREFIXSIM_LAUNCH(FillKernel, 1024, 256, 0, stream)
  (static_cast<uint8_t*>(p), bytes / 4, elem_bytes, seed);
  return cudaGetLastError();
}

}  // namespace prefixsim::cuda
