// The CPU references of the CUDA backend's kernels (sim/cuda/reference.h): the device tool checks
// every kernel against them, so they are checked here, in CI, against independent forms of the
// same computation.
#include "sim/cuda/reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

namespace prefixsim::cuda {
namespace {

// bf16 GQA layout: 16-token blocks split into kernel blocks of 8, 2 kv heads of 16 dims, pages
// padded by 64 bytes.
PageLayout SmallLayout(KvElem elem = KvElem::kBf16) {
  PageLayout L;
  L.block_size = 16;
  L.kernel_block_size = 8;
  L.kv_heads = 2;
  L.k_dim = 16;
  L.v_dim = 16;
  L.elem = elem;
  L.page_bytes = L.UsedBytes() + 64;
  return L;
}

struct Fixture {
  AttentionBatch batch;
  std::vector<uint8_t> pool;
  std::vector<float> q;
  // The keys and values each sequence's table points at, gathered densely.
  std::vector<std::vector<float>> k, v;
};

// Sequences of `contexts` tokens with `q_lens` queries; kernel blocks drawn in shuffled order so
// that no sequence's blocks are contiguous.
Fixture MakeFixture(const PageLayout& L, std::vector<int64_t> contexts, std::vector<int32_t> q_lens,
                    int q_heads, Visibility vis = {}) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Fixture f;
  f.batch.layout = L;
  f.batch.vis = vis;
  f.batch.q_heads = q_heads;
  f.batch.scale = 1.0f / std::sqrt(static_cast<float>(L.k_dim));
  f.batch.context = contexts;
  f.batch.q_len = q_lens;
  int64_t kblocks = 0;
  for (int64_t c : contexts) kblocks += (c + L.kernel_block_size - 1) / L.kernel_block_size;
  const int64_t pages = kblocks / L.SubBlocks() + 2;
  std::vector<int32_t> ids(pages * L.SubBlocks());
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  f.pool.resize(pages * L.page_bytes);
  for (size_t i = 0; i < f.pool.size(); i += ElemBytes(L.elem)) {
    StoreElem(f.pool.data() + i, L.elem, u(rng));
  }
  size_t next = 0;
  const int eb = ElemBytes(L.elem);
  for (int64_t c : contexts) {
    const int64_t n = (c + L.kernel_block_size - 1) / L.kernel_block_size;
    f.batch.tables.emplace_back(ids.begin() + next, ids.begin() + next + n);
    next += n;
    std::vector<float> k(c * L.kv_heads * L.k_dim), v(c * L.kv_heads * L.v_dim);
    const int32_t* table = f.batch.tables.back().data();
    for (int64_t t = 0; t < c; ++t) {
      for (int h = 0; h < L.kv_heads; ++h) {
        for (int d = 0; d < L.k_dim; ++d) {
          k[(t * L.kv_heads + h) * L.k_dim + d] =
              LoadElem(f.pool.data() + L.KOffset(table, t, h) + d * eb, L.elem);
        }
        for (int d = 0; d < L.v_dim; ++d) {
          v[(t * L.kv_heads + h) * L.v_dim + d] =
              LoadElem(f.pool.data() + L.VOffset(table, t, h) + d * eb, L.elem);
        }
      }
    }
    f.k.push_back(std::move(k));
    f.v.push_back(std::move(v));
  }
  f.q.resize(f.batch.TotalQueries() * q_heads * L.k_dim);
  for (float& x : f.q) x = u(rng);
  return f;
}

TEST(CudaReferenceTest, ElementConversionsRoundTrip) {
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.5f)), 1.5f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-0.25f)), -0.25f);
  EXPECT_NEAR(Bf16ToFloat(FloatToBf16(0.1f)), 0.1f, 1e-3);
  EXPECT_EQ(Fp8E4m3ToFloat(0x38), 1.0f);    // exponent 7 = bias
  EXPECT_EQ(Fp8E4m3ToFloat(0x7e), 448.0f);  // the largest finite value
  EXPECT_TRUE(std::isnan(Fp8E4m3ToFloat(0x7f)));
  EXPECT_EQ(Fp8E4m3ToFloat(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(FloatToFp8E4m3(-1.0f), 0xb8);
  EXPECT_EQ(FloatToFp8E4m3(1000.0f), 0x7e);  // saturates
}

TEST(CudaReferenceTest, LayoutRejectsPagesTooSmallAndOddSplits) {
  PageLayout L = SmallLayout();
  EXPECT_EQ(L.Check(), "");
  L.page_bytes = L.UsedBytes() - 16;
  EXPECT_NE(L.Check(), "");
  L = SmallLayout();
  L.kernel_block_size = 5;
  EXPECT_NE(L.Check(), "");
}

TEST(CudaReferenceTest, KernelBlocksAddressSubBlocksOfPagesAndValuesFollowKeys) {
  const PageLayout L = SmallLayout();
  // Kernel block 5 = sub-block 1 of page 2.
  const int32_t table[] = {5};
  const int64_t k_row = L.KRowBytes();
  EXPECT_EQ(L.KOffset(table, 3, 1), 2 * L.page_bytes + ((8 + 3) * 2 + 1) * k_row);
  EXPECT_EQ(L.VOffset(table, 3, 1),
            2 * L.page_bytes + 16 * 2 * k_row + ((8 + 3) * 2 + 1) * L.VRowBytes());
}

TEST(CudaReferenceTest, PagedAttentionEqualsDenseAttentionOverGatheredKv) {
  for (KvElem elem : {KvElem::kBf16, KvElem::kFp8}) {
    // Decode, a speculative verify of 1 + 3, a page boundary, GQA 4:2.
    Fixture f = MakeFixture(SmallLayout(elem), {1, 17, 40}, {1, 4, 4}, 4);
    std::vector<float> paged, dense;
    ReferenceAttention(f.batch, f.pool.data(), f.q.data(), &paged);
    DenseAttention(f.batch, f.k, f.v, f.q.data(), &dense);
    ASSERT_EQ(paged.size(), f.batch.TotalQueries() * 4 * 16u);
    EXPECT_LT(RelativeError(paged, dense), 1e-6) << "elem " << ElemBytes(elem);
    // The same blocks in another order give another answer: the tables are really followed.
    std::reverse(f.batch.tables[2].begin(), f.batch.tables[2].end());
    std::vector<float> swapped;
    ReferenceAttention(f.batch, f.pool.data(), f.q.data(), &swapped);
    EXPECT_GT(RelativeError(swapped, dense), 1e-2);
  }
}

TEST(CudaReferenceTest, SlidingWindowEqualsAttentionOverTheLastWTokens) {
  const int64_t ctx = 50, window = 12;
  Fixture f = MakeFixture(SmallLayout(), {ctx}, {1}, 2, Visibility{window, 0});
  std::vector<float> windowed;
  ReferenceAttention(f.batch, f.pool.data(), f.q.data(), &windowed);
  // Dense attention over only the last `window` keys and values.
  const PageLayout& L = f.batch.layout;
  AttentionBatch last = f.batch;
  last.vis = {};
  last.context = {window};
  std::vector<std::vector<float>> k = {
      std::vector<float>(f.k[0].end() - window * L.kv_heads * L.k_dim, f.k[0].end())};
  std::vector<std::vector<float>> v = {
      std::vector<float>(f.v[0].end() - window * L.kv_heads * L.v_dim, f.v[0].end())};
  std::vector<float> dense;
  DenseAttention(last, k, v, f.q.data(), &dense);
  EXPECT_LT(RelativeError(windowed, dense), 1e-6);
  std::vector<float> full;
  f.batch.vis = {};
  ReferenceAttention(f.batch, f.pool.data(), f.q.data(), &full);
  EXPECT_GT(RelativeError(full, dense), 1e-2);
}

TEST(CudaReferenceTest, ChunkedLocalSeesOnlyItsChunk) {
  Fixture f = MakeFixture(SmallLayout(), {40}, {1}, 2, Visibility{0, 32});
  std::vector<float> chunked;
  ReferenceAttention(f.batch, f.pool.data(), f.q.data(), &chunked);
  // Position 39 is in chunk [32, 40): the same as a window of 8.
  f.batch.vis = Visibility{8, 0};
  std::vector<float> window8;
  ReferenceAttention(f.batch, f.pool.data(), f.q.data(), &window8);
  EXPECT_EQ(chunked, window8);
}

TEST(CudaReferenceTest, PrefillChunkIsCausalAgainstItsPagedPrefix) {
  const int64_t ctx = 45;
  const int q = 9;
  Fixture f = MakeFixture(SmallLayout(), {ctx}, {q}, 4);
  std::vector<float> chunk;
  ReferenceAttention(f.batch, f.pool.data(), f.q.data(), &chunk);
  const int row = 4 * 16;  // q_heads x v_dim
  for (int j = 0; j < q; ++j) {
    // Query j of the chunk sees exactly what a decode at context ctx - q + j + 1 sees.
    AttentionBatch one = f.batch;
    one.context = {ctx - q + j + 1};
    one.q_len = {1};
    std::vector<float> decode;
    ReferenceAttention(one, f.pool.data(), f.q.data() + j * 4 * 16, &decode);
    std::vector<float> got(chunk.begin() + j * row, chunk.begin() + (j + 1) * row);
    EXPECT_LT(RelativeError(got, decode), 1e-6) << "query " << j;
  }
  // Without the mask the first query would see the chunk's later keys.
  AttentionBatch full_ctx = f.batch;
  full_ctx.context = {ctx};
  full_ctx.q_len = {1};
  std::vector<float> last;
  ReferenceAttention(full_ctx, f.pool.data(), f.q.data(), &last);
  std::vector<float> first(chunk.begin(), chunk.begin() + row);
  EXPECT_GT(RelativeError(first, last), 1e-2);
}

TEST(CudaReferenceTest, MlaAbsorbedEqualsUnabsorbed) {
  const int latent = 32, rope = 16, heads = 2, nope = 8, q_len = 3;
  const int64_t ctx = 21;
  PageLayout L;
  L.block_size = 8;
  L.kernel_block_size = 4;
  L.kv_heads = 1;
  L.k_dim = latent + rope;
  L.v_dim = latent;
  L.v_in_k = true;
  L.page_bytes = L.UsedBytes() + 32;
  Fixture f = MakeFixture(L, {ctx}, {q_len}, heads);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> w_uk(heads * nope * latent), w_uv(heads * nope * latent);
  for (float& x : w_uk) x = u(rng);
  for (float& x : w_uv) x = u(rng);
  // Un-absorbed queries: [nope ; rope] per head.
  std::vector<float> q(q_len * heads * (nope + rope));
  for (float& x : q) x = u(rng);
  // Absorbed: q_lat = W_uk^T q_nope, the rope part as is; the kernel's scale is the model's.
  const float scale = 1.0f / std::sqrt(static_cast<float>(nope + rope));
  std::vector<float> q_abs(q_len * heads * L.k_dim);
  for (int j = 0; j < q_len; ++j) {
    for (int h = 0; h < heads; ++h) {
      const float* qn = q.data() + (j * heads + h) * (nope + rope);
      float* qa = q_abs.data() + (j * heads + h) * L.k_dim;
      for (int l = 0; l < latent; ++l) {
        double s = 0;
        for (int n = 0; n < nope; ++n) s += w_uk[(h * nope + n) * latent + l] * qn[n];
        qa[l] = static_cast<float>(s);
      }
      for (int r = 0; r < rope; ++r) qa[latent + r] = qn[nope + r];
    }
  }
  f.batch.scale = scale;
  std::vector<float> out_latent;
  ReferenceAttention(f.batch, f.pool.data(), q_abs.data(), &out_latent);
  std::vector<float> absorbed(q_len * heads * nope);
  for (int j = 0; j < q_len; ++j) {
    for (int h = 0; h < heads; ++h) {
      for (int n = 0; n < nope; ++n) {
        double s = 0;
        for (int l = 0; l < latent; ++l) {
          s += w_uv[(h * nope + n) * latent + l] * out_latent[(j * heads + h) * latent + l];
        }
        absorbed[(j * heads + h) * nope + n] = static_cast<float>(s);
      }
    }
  }
  // The latent rows as the pages hold them (bf16), in token order.
  std::vector<float> rows = f.k[0];
  std::vector<float> unabsorbed;
  MlaUnabsorbed(rows, latent, rope, ctx, q_len, heads, nope, w_uk, w_uv, q, scale, &unabsorbed);
  EXPECT_LT(RelativeError(absorbed, unabsorbed), 1e-5);
  // And it is not trivially so: dropping the rope part changes the answer.
  for (int j = 0; j < q_len * heads; ++j) {
    for (int r = 0; r < rope; ++r) q_abs[j * L.k_dim + latent + r] = 0;
  }
  std::vector<float> no_rope;
  ReferenceAttention(f.batch, f.pool.data(), q_abs.data(), &no_rope);
  EXPECT_GT(RelativeError(no_rope, out_latent), 1e-3);
}

TEST(CudaReferenceTest, AppendWritesTheNewTokensSlotsAndNothingElse) {
  const PageLayout L = SmallLayout();
  Fixture f = MakeFixture(L, {18, 7}, {1, 1}, 2);
  const std::vector<int32_t> n_new = {5, 2};  // the first crosses a kernel block and a page
  const int rows = 7;
  std::vector<uint8_t> k_new(rows * L.kv_heads * L.KRowBytes()),
      v_new(rows * L.kv_heads * L.VRowBytes());
  for (size_t i = 0; i < k_new.size(); ++i) k_new[i] = static_cast<uint8_t>(i * 7 + 1);
  for (size_t i = 0; i < v_new.size(); ++i) v_new[i] = static_cast<uint8_t>(i * 11 + 3);
  std::vector<uint8_t> pool = f.pool;
  ReferenceAppend(L, f.batch.context, n_new, f.batch.tables, k_new.data(), v_new.data(),
                  pool.data());
  // Each new row is where the layout says token t's row is.
  int row = 0;
  for (size_t i = 0; i < n_new.size(); ++i) {
    for (int j = 0; j < n_new[i]; ++j, ++row) {
      const int64_t t = f.batch.context[i] - n_new[i] + j;
      for (int h = 0; h < L.kv_heads; ++h) {
        EXPECT_EQ(std::memcmp(pool.data() + L.KOffset(f.batch.tables[i].data(), t, h),
                              k_new.data() + (row * L.kv_heads + h) * L.KRowBytes(), L.KRowBytes()),
                  0);
        EXPECT_EQ(std::memcmp(pool.data() + L.VOffset(f.batch.tables[i].data(), t, h),
                              v_new.data() + (row * L.kv_heads + h) * L.VRowBytes(), L.VRowBytes()),
                  0);
      }
    }
  }
  // Exactly the new rows' bytes changed at most; no padding byte changed.
  int64_t changed = 0;
  for (size_t i = 0; i < pool.size(); ++i) {
    if (pool[i] == f.pool[i]) continue;
    ++changed;
    EXPECT_LT(static_cast<int64_t>(i % L.page_bytes), L.UsedBytes()) << "padding byte " << i;
  }
  EXPECT_LE(changed, rows * L.kv_heads * (L.KRowBytes() + L.VRowBytes()));
  EXPECT_GT(changed, rows * L.kv_heads * (L.KRowBytes() + L.VRowBytes()) / 2);
}

TEST(CudaReferenceTest, StateStepUpdatesOnePagePerSequenceAndCopyMovesIt) {
  StateBatch b;
  b.state_bytes = 2 * kStateRowDim * 4;  // two rows
  b.page_bytes = b.state_bytes + 512;    // padding
  b.state_block = {2, 0};
  std::vector<float> pool_f(4 * b.page_bytes / 4);
  for (size_t i = 0; i < pool_f.size(); ++i) pool_f[i] = 0.001f * static_cast<float>(i % 997);
  std::vector<uint8_t> pool(pool_f.size() * 4);
  std::memcpy(pool.data(), pool_f.data(), pool.size());
  const std::vector<uint8_t> before = pool;
  const std::vector<float> g = {0.5f, 1.0f, 0.25f, 2.0f}, k = {1, 2, -1, 0}, q = {1, -1, 0.5f, 3};
  std::vector<float> v(2 * kStateRowDim);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.01f * static_cast<float>(i);
  std::vector<float> out;
  ReferenceStateStep(b, g.data(), k.data(), q.data(), v.data(), pool.data(), &out);
  ASSERT_EQ(out.size(), 2u * kStateRowDim);
  const int64_t words = b.page_bytes / 4;
  for (int i = 0; i < 2; ++i) {
    const int64_t page = b.state_block[i] * words;
    for (int c = 0; c < kStateRowDim; c += 37) {
      double o = 0;
      for (int r = 0; r < 2; ++r) {
        const float s0 = pool_f[page + r * kStateRowDim + c];
        const float s1 = g[i * 2 + r] * s0 + k[i * 2 + r] * v[i * kStateRowDim + c];
        float got;
        std::memcpy(&got, pool.data() + (page + r * kStateRowDim + c) * 4, 4);
        EXPECT_FLOAT_EQ(got, s1);
        o += q[i * 2 + r] * s1;
      }
      EXPECT_NEAR(out[i * kStateRowDim + c], o, 1e-5);
    }
  }
  // Pages 1 and 3 and every page's padding are untouched.
  for (size_t i = 0; i < pool.size(); ++i) {
    const int64_t page = static_cast<int64_t>(i) / b.page_bytes;
    const bool in_state =
        (page == 0 || page == 2) && static_cast<int64_t>(i) % b.page_bytes < b.state_bytes;
    if (!in_state) {
      ASSERT_EQ(pool[i], before[i]) << "byte " << i;
    }
  }
  // The copy caches page 2's state in page 3, padding excluded.
  const std::vector<uint8_t> stepped = pool;
  ReferenceStateCopy(b, {2}, {3}, pool.data());
  EXPECT_EQ(
      std::memcmp(pool.data() + 3 * b.page_bytes, stepped.data() + 2 * b.page_bytes, b.state_bytes),
      0);
  EXPECT_EQ(
      std::memcmp(pool.data() + 3 * b.page_bytes + b.state_bytes,
                  before.data() + 3 * b.page_bytes + b.state_bytes, b.page_bytes - b.state_bytes),
      0);
}

TEST(CudaReferenceTest, RelativeErrorFlagsNansAndSizeMismatch) {
  EXPECT_EQ(RelativeError({1, 2}, {1, 2}), 0);
  EXPECT_NEAR(RelativeError({1, 0}, {2, 0}), 0.5, 1e-12);
  EXPECT_TRUE(std::isinf(RelativeError({NAN, 0}, {1, 0})));
  EXPECT_TRUE(std::isinf(RelativeError({1}, {1, 2})));
}

}  // namespace
}  // namespace prefixsim::cuda
