// Page layouts of the CUDA backend's kernels and their CPU float references (docs/cuda.md).
//
// Plain C++ with no Abseil and no CUDA: the same file is compiled into the core library (its unit
// tests run in CI) and into the standalone CUDA tool (bench/cuda/), which checks every kernel
// against these functions before timing it. Errors are therefore reported as strings, not
// absl::Status.
#ifndef PREFIXSIM_SIM_CUDA_REFERENCE_H_
#define PREFIXSIM_SIM_CUDA_REFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace prefixsim::cuda {

// Element types of a KV page. fp8 is e4m3 (OCP "fn" variant, no infinities), unscaled.
enum class KvElem { kBf16 = 2, kFp8 = 1 };
inline int ElemBytes(KvElem e) { return static_cast<int>(e); }

float Bf16ToFloat(uint16_t v);
uint16_t FloatToBf16(float f);  // round to nearest even
float Fp8E4m3ToFloat(uint8_t v);
uint8_t FloatToFp8E4m3(float f);  // round to nearest, saturating at ±448
float LoadElem(const uint8_t* p, KvElem e);
void StoreElem(uint8_t* p, KvElem e, float v);

// The layout of one layer's pages in a KV cache group, as the plan resolves it (KvGroup):
// `block_size` tokens per block, one block per `page_bytes` (padding included). A page holds
//   [K rows: block_size slots x kv_heads x k_dim][V rows: block_size x kv_heads x v_dim][padding]
// and, for MLA (v_in_k), only the K rows: a latent row of k_dim = latent + rope elements whose
// first v_dim elements are the value. The attention kernel walks blocks of `kernel_block_size`
// tokens (the plan's kernel_block_size, block_size by default): kernel block e is sub-block
// e % (block_size / kernel_block_size) of page e / (block_size / kernel_block_size).
struct PageLayout {
  int block_size = 16;
  int kernel_block_size = 16;
  int64_t page_bytes = 0;
  int kv_heads = 1;
  int k_dim = 128;
  int v_dim = 128;
  bool v_in_k = false;
  KvElem elem = KvElem::kBf16;

  int64_t KRowBytes() const { return int64_t{k_dim} * ElemBytes(elem); }
  int64_t VRowBytes() const { return int64_t{v_dim} * ElemBytes(elem); }
  // Bytes of the page that hold data; the rest of page_bytes is padding nobody writes.
  int64_t UsedBytes() const {
    return int64_t{block_size} * kv_heads * (KRowBytes() + (v_in_k ? 0 : VRowBytes()));
  }
  int SubBlocks() const { return block_size / kernel_block_size; }
  // Byte offsets, from the start of the pool, of token slot `t` of the sequence whose kernel
  // block table is `table` (entries of kernel blocks), for kv head `h`.
  int64_t KOffset(const int32_t* table, int64_t t, int h) const;
  int64_t VOffset(const int32_t* table, int64_t t, int h) const;
  // Empty when the layout is usable; else why not.
  std::string Check() const;
};

// Which keys a query at absolute position p (0-based) sees: [lo, p] where lo = max(0, p-window+1)
// for a sliding window (window > 0), the start of p's chunk for chunked-local attention (chunk >
// 0), else 0.
struct Visibility {
  int64_t window = 0;
  int64_t chunk = 0;
  int64_t Lo(int64_t p) const;
};

// One step of paged attention over a batch: sequence i has context[i] tokens in its pages (the
// step's new tokens included: they were appended first) and q_len[i] query tokens, the last
// q_len[i] positions (causal among themselves). q_len 1 is decode, 1 + k a speculative verify,
// larger a prefill chunk against its paged prefix. Queries: q_heads heads of k_dim floats per
// token, q[(i's first query row + j) * q_heads + head][k_dim], rows of all sequences
// concatenated. Head `head` reads kv head head / (q_heads / kv_heads). Output likewise with v_dim.
struct AttentionBatch {
  PageLayout layout;
  Visibility vis;
  int q_heads = 1;
  float scale = 1.0f;
  std::vector<int64_t> context;
  std::vector<int32_t> q_len;
  std::vector<std::vector<int32_t>> tables;  // kernel block ids per sequence
  int64_t TotalQueries() const;
};

