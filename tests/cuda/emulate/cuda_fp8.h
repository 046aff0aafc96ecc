// CPU stand-in for the fp8 conversion sim/cuda/kernels.cu uses (see cuda_runtime.h here): the
// e4m3 decode is the CPU reference's, so the emulation cannot test the hardware's conversion.
#ifndef PREFIXSIM_TESTS_CUDA_EMULATE_CUDA_FP8_H_
#define PREFIXSIM_TESTS_CUDA_EMULATE_CUDA_FP8_H_

#include "cuda_runtime.h"
#include "sim/cuda/reference.h"

using __nv_fp8_storage_t = unsigned char;
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
struct __half_raw {
  float f;  // the emulation keeps the float: every e4m3 value is exact in fp16 and in float
};
struct __half {
  float f;
  explicit __half(__half_raw r) : f(r.f) {}
};
inline float __half2float(__half h) { return h.f; }
inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t v, __nv_fp8_interpretation_t) {
  return __half_raw{prefixsim::cuda::Fp8E4m3ToFloat(v)};
}

#endif  // PREFIXSIM_TESTS_CUDA_EMULATE_CUDA_FP8_H_
