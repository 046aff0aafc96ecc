// A CPU stand-in for the parts of the CUDA runtime and device language that sim/cuda uses, so
// that the kernels' logic (indexing, masking, the split combine, page layouts) is checked against
// the CPU references without a GPU, in CI (tests/cuda/emulate/README.md). Each block runs as
// blockDim std::threads sharing a std::barrier (__syncthreads) and one dynamic shared-memory
// buffer; blocks run one after another. It checks what a kernel computes, not how fast, and it
// cannot show races that the barrier hides or the hardware's own conversions.
#ifndef PREFIXSIM_TESTS_CUDA_EMULATE_CUDA_RUNTIME_H_
#define PREFIXSIM_TESTS_CUDA_EMULATE_CUDA_RUNTIME_H_

#define PREFIXSIM_CUDA_EMULATION 1

#include <atomic>
#include <barrier>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};

inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace prefixsim_emu {

inline thread_local std::barrier<>* tl_barrier = nullptr;
inline thread_local unsigned char* tl_smem = nullptr;

template <typename... P>
struct Launcher {
  void (*kernel)(P...);
  dim3 grid, block;
  size_t smem;
  template <typename... A>
  void operator()(A... args) const {
    const unsigned n = block.x * block.y * block.z;
    const unsigned blocks = grid.x * grid.y * grid.z;
    std::vector<unsigned char> shared(smem + 64);
    unsigned char* base =
        shared.data() + (16 - reinterpret_cast<uintptr_t>(shared.data()) % 16) % 16;
    // One barrier per block (a thread that returns early drops out of its block's), and one that
    // keeps the threads in step between blocks, which share the threads and the shared memory.
    std::vector<std::unique_ptr<std::barrier<>>> bars;
    for (unsigned i = 0; i < blocks; ++i) bars.push_back(std::make_unique<std::barrier<>>(n));
    std::barrier<> between(n);
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (unsigned t = 0; t < n; ++t) {
      threads.emplace_back([&, t] {
        threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
        blockDim = block;
        gridDim = grid;
        tl_smem = base;
        for (unsigned i = 0; i < blocks; ++i) {
          blockIdx = dim3(i % grid.x, (i / grid.x) % grid.y, i / (grid.x * grid.y));
          tl_barrier = bars[i].get();
          kernel(args...);
          bars[i]->arrive_and_drop();
          between.arrive_and_wait();
        }
      });
    }
    for (std::thread& th : threads) th.join();
  }
};

template <typename... P>
Launcher<P...> Launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem) {
  return Launcher<P...>{kernel, grid, block, smem};
}

}  // namespace prefixsim_emu

#define PREFIXSIM_LAUNCH(kernel, grid, block, smem, stream) \
  ((void)(stream), ::prefixsim_emu::Launch(kernel, grid, block, smem))
#define PREFIXSIM_DYNAMIC_SMEM(type, name) \
  type* name = reinterpret_cast<type*>(::prefixsim_emu::tl_smem)

inline void __syncthreads() { prefixsim_emu::tl_barrier->arrive_and_wait(); }
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}
inline float __uint_as_float(uint32_t v) { return std::bit_cast<float>(v); }
inline uint32_t __float_as_uint(float v) { return std::bit_cast<uint32_t>(v); }
inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
template <typename A, typename B>
inline std::common_type_t<A, B> min(A a, B b) {
  return b < a ? b : a;
}

// --- runtime API ---
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2 };
using cudaError = cudaError_t;
inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "emulated CUDA error";
}
using cudaStream_t = void*;
enum cudaMemcpyKind {
  cudaMemcpyHostToDevice,
  cudaMemcpyDeviceToHost,
  cudaMemcpyDeviceToDevice,
  cudaMemcpyDefault
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
enum cudaDeviceAttr { cudaDevAttrClockRate, cudaDevAttrMemoryClockRate };
struct cudaDeviceProp {
  char name[256] = "CPU emulation (tests/cuda/emulate)";
  int multiProcessorCount = 64;
  int l2CacheSize = 1 << 20;
  size_t totalGlobalMem = size_t(1) << 30;
  int major = 9, minor = 0;
};
struct CUevent_emu {
  std::chrono::steady_clock::time_point t;
};
using cudaEvent_t = CUevent_emu*;

inline cudaError_t cudaMalloc(void* p, size_t n) {
  void* q = std::aligned_alloc(256, (n + 255) / 256 * 256);
  *static_cast<void**>(p) = q;
  return q != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
template <typename T>
inline cudaError_t cudaMalloc(T** p, size_t n) {
  return cudaMalloc(static_cast<void*>(p), n);
}
inline cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  std::memmove(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) {
  std::memmove(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) {
  std::memset(p, v, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t) {
  std::memset(p, v, n);
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
template <typename F>
inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) {
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  *p = cudaDeviceProp{};
  return cudaSuccess;
}
inline cudaError_t cudaMemGetInfo(size_t* free_b, size_t* total) {
  *free_b = size_t(1) << 30;
  *total = size_t(1) << 30;
  return cudaSuccess;
}
inline cudaError_t cudaDriverGetVersion(int* v) {
  *v = 0;
  return cudaSuccess;
}
inline cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr, int) {
  *v = 0;
  return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new CUevent_emu;
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
  e->t = std::chrono::steady_clock::now();
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
  return cudaSuccess;
}

#endif  // PREFIXSIM_TESTS_CUDA_EMULATE_CUDA_RUNTIME_H_
