#include "sim/cuda/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace prefixsim::cuda {

float Bf16ToFloat(uint16_t v) {
  const uint32_t bits = uint32_t{v} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float Fp8E4m3ToFloat(uint8_t v) {
  const int sign = v >> 7;
  const int exp = (v >> 3) & 0xf;
  const int mant = v & 7;
  float f;
  if (exp == 0xf && mant == 7) {
    f = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant) / 8.0f, -6);
  } else {
    f = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
  }
  return sign ? -f : f;
}

uint8_t FloatToFp8E4m3(float f) {
  // Exhaustive nearest search: 127 finite magnitudes, only used to make test data.
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::min(std::fabs(f), 448.0f);
  uint8_t best = 0;
  float best_err = std::numeric_limits<float>::infinity();
  for (int m = 0; m < 0x7f; ++m) {
    const float err = std::fabs(Fp8E4m3ToFloat(static_cast<uint8_t>(m)) - a);
    if (err < best_err) {
      best_err = err;
      best = static_cast<uint8_t>(m);
    }
  }
  return best | sign;
}

float LoadElem(const uint8_t* p, KvElem e) {
  if (e == KvElem::kFp8) return Fp8E4m3ToFloat(*p);
  uint16_t v;
  std::memcpy(&v, p, 2);
  return Bf16ToFloat(v);
}

void StoreElem(uint8_t* p, KvElem e, float v) {
  if (e == KvElem::kFp8) {
    *p = FloatToFp8E4m3(v);
    return;
  }
  const uint16_t b = FloatToBf16(v);
  std::memcpy(p, &b, 2);
}

int64_t PageLayout::KOffset(const int32_t* table, int64_t t, int h) const {
  const int32_t e = table[t / kernel_block_size];
  const int64_t slot = int64_t{e % SubBlocks()} * kernel_block_size + t % kernel_block_size;
  return int64_t{e / SubBlocks()} * page_bytes + (slot * kv_heads + h) * KRowBytes();
}

int64_t PageLayout::VOffset(const int32_t* table, int64_t t, int h) const {
  if (v_in_k) return KOffset(table, t, h);
  const int32_t e = table[t / kernel_block_size];
  const int64_t slot = int64_t{e % SubBlocks()} * kernel_block_size + t % kernel_block_size;
  return int64_t{e / SubBlocks()} * page_bytes + int64_t{block_size} * kv_heads * KRowBytes() +
         (slot * kv_heads + h) * VRowBytes();
}

std::string PageLayout::Check() const {
  if (block_size <= 0 || kernel_block_size <= 0 || block_size % kernel_block_size != 0) {
    return "block_size must be a positive multiple of kernel_block_size";
  }
  if (kv_heads <= 0 || k_dim <= 0 || v_dim <= 0) return "heads and dims must be positive";
  if (v_in_k && v_dim > k_dim) return "v_in_k needs v_dim <= k_dim";
  if (UsedBytes() > page_bytes) {
    return "page_bytes " + std::to_string(page_bytes) + " < the " + std::to_string(UsedBytes()) +
           " bytes a page's rows need";
  }
  // The kernels load 16 bytes at a time.
  if (KRowBytes() % 16 != 0 || (!v_in_k && VRowBytes() % 16 != 0) || page_bytes % 16 != 0) {
    return "rows and pages must be multiples of 16 bytes";
  }
  return "";
}

int64_t Visibility::Lo(int64_t p) const {
  if (window > 0) return std::max<int64_t>(0, p - window + 1);
  if (chunk > 0) return p / chunk * chunk;
  return 0;
}

int64_t AttentionBatch::TotalQueries() const {
  int64_t n = 0;
  for (int32_t l : q_len) n += l;
  return n;
}

