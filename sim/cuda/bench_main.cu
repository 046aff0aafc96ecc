// prefixsim_kernel_bench: the CUDA backend's measuring tool (docs/cuda.md). Reads a kernel grid
// (sim/cuda/kernel_grid.h), checks every kernel shape against its CPU reference
// (sim/cuda/reference.h) on small inputs, then times every grid point and writes the CSV that the
// `measured` cost model reads. Needs only the CUDA toolkit (cudart, cuBLAS when found), so that it
// builds on the device machine, which has no Abseil.
//
//   prefixsim_kernel_bench --grid FILE --out FILE.csv [--time-budget-s S] [--reps N]
//                          [--meta KEY=VALUE]... [--check-only]
// Exit: 0 all fine; 1 no device / CUDA error / a check failed; 2 bad arguments or grid;
// 77 (--check-only) no device, so that ctest reports the GPU test as skipped.
#include <cuda_runtime.h>
#ifdef PREFIXSIM_HAVE_CUBLAS
#include <cublas_v2.h>
#include <cuda_bf16.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cuda/kernel_grid.h"
#include "sim/cuda/kernels.cuh"
#include "sim/cuda/reference.h"

namespace prefixsim::cuda {
namespace {

constexpr double kAttentionTolerance = 2e-3;  // ‖gpu - cpu‖ / ‖cpu‖, fp32 on both sides
constexpr double kStateTolerance = 1e-4;

#define CUDA_OK(expr)                                                         \
  do {                                                                        \
    const cudaError_t _e = (expr);                                            \
    if (_e != cudaSuccess) {                                                  \
      std::fprintf(stderr, "prefixsim_kernel_bench: %s: %s (%s:%d)\n", #expr, \
                   cudaGetErrorString(_e), __FILE__, __LINE__);               \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

// A device buffer freed at scope exit.
template <typename T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  DevBuf() = default;
  explicit DevBuf(size_t count) { Reset(count); }
  void Reset(size_t count) {
    if (p != nullptr) cudaFree(p);
    p = nullptr;
    n = count;
    if (count > 0) CUDA_OK(cudaMalloc(&p, sizeof(T) * count));
  }
  void Upload(const std::vector<T>& v) {
    if (v.size() > n) Reset(v.size());
    if (!v.empty()) CUDA_OK(cudaMemcpy(p, v.data(), sizeof(T) * v.size(), cudaMemcpyHostToDevice));
  }
  std::vector<T> Download(size_t count) const {
    std::vector<T> v(count);
    if (count > 0) CUDA_OK(cudaMemcpy(v.data(), p, sizeof(T) * count, cudaMemcpyDeviceToHost));
    return v;
  }
  ~DevBuf() {
    if (p != nullptr) cudaFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

PageLayout LayoutOf(const GridPoint& p) {
  PageLayout L;
  L.block_size = p.block_size;
  L.kernel_block_size = p.kernel_block_size > 0 ? p.kernel_block_size : p.block_size;
  L.page_bytes = p.page_bytes;
  L.kv_heads = p.kv_heads;
  L.k_dim = p.k_dim;
  L.v_dim = p.v_dim;
  L.v_in_k = p.kind == "mla";
  L.elem = p.elem_bytes == 1 ? KvElem::kFp8 : KvElem::kBf16;
  return L;
}

DevLayout DevLayoutOf(const PageLayout& L) {
  DevLayout d;
  d.block_size = L.block_size;
  d.kernel_block_size = L.kernel_block_size;
  d.page_bytes = L.page_bytes;
  d.kv_heads = L.kv_heads;
  d.k_dim = L.k_dim;
  d.v_dim = L.v_dim;
  d.v_in_k = L.v_in_k ? 1 : 0;
  d.elem_bytes = ElemBytes(L.elem);
  return d;
}

bool IsAttention(KernelOp op) {
  return op == KernelOp::kDecode || op == KernelOp::kPrefill || op == KernelOp::kMlaDecode ||
         op == KernelOp::kMlaPrefill;
}

// Random bytes valid as elements of `elem_bytes` (no NaNs): fp8 magnitudes < 2, bf16/float in
// [-1, 1].
void RandomFill(std::vector<uint8_t>* buf, int elem_bytes, std::mt19937* rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  if (elem_bytes == 1) {
    for (uint8_t& b : *buf) b = static_cast<uint8_t>((*rng)() & 0xb7u);
  } else if (elem_bytes == 2) {
    for (size_t i = 0; i + 1 < buf->size(); i += 2) {
      const uint16_t v = FloatToBf16(u(*rng));
      std::memcpy(buf->data() + i, &v, 2);
    }
  } else {
    for (size_t i = 0; i + 3 < buf->size(); i += 4) {
      const float v = u(*rng);
      std::memcpy(buf->data() + i, &v, 4);
    }
  }
}

// Kernel-block tables over `pages` pages for sequences of `kblocks[i]` kernel blocks: distinct ids,
// shuffled, so that neighbouring blocks of a sequence are neither neighbours nor in page order.
std::vector<std::vector<int32_t>> ShuffledTables(const std::vector<int64_t>& kblocks, int sub,
                                                 int64_t* pages, std::mt19937* rng) {
  int64_t total = 0;
  for (int64_t k : kblocks) total += k;
  *pages = (total + sub - 1) / sub + 1;
  std::vector<int32_t> ids(static_cast<size_t>(*pages * sub));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), *rng);
  std::vector<std::vector<int32_t>> tables;
  size_t next = 0;
  for (int64_t k : kblocks) {
    tables.emplace_back(ids.begin() + next, ids.begin() + next + k);
    next += k;
  }
  return tables;
}

std::vector<int32_t> FlattenTables(const std::vector<std::vector<int32_t>>& tables,
                                   int* max_blocks) {
  *max_blocks = 1;
  for (const auto& t : tables) *max_blocks = std::max<int>(*max_blocks, int(t.size()));
  std::vector<int32_t> flat(tables.size() * *max_blocks, 0);
  for (size_t i = 0; i < tables.size(); ++i) {
    std::copy(tables[i].begin(), tables[i].end(), flat.begin() + i * *max_blocks);
  }
  return flat;
}

struct Device {
  cudaDeviceProp prop{};
  int id = 0;
};

// --- correctness checks (small shapes, CPU reference) ---

double CheckAttention(const Device& dev, const GridPoint& p, bool prefill, std::string* what) {
  std::mt19937 rng(1234 + p.block_size);
  AttentionBatch b;
  b.layout = LayoutOf(p);
  if (std::string err = b.layout.Check(); !err.empty()) {
    *what = err;
    return INFINITY;
  }
  b.vis.window = p.window;
  b.vis.chunk = p.chunk;
  b.q_heads = p.q_heads;
  b.scale = 1.0f / std::sqrt(static_cast<float>(p.k_dim));
  const int bs = p.block_size;
  // Short, crossing a page boundary, and (window) longer than the window.
  const int q = prefill ? 40 : std::max(1, p.q_tokens);
  const int64_t far = p.window > 0 ? p.window + bs + 9 : (prefill ? bs + 3 : 2 * int64_t(bs) + 9);
  b.context = {int64_t(q) + 3, int64_t(bs) + q + 5, far + q};
  b.q_len = {prefill ? q : 1, q, q};
  if (prefill && p.window == 0) b.context.pop_back(), b.q_len.pop_back();
  std::vector<int64_t> kblocks;
  for (int64_t c : b.context)
    kblocks.push_back((c + b.layout.kernel_block_size - 1) / b.layout.kernel_block_size);
  int64_t pages = 0;
  b.tables = ShuffledTables(kblocks, b.layout.SubBlocks(), &pages, &rng);
  std::vector<uint8_t> pool(static_cast<size_t>(pages * b.layout.page_bytes));
  RandomFill(&pool, p.elem_bytes, &rng);
  const int64_t rows = b.TotalQueries();
  std::vector<float> qv(static_cast<size_t>(rows) * p.q_heads * p.k_dim);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& x : qv) x = u(rng);
  std::vector<float> ref;
  ReferenceAttention(b, pool.data(), qv.data(), &ref);

  DevBuf<uint8_t> d_pool(pool.size());
  d_pool.Upload(pool);
  int max_blocks = 0;
  DevBuf<int32_t> d_tables;
  d_tables.Upload(FlattenTables(b.tables, &max_blocks));
  DevBuf<int64_t> d_ctx, d_qstart;
  d_ctx.Upload(b.context);
  std::vector<int64_t> q_start;
  int64_t acc = 0;
  for (int32_t l : b.q_len) q_start.push_back(acc), acc += l;
  d_qstart.Upload(q_start);
  DevBuf<int32_t> d_qlen;
  d_qlen.Upload(b.q_len);
  DevBuf<float> d_q, d_out(ref.size());
  d_q.Upload(qv);
  CUDA_OK(cudaMemset(d_out.p, 0xff, sizeof(float) * ref.size()));  // NaN: unwritten shows
  AttentionArgs a;
  a.layout = DevLayoutOf(b.layout);
  a.pool = d_pool.p;
  a.tables = d_tables.p;
  a.max_blocks = max_blocks;
  a.context = d_ctx.p;
  a.q_len = d_qlen.p;
  a.q_start = d_qstart.p;
  a.batch = int(b.context.size());
  a.max_q_len = *std::max_element(b.q_len.begin(), b.q_len.end());
  a.max_keys = *std::max_element(b.context.begin(), b.context.end());
  a.split_keys = 16;  // short splits, so that the small shapes check the split combine too
  a.q_heads = p.q_heads;
  a.scale = b.scale;
  a.window = p.window;
  a.chunk = p.chunk;
  a.q = d_q.p;
  a.out = d_out.p;
  AttentionPlan plan;
  if (const char* err = PlanAttention(a, dev.prop.multiProcessorCount, &plan); *err) {
    *what = err;
    return INFINITY;
  }
  DevBuf<uint8_t> ws(plan.workspace_bytes);
  CUDA_OK(LaunchAttention(a, plan, ws.p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const double err = RelativeError(d_out.Download(ref.size()), ref);
  char err_text[32];
  std::snprintf(err_text, sizeof(err_text), "%.2e", err);
  *what = std::string("rel err ") + err_text + " (tolerance " +
          std::to_string(kAttentionTolerance) + ", splits " + std::to_string(plan.splits) + ")";
  return err;
}

double CheckAppend(const GridPoint& p, std::string* what) {
  std::mt19937 rng(99 + p.block_size);
  const PageLayout L = LayoutOf(p);
  if (std::string err = L.Check(); !err.empty()) {
    *what = err;
    return INFINITY;
  }
  const int bs = p.block_size;
  // A step's rows: one, the point's (at most what the context holds), and a run across a page.
  const std::vector<int64_t> context = {5, int64_t(bs) + 2, 2 * int64_t(bs) + 20};
  const std::vector<int32_t> n_new = {1, std::clamp(p.q_tokens, 1, bs + 2), 37};
  std::vector<int64_t> kblocks;
  for (int64_t c : context) kblocks.push_back((c + L.kernel_block_size - 1) / L.kernel_block_size);
  int64_t pages = 0;
  const auto tables = ShuffledTables(kblocks, L.SubBlocks(), &pages, &rng);
  std::vector<uint8_t> pool(static_cast<size_t>(pages * L.page_bytes));
  RandomFill(&pool, p.elem_bytes, &rng);
  int total = 0;
  for (int32_t n : n_new) total += n;
  std::vector<uint8_t> k_new(size_t(total) * L.kv_heads * L.KRowBytes()),
      v_new(size_t(total) * L.kv_heads * L.VRowBytes());
  RandomFill(&k_new, p.elem_bytes, &rng);
  RandomFill(&v_new, p.elem_bytes, &rng);
  DevBuf<uint8_t> d_pool(pool.size()), d_k, d_v;
  d_pool.Upload(pool);
  d_k.Upload(k_new);
  d_v.Upload(v_new);
  std::vector<int32_t> seq;
  std::vector<int64_t> pos;
  for (size_t i = 0; i < n_new.size(); ++i) {
    for (int j = 0; j < n_new[i]; ++j)
      seq.push_back(int(i)), pos.push_back(context[i] - n_new[i] + j);
  }
  int max_blocks = 0;
  DevBuf<int32_t> d_tables, d_seq;
  d_tables.Upload(FlattenTables(tables, &max_blocks));
  d_seq.Upload(seq);
  DevBuf<int64_t> d_pos;
  d_pos.Upload(pos);
  ReferenceAppend(L, context, n_new, tables, k_new.data(), v_new.data(), pool.data());
  CUDA_OK(LaunchAppend(DevLayoutOf(L), d_pool.p, d_tables.p, max_blocks, d_seq.p, d_pos.p, total,
                       d_k.p, d_v.p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint8_t> got = d_pool.Download(pool.size());
  size_t diff = 0;
  for (size_t i = 0; i < pool.size(); ++i) diff += got[i] != pool[i];
  *what = std::to_string(diff) + " bytes differ from the reference (whole pool, padding included)";
  return diff == 0 ? 0.0 : INFINITY;
}

double CheckState(const GridPoint& p, bool copy, std::string* what) {
  std::mt19937 rng(7);
  StateBatch b;
  b.state_bytes = p.state_bytes;
  b.page_bytes = p.page_bytes;
  if (b.page_bytes < b.state_bytes || b.page_bytes % 16 != 0) {
    *what = "page_bytes must be >= state_bytes and a multiple of 16";
    return INFINITY;
  }
  const int n = 3;
  const int64_t pages = 2 * n + 1;
  std::vector<int32_t> ids(pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  b.state_block.assign(ids.begin(), ids.begin() + n);
  const std::vector<int32_t> dst(ids.begin() + n, ids.begin() + 2 * n);
  std::vector<uint8_t> pool(static_cast<size_t>(pages * b.page_bytes));
  RandomFill(&pool, 4, &rng);
  DevBuf<uint8_t> d_pool(pool.size());
  d_pool.Upload(pool);
  DevBuf<int32_t> d_src, d_dst;
  d_src.Upload(b.state_block);
  d_dst.Upload(dst);
  if (copy) {
    ReferenceStateCopy(b, b.state_block, dst, pool.data());
    CUDA_OK(LaunchStateCopy(d_pool.p, b.page_bytes, b.state_bytes, d_src.p, d_dst.p, n, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<uint8_t> got = d_pool.Download(pool.size());
    size_t diff = 0;
    for (size_t i = 0; i < pool.size(); ++i) diff += got[i] != pool[i];
    *what = std::to_string(diff) + " bytes differ from the reference";
    return diff == 0 ? 0.0 : INFINITY;
  }
  const int64_t rows = b.Rows();
  std::uniform_real_distribution<float> u(-1.f, 1.f), gate(0.5f, 1.f);
  std::vector<float> g(n * rows), k(n * rows), q(n * rows), v(n * kStateRowDim);
  for (float& x : g) x = gate(rng);
  for (auto* vec : {&k, &q, &v}) {
    for (float& x : *vec) x = u(rng);
  }
  DevBuf<float> d_g, d_k, d_q, d_v, d_out(n * kStateRowDim);
  d_g.Upload(g);
  d_k.Upload(k);
  d_q.Upload(q);
  d_v.Upload(v);
  std::vector<float> ref_out;
  ReferenceStateStep(b, g.data(), k.data(), q.data(), v.data(), pool.data(), &ref_out);
  CUDA_OK(LaunchStateStep(d_pool.p, b.page_bytes, b.state_bytes, d_src.p, n, d_g.p, d_k.p, d_q.p,
                          d_v.p, d_out.p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint8_t> got = d_pool.Download(pool.size());
  std::vector<float> got_f(got.size() / 4), ref_f(pool.size() / 4);
  std::memcpy(got_f.data(), got.data(), got_f.size() * 4);
  std::memcpy(ref_f.data(), pool.data(), ref_f.size() * 4);
  const double e_pool = RelativeError(got_f, ref_f);
  const double e_out = RelativeError(d_out.Download(ref_out.size()), ref_out);
  *what = "pool rel err " + std::to_string(e_pool) + ", output rel err " + std::to_string(e_out) +
          " (tolerance " + std::to_string(kStateTolerance) + ")";
  return std::max(e_pool, e_out);
}

double Tolerance(KernelOp op) {
  if (IsAttention(op)) return kAttentionTolerance;
  if (op == KernelOp::kStateStep) return kStateTolerance;
  return 0;  // append and copy: bytes must be equal
}

// Checks one point's kernel shape; returns the error measure (<= Tolerance(op) passes).
double CheckPoint(const Device& dev, const GridPoint& p, std::string* what) {
  switch (p.op) {
    case KernelOp::kDecode:
    case KernelOp::kMlaDecode:
      return CheckAttention(dev, p, false, what);
    case KernelOp::kPrefill:
    case KernelOp::kMlaPrefill:
      return CheckAttention(dev, p, true, what);
    case KernelOp::kAppend:
      return CheckAppend(p, what);
    case KernelOp::kStateStep:
      return CheckState(p, false, what);
    case KernelOp::kStateCopy:
      return CheckState(p, true, what);
  }
  return INFINITY;
}

// The shape of a point without its axes, to check each shape and op once.
std::string CheckKey(const GridPoint& p) {
  GridPoint s = p;
  s.policies.clear();
  s.batch = 1;
  // The checks use the point's query tokens for decode and append only.
  if (p.op == KernelOp::kPrefill || p.op == KernelOp::kMlaPrefill) s.q_tokens = 1;
  s.context = std::max(1, s.q_tokens);
  return FormatGridPoint(s);
}

// --- timing ---

struct Timing {
  double median_us = 0, p10_us = 0, p90_us = 0;
  double bytes = 0;
  int splits = 1;
  int rotations = 1;
  std::string skipped;  // why not timed
};

double Percentile(std::vector<float> v, double f) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(f * (v.size() - 1) + 0.5))];
}

// Times `launch(rotation)` reps times after warm-up, one event pair per sample.
template <typename F>
void TimeLaunches(F launch, int rotations, int reps, Timing* t) {
  for (int w = 0; w < 3; ++w) CUDA_OK(launch(w % rotations));
  CUDA_OK(cudaDeviceSynchronize());
  // Long launches (large prefill chunks) get fewer samples, to keep the run inside its budget.
  {
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    CUDA_OK(cudaEventRecord(a));
    CUDA_OK(launch(0));
    CUDA_OK(cudaEventRecord(b));
    CUDA_OK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (ms > 5) reps = std::min(reps, 7);
  }
  std::vector<cudaEvent_t> ev(2 * reps);
  for (cudaEvent_t& e : ev) CUDA_OK(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    CUDA_OK(cudaEventRecord(ev[2 * i]));
    CUDA_OK(launch((i + 3) % rotations));
    CUDA_OK(cudaEventRecord(ev[2 * i + 1]));
  }
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) CUDA_OK(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
  for (cudaEvent_t& e : ev) cudaEventDestroy(e);
  t->median_us = Percentile(ms, 0.5) * 1e3;
  t->p10_us = Percentile(ms, 0.1) * 1e3;
  t->p90_us = Percentile(ms, 0.9) * 1e3;
  t->rotations = rotations;
}

struct Pool {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  int filled_elem = 0;
};

// How many disjoint sets of `set_bytes` to rotate through so that a launch's data was last
// touched more than 2 L2 sizes earlier; 0 when not even one fits the pool.
int Rotations(const Device& dev, const Pool& pool, double set_bytes) {
  if (set_bytes > pool.bytes) return 0;
  const double want = std::ceil(2.5 * dev.prop.l2CacheSize / std::max(set_bytes, 1.0));
  const double fit = std::floor(pool.bytes / set_bytes);
  return static_cast<int>(std::max(1.0, std::min({want, fit, 4096.0})));
}

void EnsureFilled(Pool* pool, int elem_bytes) {
  if (pool->filled_elem == elem_bytes) return;
  CUDA_OK(LaunchFillRandom(pool->base, pool->bytes, elem_bytes, 42, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  pool->filled_elem = elem_bytes;
}

Timing TimePoint(const Device& dev, Pool* pool, const GridPoint& p, int reps) {
  Timing t;
  std::mt19937 rng(5);
  if (p.op == KernelOp::kStateStep || p.op == KernelOp::kStateCopy) {
    EnsureFilled(pool, 4);
    const bool copy = p.op == KernelOp::kStateCopy;
    const int per_seq = copy ? 2 : 1;
    const int64_t set_pages = int64_t(p.batch) * per_seq;
    const int rot = Rotations(dev, *pool, double(set_pages) * p.page_bytes);
    if (rot == 0) return t.skipped = "pool too small", t;
    std::vector<int32_t> ids(static_cast<size_t>(set_pages * rot));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    DevBuf<int32_t> d_ids;
    d_ids.Upload(ids);
    const int64_t rows = p.state_bytes / (4 * kStateRowDim);
    DevBuf<float> d_gkq(3 * size_t(p.batch) * std::max<int64_t>(rows, 1)),
        d_v(size_t(p.batch) * kStateRowDim), d_out(size_t(p.batch) * kStateRowDim);
    CUDA_OK(LaunchFillRandom(d_gkq.p, d_gkq.n * 4, 4, 1, nullptr));
    CUDA_OK(LaunchFillRandom(d_v.p, d_v.n * 4, 4, 2, nullptr));
    const size_t nr = size_t(p.batch) * std::max<int64_t>(rows, 1);
    auto launch = [&](int r) {
      const int32_t* set = d_ids.p + size_t(r) * set_pages;
      if (copy) {
        return LaunchStateCopy(pool->base, p.page_bytes, p.state_bytes, set, set + p.batch, p.batch,
                               nullptr);
      }
      return LaunchStateStep(pool->base, p.page_bytes, p.state_bytes, set, p.batch, d_gkq.p,
                             d_gkq.p + nr, d_gkq.p + 2 * nr, d_v.p, d_out.p, nullptr);
    };
    TimeLaunches(launch, rot, reps, &t);
    t.bytes = 2.0 * double(p.state_bytes) * p.batch;
    return t;
  }
  const PageLayout L = LayoutOf(p);
  if (std::string err = L.Check(); !err.empty()) return t.skipped = err, t;
  EnsureFilled(pool, p.elem_bytes);
  const Visibility vis{p.window, p.chunk};
  // Every sequence has the same context; only the kernel blocks its keys (or new rows) touch get
  // pages, the other table entries point at page 0 and are never read.
  const int kbs = L.kernel_block_size, sub = L.SubBlocks();
  const int64_t first = IsAttention(p.op) ? vis.Lo(p.context - p.q_tokens) : p.context - p.q_tokens;
  const int64_t kb_lo = first / kbs, kb_hi = (p.context - 1) / kbs;
  // Whole pages per sequence (a page's kernel blocks stay together, as in vLLM).
  const int64_t page_lo = kb_lo / sub, page_hi = kb_hi / sub;
  const int64_t pages_per_seq = page_hi - page_lo + 1;
  const int64_t set_pages = pages_per_seq * p.batch;
  const int rot = Rotations(dev, *pool, double(set_pages) * p.page_bytes);
  if (rot == 0) return t.skipped = "pool too small", t;
  const int max_blocks = int(kb_hi + 1);
  std::vector<int32_t> tables(size_t(rot) * p.batch * max_blocks, 0);
  std::vector<int32_t> page_ids(size_t(set_pages) * rot);
  std::iota(page_ids.begin(), page_ids.end(), 0);
  std::shuffle(page_ids.begin(), page_ids.end(), rng);
  for (int r = 0; r < rot; ++r) {
    for (int s = 0; s < p.batch; ++s) {
      for (int64_t kb = kb_lo; kb <= kb_hi; ++kb) {
        const int64_t page =
            page_ids[(size_t(r) * p.batch + s) * pages_per_seq + kb / sub - page_lo];
        tables[(size_t(r) * p.batch + s) * max_blocks + kb] = int32_t(page * sub + kb % sub);
      }
    }
  }
  DevBuf<int32_t> d_tables;
  d_tables.Upload(tables);
  const size_t table_stride = size_t(p.batch) * max_blocks;
  const int64_t row_bytes = L.KRowBytes() + (L.v_in_k ? 0 : L.VRowBytes());
  if (p.op == KernelOp::kAppend) {
    std::vector<int32_t> seq;
    std::vector<int64_t> pos;
    for (int s = 0; s < p.batch; ++s) {
      for (int j = 0; j < p.q_tokens; ++j)
        seq.push_back(s), pos.push_back(p.context - p.q_tokens + j);
    }
    DevBuf<int32_t> d_seq;
    d_seq.Upload(seq);
    DevBuf<int64_t> d_pos;
    d_pos.Upload(pos);
    DevBuf<uint8_t> d_k(seq.size() * L.kv_heads * L.KRowBytes()),
        d_v(std::max<size_t>(16, seq.size() * L.kv_heads * L.VRowBytes()));
    CUDA_OK(LaunchFillRandom(d_k.p, d_k.n, p.elem_bytes, 3, nullptr));
    CUDA_OK(LaunchFillRandom(d_v.p, d_v.n, p.elem_bytes, 4, nullptr));
    const DevLayout dl = DevLayoutOf(L);
    auto launch = [&](int r) {
      return LaunchAppend(dl, pool->base, d_tables.p + r * table_stride, max_blocks, d_seq.p,
                          d_pos.p, int(seq.size()), d_k.p, d_v.p, nullptr);
    };
    TimeLaunches(launch, rot, reps, &t);
    t.bytes = 2.0 * double(seq.size()) * L.kv_heads * row_bytes;
    return t;
  }
  std::vector<int64_t> ctx(p.batch, p.context), q_start(p.batch);
  std::vector<int32_t> q_len(p.batch, p.q_tokens);
  for (int s = 0; s < p.batch; ++s) q_start[s] = int64_t(s) * p.q_tokens;
  DevBuf<int64_t> d_ctx, d_qs;
  d_ctx.Upload(ctx);
  d_qs.Upload(q_start);
  DevBuf<int32_t> d_ql;
  d_ql.Upload(q_len);
  const size_t q_rows = size_t(p.batch) * p.q_tokens;
  DevBuf<float> d_q(q_rows * p.q_heads * p.k_dim), d_out(q_rows * p.q_heads * p.v_dim);
  CUDA_OK(LaunchFillRandom(d_q.p, d_q.n * 4, 4, 5, nullptr));
  AttentionArgs a;
  a.layout = DevLayoutOf(L);
  a.pool = pool->base;
  a.max_blocks = max_blocks;
  a.context = d_ctx.p;
  a.q_len = d_ql.p;
  a.q_start = d_qs.p;
  a.batch = p.batch;
  a.max_q_len = p.q_tokens;
  a.max_keys = p.context - first;
  a.q_heads = p.q_heads;
  a.scale = 1.0f / std::sqrt(float(p.k_dim));
  a.window = p.window;
  a.chunk = p.chunk;
  a.q = d_q.p;
  a.out = d_out.p;
  AttentionPlan plan;
  if (const char* err = PlanAttention(a, dev.prop.multiProcessorCount, &plan); *err) {
    return t.skipped = err, t;
  }
  DevBuf<uint8_t> ws(plan.workspace_bytes);
  auto launch = [&](int r) {
    AttentionArgs ar = a;
    ar.tables = d_tables.p + r * table_stride;
    return LaunchAttention(ar, plan, ws.p, nullptr);
  };
  TimeLaunches(launch, rot, reps, &t);
  t.splits = plan.splits;
  // KV rows each sequence's keys cover (once: the tiles of one sequence re-read them from L2),
  // plus the queries read and the outputs written.
  t.bytes = double(p.batch) * double(p.context - first) * L.kv_heads * row_bytes +
            4.0 * q_rows * p.q_heads * (p.k_dim + p.v_dim);
  return t;
}

// --- limits ---

double CopyBandwidth(const Pool& pool) {
  const size_t n = std::min<size_t>(pool.bytes / 2, size_t(4) << 30);
  Timing t;
  auto launch = [&](int) {
    return cudaMemcpyAsync(pool.base + pool.bytes - n, pool.base, n, cudaMemcpyDeviceToDevice,
                           nullptr);
  };
  TimeLaunches(launch, 1, 10, &t);
  return 2.0 * double(n) / (t.median_us * 1e-6);  // bytes read plus bytes written
}

double GemmRate(const Pool& pool, std::string* note) {
#ifdef PREFIXSIM_HAVE_CUBLAS
  constexpr int n = 8192;
  const size_t bytes = size_t(n) * n * 2;
  if (pool.bytes < 3 * bytes) return *note = "pool too small for the GEMM", 0.0;
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return *note = "cublasCreate failed", 0.0;
  CUDA_OK(LaunchFillRandom(pool.base, 3 * bytes, 2, 77, nullptr));  // random data, not zeros
  const float alpha = 1, beta = 0;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  auto launch = [&](int) {
    st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, pool.base, CUDA_R_16BF, n,
                      pool.base + bytes, CUDA_R_16BF, n, &beta, pool.base + 2 * bytes, CUDA_R_16BF,
                      n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return cudaGetLastError();
  };
  Timing t;
  TimeLaunches(launch, 1, 10, &t);
  cublasDestroy(h);
  if (st != CUBLAS_STATUS_SUCCESS) return *note = "cublasGemmEx failed", 0.0;
  *note = "cuBLAS bf16 8192^3, fp32 accumulate, random data";
  return 2.0 * n * double(n) * n / (t.median_us * 1e-6);
#else
  (void)pool;
  *note = "cuBLAS not found at build time: GEMM rate not measured";
  return 0;
#endif
}

std::string Now() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

int Usage(const char* msg) {
  std::fprintf(stderr,
               "prefixsim_kernel_bench: %s\nusage: prefixsim_kernel_bench --grid FILE --out "
               "FILE.csv [--time-budget-s S] [--reps N] [--meta KEY=VALUE]... [--check-only]\n",
               msg);
  return 2;
}

int Main(int argc, char** argv) {
  std::string grid_path, out_path;
  double budget_s = 300;
  int reps = 25;
  bool check_only = false;
  std::vector<std::string> meta;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (arg == "--check-only") {
      check_only = true;
    } else if (arg == "--grid" && (v = value())) {
      grid_path = v;
    } else if (arg == "--out" && (v = value())) {
      out_path = v;
    } else if (arg == "--time-budget-s" && (v = value())) {
      budget_s = std::atof(v);
    } else if (arg == "--reps" && (v = value())) {
      reps = std::max(3, std::atoi(v));
    } else if (arg == "--meta" && (v = value())) {
      meta.push_back(v);
    } else {
      return Usage(("unknown or incomplete argument " + arg).c_str());
    }
  }
  if (grid_path.empty() || (out_path.empty() && !check_only)) {
    return Usage("--grid and --out are required");
  }
  std::ifstream in(grid_path, std::ios::binary);
  if (!in) return Usage(("cannot read " + grid_path).c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<GridPoint> points;
  std::vector<std::string> comments;
  std::string error;
  if (!ParseGridFile(ss.str(), &points, &comments, &error)) {
    return Usage((grid_path + ": " + error).c_str());
  }

  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    // Without a GPU the runtime reports the missing driver, which reads as a version problem.
    std::fprintf(stderr,
                 "prefixsim_kernel_bench: no usable CUDA GPU on this machine (cudaGetDeviceCount: "
                 "%s); nothing measured\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return check_only ? 77 : 1;
  }
  Device dev;
  CUDA_OK(cudaGetDeviceProperties(&dev.prop, dev.id));
  std::printf("device: %s, %d SMs, L2 %d bytes, %.1f GiB\n", dev.prop.name,
              dev.prop.multiProcessorCount, dev.prop.l2CacheSize,
              dev.prop.totalGlobalMem / double(1 << 30));

  // Correctness first: each distinct shape and op once, on small inputs.
  std::map<std::string, std::pair<double, std::string>> checks;
  bool all_ok = true;
  for (const GridPoint& p : points) {
    const std::string key = CheckKey(p);
    if (checks.count(key)) continue;
    std::string what;
    const double err = CheckPoint(dev, p, &what);
    const bool ok = err <= Tolerance(p.op);
    all_ok = all_ok && ok;
    checks[key] = {err, what};
    std::printf("check %-11s %-15s block %5d page %8lld: %s %s\n",
                std::string(KernelOpName(p.op)).c_str(), p.kind.c_str(), p.block_size,
                static_cast<long long>(p.page_bytes), ok ? "ok  " : "FAIL", what.c_str());
  }
  if (check_only) return all_ok ? 0 : 1;

  size_t free_b = 0, total_b = 0;
  CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
  Pool pool;
  pool.bytes = std::min<size_t>(size_t(free_b * 0.6), size_t(48) << 30) / 4096 * 4096;
  CUDA_OK(cudaMalloc(&pool.base, pool.bytes));
  const double copy_bw = CopyBandwidth(pool);
  std::string gemm_note;
  const double gemm = GemmRate(pool, &gemm_note);
  pool.filled_elem = 0;  // the GEMM wrote bf16 over the pool's start
  std::printf("limits: device-to-device copy %.3f TB/s (read + write); GEMM %.1f TFLOP/s (%s)\n",
              copy_bw / 1e12, gemm / 1e12, gemm_note.c_str());

  int driver = 0, runtime = 0, clock_khz = 0, mem_clock_khz = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev.id);
  cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev.id);
  std::ofstream out(out_path, std::ios::binary);
  if (!out) return Usage(("cannot write " + out_path).c_str());
  out << "# prefixsim kernel measurements (prefixsim_kernel_bench; docs/cuda.md)\n"
      << "# gpu: " << dev.prop.name << "\n"
      << "# compute_capability: " << dev.prop.major << "." << dev.prop.minor << "\n"
      << "# sms: " << dev.prop.multiProcessorCount << "\n"
      << "# l2_bytes: " << dev.prop.l2CacheSize << "\n"
      << "# driver_version: " << driver << "\n"
      << "# cuda_runtime_version: " << runtime << "\n"
      << "# max_sm_clock_khz: " << clock_khz << "\n"
      << "# max_mem_clock_khz: " << mem_clock_khz << "\n"
      << "# date: " << Now() << "\n"
      << "# copy_bytes_per_s: " << copy_bw << "\n"
      << "# gemm_flops_per_s: " << gemm << "\n"
      << "# gemm: " << gemm_note << "\n"
      << "# timing: " << reps << " samples (7 for launches over 5 ms) after 3 warm-ups, one "
      << "CUDA event pair per launch, launches queued back to back; median (p10/p90 given); "
      << "page sets rotated so that > 2x L2 lies between reuses\n"
      << "# check tolerance: attention " << kAttentionTolerance << " relative L2 error, state "
      << kStateTolerance << ", append/copy exact\n";
  for (const std::string& m : meta)
    out << "# " << m.substr(0, m.find('=')) << ": " << m.substr(m.find('=') + 1) << "\n";
  for (const std::string& c : comments) out << "# grid " << c.substr(1) << "\n";
  out << FormatGridHeader()
      << ",splits,rotations,time_us,p10_us,p90_us,bytes,bytes_per_s,copy_fraction,check_error,"
         "check_ok\n";

  const auto start = std::chrono::steady_clock::now();
  int timed = 0, skipped = 0;
  for (const GridPoint& p : points) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > budget_s) {
      ++skipped;
      continue;
    }
    const Timing t = TimePoint(dev, &pool, p, reps);
    if (!t.skipped.empty()) {
      std::printf("skip %s: %s\n", FormatGridPoint(p).c_str(), t.skipped.c_str());
      ++skipped;
      continue;
    }
    ++timed;
    const auto& check = checks[CheckKey(p)];
    const double bps = t.bytes / (t.median_us * 1e-6);
    char line[512];
    std::snprintf(line, sizeof(line), ",%d,%d,%.3f,%.3f,%.3f,%.0f,%.4g,%.4f,%.3g,%d", t.splits,
                  t.rotations, t.median_us, t.p10_us, t.p90_us, t.bytes, bps, bps / copy_bw,
                  check.first, check.first <= Tolerance(p.op) ? 1 : 0);
    out << FormatGridPoint(p) << line << "\n";
    std::printf("%-11s %-15s bs %5d batch %4d q %5d ctx %6lld: %10.2f us  %5.1f%% of copy\n",
                std::string(KernelOpName(p.op)).c_str(), p.kind.c_str(), p.block_size, p.batch,
                p.q_tokens, static_cast<long long>(p.context), t.median_us, 100 * bps / copy_bw);
  }
  cudaFree(pool.base);
  out.close();
  std::printf("timed %d points, skipped %d (budget %.0f s); checks %s; wrote %s\n", timed, skipped,
              budget_s, all_ok ? "all passed" : "FAILED", out_path.c_str());
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace prefixsim::cuda

int main(int argc, char** argv) { return prefixsim::cuda::Main(argc, argv); }