// out.size() = TotalQueries() * q_heads * v_dim.
void ReferenceAttention(const AttentionBatch& b, const uint8_t* pool, const float* q,
                        std::vector<float>* out);

// The same attention over keys/values already gathered into dense per-sequence arrays
// (k[i][t][kv_head][k_dim], v[i][t][kv_head][v_dim], float): what the paged form must equal.
void DenseAttention(const AttentionBatch& b, const std::vector<std::vector<float>>& k,
                    const std::vector<std::vector<float>>& v, const float* q,
                    std::vector<float>* out);

// MLA in its un-absorbed form for one sequence: per head, keys k = [W_uk c ; rope], values
// v = W_uv c, over the latent rows c (rows of latent + rope floats). Used to show that the
// absorbed form the kernel computes (q_lat = W_uk^T q_nope; out = W_uv (Σ p c)) is the same.
// w_uk, w_uv: per head [nope_dim][latent]; q: [rows][heads][nope_dim + rope]; out [rows][heads]
// [v_head_dim = nope_dim].
void MlaUnabsorbed(const std::vector<float>& latent_rows, int latent, int rope, int64_t context,
                   int q_len, int heads, int nope_dim, const std::vector<float>& w_uk,
                   const std::vector<float>& w_uv, const std::vector<float>& q, float scale,
                   std::vector<float>* out);

// The KV append of a step: sequence i writes its last n_new[i] tokens (positions context[i] -
// n_new[i] .. context[i]-1) from k_new / v_new (rows of kv_heads x k_dim / v_dim elements, already
// in the page's element type, sequences concatenated) into their page slots. Padding is untouched.
void ReferenceAppend(const PageLayout& layout, const std::vector<int64_t>& context,
                     const std::vector<int32_t>& n_new,
                     const std::vector<std::vector<int32_t>>& tables, const uint8_t* k_new,
                     const uint8_t* v_new, uint8_t* pool);

// A linear-attention / mamba state step on one state page per sequence. The state is float32
// rows of kStateRowDim; rows = state_bytes / (4 * kStateRowDim), the remainder of the page is not
// touched. Per sequence i with inputs g, k, q (rows floats each) and v (kStateRowDim floats):
//   S[r][c] <- g[r] * S[r][c] + k[r] * v[c];   out[c] = Σ_r q[r] * S[r][c] (after the update)
// (a gated delta-free linear-attention update: what matters for cost is one read and one write of
// the page). Page of sequence i: pool + state_block[i] * page_bytes.
inline constexpr int kStateRowDim = 128;
struct StateBatch {
  int64_t state_bytes = 0;
  int64_t page_bytes = 0;
  std::vector<int32_t> state_block;
  int64_t Rows() const { return state_bytes / (4 * kStateRowDim); }
};
// g, k, q: [seq][rows]; v, out: [seq][kStateRowDim].
void ReferenceStateStep(const StateBatch& b, const float* g, const float* k, const float* q,
                        const float* v, uint8_t* pool, std::vector<float>* out);
// Copies the state page block src[i] to block dst[i] (state_bytes of it), as the engine does when
// it caches a state at a block boundary.
void ReferenceStateCopy(const StateBatch& b, const std::vector<int32_t>& src,
                        const std::vector<int32_t>& dst, uint8_t* pool);

// ‖a - b‖ / ‖b‖ (0 when both are 0); infinity if a holds a NaN or the sizes differ.
double RelativeError(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace prefixsim::cuda

#endif  // PREFIXSIM_SIM_CUDA_REFERENCE_H_