namespace {

// Softmax attention of one query row over keys [lo, hi], keys and values fetched by callbacks.
template <typename KeyDot, typename ValueAt>
void AttendRow(int64_t lo, int64_t hi, int v_dim, float scale, KeyDot key_dot, ValueAt value_at,
               float* out) {
  std::vector<double> s(static_cast<size_t>(hi - lo + 1));
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t t = lo; t <= hi; ++t) {
    s[t - lo] = static_cast<double>(key_dot(t)) * scale;
    m = std::max(m, s[t - lo]);
  }
  double l = 0;
  std::vector<double> acc(v_dim, 0.0);
  for (int64_t t = lo; t <= hi; ++t) {
    const double p = std::exp(s[t - lo] - m);
    l += p;
    for (int d = 0; d < v_dim; ++d) acc[d] += p * value_at(t, d);
  }
  for (int d = 0; d < v_dim; ++d) out[d] = static_cast<float>(acc[d] / l);
}

}  // namespace

void ReferenceAttention(const AttentionBatch& b, const uint8_t* pool, const float* q,
                        std::vector<float>* out) {
  const PageLayout& L = b.layout;
  const int eb = ElemBytes(L.elem);
  const int group = b.q_heads / L.kv_heads;
  out->assign(static_cast<size_t>(b.TotalQueries()) * b.q_heads * L.v_dim, 0.0f);
  int64_t row = 0;
  for (size_t i = 0; i < b.context.size(); ++i) {
    const int32_t* table = b.tables[i].data();
    for (int j = 0; j < b.q_len[i]; ++j, ++row) {
      const int64_t p = b.context[i] - b.q_len[i] + j;
      for (int h = 0; h < b.q_heads; ++h) {
        const int kvh = h / group;
        const float* qr = q + (row * b.q_heads + h) * L.k_dim;
        auto key_dot = [&](int64_t t) {
          const uint8_t* k = pool + L.KOffset(table, t, kvh);
          float dot = 0;
          for (int d = 0; d < L.k_dim; ++d) dot += qr[d] * LoadElem(k + d * eb, L.elem);
          return dot;
        };
        auto value_at = [&](int64_t t, int d) {
          return LoadElem(pool + L.VOffset(table, t, kvh) + int64_t{d} * eb, L.elem);
        };
        AttendRow(b.vis.Lo(p), p, L.v_dim, b.scale, key_dot, value_at,
                  out->data() + (row * b.q_heads + h) * L.v_dim);
      }
    }
  }
}

void DenseAttention(const AttentionBatch& b, const std::vector<std::vector<float>>& k,
                    const std::vector<std::vector<float>>& v, const float* q,
                    std::vector<float>* out) {
  const PageLayout& L = b.layout;
  const int group = b.q_heads / L.kv_heads;
  out->assign(static_cast<size_t>(b.TotalQueries()) * b.q_heads * L.v_dim, 0.0f);
  int64_t row = 0;
  for (size_t i = 0; i < b.context.size(); ++i) {
    for (int j = 0; j < b.q_len[i]; ++j, ++row) {
      const int64_t p = b.context[i] - b.q_len[i] + j;
      for (int h = 0; h < b.q_heads; ++h) {
        const int kvh = h / group;
        const float* qr = q + (row * b.q_heads + h) * L.k_dim;
        auto key_dot = [&](int64_t t) {
          const float* kr = k[i].data() + (t * L.kv_heads + kvh) * L.k_dim;
          float dot = 0;
          for (int d = 0; d < L.k_dim; ++d) dot += qr[d] * kr[d];
          return dot;
        };
        auto value_at = [&](int64_t t, int d) {
          return v[i][(t * L.kv_heads + kvh) * L.v_dim + d];
        };
        AttendRow(b.vis.Lo(p), p, L.v_dim, b.scale, key_dot, value_at,
                  out->data() + (row * b.q_heads + h) * L.v_dim);
      }
    }
  }
}

