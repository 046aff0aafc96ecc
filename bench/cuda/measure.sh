#!/usr/bin/env bash
# The one script a device call runs (docs/cuda.md §Device run): builds the CUDA tool from
# sim/cuda/ with the machine's nvcc, CMake and ninja (nothing else is needed: no Abseil), checks
# every kernel against its CPU reference, times the committed grid and writes the CSV and the log
# under $OUT (or ./cuda-out when OUT is unset). Whole run: about 6 minutes on an H200 at most;
# TIME_BUDGET_S bounds the timing loop (default 180 s), points past it are reported as skipped;
# then, where PyTorch sees the GPU, bench/cuda/torch_reference.py times SDPA at the same shapes
# as a peer reference (at most 90 s; SKIP_TORCH=1 leaves it out).
#
#   bash bench/cuda/measure.sh [GRID]        (default: bench/cuda/grid_kimi_old_new.txt)
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-$PWD/cuda-out}"
mkdir -p "$out"
log="$out/measure.log"
grid="${1:-bench/cuda/grid_kimi_old_new.txt}"
budget="${TIME_BUDGET_S:-180}"
build="${BUILD_DIR:-/tmp/prefixsim-cuda-build}"
exec > >(tee -a "$log") 2>&1
echo "measure.sh: $(date -u +%FT%TZ) grid $grid, timing budget ${budget}s"

nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
echo "--- environment"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv 2>&1 || echo "nvidia-smi failed"
"$nvcc" --version | tail -2
cmake --version | head -1
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

echo "--- build"
start=$(date +%s)
if ! cmake -S bench/cuda -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_CUDA_COMPILER="$nvcc" >"$out/build.log" 2>&1 ||
   ! cmake --build "$build" -j "$(nproc)" >>"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "measure.sh: the build failed (log: build.log)"
  exit 1
fi
echo "built in $(( $(date +%s) - start ))s"

commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
dirty="$(git status --porcelain 2>/dev/null | grep -v '^??' | head -1)"
smi="$(nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.limit --format=csv,noheader 2>/dev/null | head -1)"
echo "--- checks and timing"
"$build/prefixsim_kernel_bench" --grid "$grid" --out "$out/kernels.csv" \
  --time-budget-s "$budget" \
  --meta "git_commit=${commit}${dirty:+ (with uncommitted changes)}" \
  --meta "nvidia_smi_clocks_sm_mem_power_limit=${smi}" \
  --meta "grid_file=${grid}"
rc=$?
if [ "${SKIP_TORCH:-0}" != 1 ] && python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "--- peer reference: PyTorch SDPA on contiguous KV (at most 90 s)"
  copy="$(sed -n 's/^# copy_bytes_per_s: //p' "$out/kernels.csv" 2>/dev/null | head -1)"
  PYTHONUNBUFFERED=1 timeout 90 python3 bench/cuda/torch_reference.py "$out/torch_sdpa.csv" \
    ${copy:+"$copy"} || echo "torch_reference.py failed or timed out (the kernel CSV stands)"
fi
echo "--- summary"
if [ -f "$out/kernels.csv" ]; then
  # The decode rows at batch >= 32 and context >= 8k: the issue's target is >= 70% of the copy.
  awk -F, '/^#/ {next} NR>0 && $1=="op" {for (i=1;i<=NF;i++) c[$i]=i; next}
           ($1=="decode"||$1=="mla_decode") && $(c["batch"])>=32 && $(c["context"])>=8192 {
             printf "%-10s %-15s bs %5s batch %4s q %s ctx %6s: %9.1f us  %5.1f%% of copy\n",
               $1, $(c["kind"]), $(c["block_size"]), $(c["batch"]), $(c["q_tokens"]),
               $(c["context"]), $(c["time_us"]), 100*$(c["copy_fraction"]) }' "$out/kernels.csv"
  grep -E '^# (gpu|copy_bytes_per_s|gemm_flops_per_s):' "$out/kernels.csv"
fi
echo "measure.sh: exit $rc after $(( $(date +%s) - start ))s; files in $out"
exit $rc
