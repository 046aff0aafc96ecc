#!/usr/bin/env bash
# The CUDA backend's build check (docs/cuda.md), where nvcc is installed (the development
# machines; not Debian's CI image): builds bench/cuda's tool for sm_90 + PTX in build-cuda-tool/
# and runs its kernel checks, which skip (exit 77) without a GPU. Without nvcc it says so and
# passes: the default build's suite already covers the references and the kernels' CPU emulation.
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc="$(command -v nvcc || true)"
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
  echo "test_cuda: nvcc not found: the CUDA build is not checked here"
  exit 0
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S bench/cuda -B build-cuda-tool "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_COMPILER="$nvcc" >/dev/null
cmake --build build-cuda-tool -j "$(nproc)"
rc=0
./build-cuda-tool/prefixsim_kernel_bench --check-only --grid bench/cuda/grid_kimi_old_new.txt || rc=$?
case $rc in
  0) echo "test_cuda: kernels built and checked on the GPU" ;;
  77) echo "test_cuda: kernels built; no GPU here, so their GPU checks were skipped" ;;
  *) exit "$rc" ;;
esac