void MlaUnabsorbed(const std::vector<float>& latent_rows, int latent, int rope, int64_t context,
                   int q_len, int heads, int nope_dim, const std::vector<float>& w_uk,
                   const std::vector<float>& w_uv, const std::vector<float>& q, float scale,
                   std::vector<float>* out) {
  const int row_dim = latent + rope;
  out->assign(static_cast<size_t>(q_len) * heads * nope_dim, 0.0f);
  for (int h = 0; h < heads; ++h) {
    const float* uk = w_uk.data() + static_cast<size_t>(h) * nope_dim * latent;
    const float* uv = w_uv.data() + static_cast<size_t>(h) * nope_dim * latent;
    // Per-head keys and values, expanded from the latent rows.
    std::vector<float> keys(context * (nope_dim + rope)), values(context * nope_dim);
    for (int64_t t = 0; t < context; ++t) {
      const float* c = latent_rows.data() + t * row_dim;
      for (int n = 0; n < nope_dim; ++n) {
        double kk = 0, vv = 0;
        for (int l = 0; l < latent; ++l) {
          kk += static_cast<double>(uk[n * latent + l]) * c[l];
          vv += static_cast<double>(uv[n * latent + l]) * c[l];
        }
        keys[t * (nope_dim + rope) + n] = static_cast<float>(kk);
        values[t * nope_dim + n] = static_cast<float>(vv);
      }
      for (int r = 0; r < rope; ++r) keys[t * (nope_dim + rope) + nope_dim + r] = c[latent + r];
    }
    for (int j = 0; j < q_len; ++j) {
      const int64_t p = context - q_len + j;
      const float* qr = q.data() + (static_cast<size_t>(j) * heads + h) * (nope_dim + rope);
      auto key_dot = [&](int64_t t) {
        double dot = 0;
        for (int d = 0; d < nope_dim + rope; ++d) dot += qr[d] * keys[t * (nope_dim + rope) + d];
        return static_cast<float>(dot);
      };
      auto value_at = [&](int64_t t, int d) { return values[t * nope_dim + d]; };
      AttendRow(0, p, nope_dim, scale, key_dot, value_at,
                out->data() + (static_cast<size_t>(j) * heads + h) * nope_dim);
    }
  }
}

void ReferenceAppend(const PageLayout& layout, const std::vector<int64_t>& context,
                     const std::vector<int32_t>& n_new,
                     const std::vector<std::vector<int32_t>>& tables, const uint8_t* k_new,
                     const uint8_t* v_new, uint8_t* pool) {
  int64_t row = 0;
  for (size_t i = 0; i < context.size(); ++i) {
    for (int j = 0; j < n_new[i]; ++j, ++row) {
      const int64_t t = context[i] - n_new[i] + j;
      for (int h = 0; h < layout.kv_heads; ++h) {
        std::memcpy(pool + layout.KOffset(tables[i].data(), t, h),
                    k_new + (row * layout.kv_heads + h) * layout.KRowBytes(), layout.KRowBytes());
        if (!layout.v_in_k) {
          std::memcpy(pool + layout.VOffset(tables[i].data(), t, h),
                      v_new + (row * layout.kv_heads + h) * layout.VRowBytes(), layout.VRowBytes());
        }
      }
    }
  }
}

void ReferenceStateStep(const StateBatch& b, const float* g, const float* k, const float* q,
                        const float* v, uint8_t* pool, std::vector<float>* out) {
  const int64_t rows = b.Rows();
  out->assign(b.state_block.size() * kStateRowDim, 0.0f);
  for (size_t i = 0; i < b.state_block.size(); ++i) {
    uint8_t* page = pool + int64_t{b.state_block[i]} * b.page_bytes;
    std::vector<double> o(kStateRowDim, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      float row[kStateRowDim];
      std::memcpy(row, page + r * kStateRowDim * 4, sizeof(row));
      const float gr = g[i * rows + r], kr = k[i * rows + r], qr = q[i * rows + r];
      for (int c = 0; c < kStateRowDim; ++c) {
        row[c] = gr * row[c] + kr * v[i * kStateRowDim + c];
        o[c] += static_cast<double>(qr) * row[c];
      }
      std::memcpy(page + r * kStateRowDim * 4, row, sizeof(row));
    }
    for (int c = 0; c < kStateRowDim; ++c) (*out)[i * kStateRowDim + c] = static_cast<float>(o[c]);
  }
}

void ReferenceStateCopy(const StateBatch& b, const std::vector<int32_t>& src,
                        const std::vector<int32_t>& dst, uint8_t* pool) {
  for (size_t i = 0; i < src.size(); ++i) {
    std::memmove(pool + int64_t{dst[i]} * b.page_bytes, pool + int64_t{src[i]} * b.page_bytes,
                 b.state_bytes);
  }
}

double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::numeric_limits<double>::infinity();
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  if (den == 0) return num == 0 ? 0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

}  // namespace prefixsim::cuda
