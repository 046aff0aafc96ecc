#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ in build-fuzz/ (clang, ASan + UBSan) and runs each
# for FUZZ_RUNS inputs (default 20000, at most FUZZ_SECONDS, default 60) from its seed corpus in tests/fuzz/corpus/<target>/. Fails if any
# target crashes, leaks, hangs, exceeds its memory limit or gets a sanitizer report; the input
# that did it is left in build-fuzz/artifacts/. Usage: scripts/fuzz.sh [target ...]
set -euo pipefail
cd "$(dirname "$0")/.."
# A fixed seed and a fixed number of runs per target: CI explores exactly the inputs a local run
# of this script does, so a green run is reproducible (FUZZ_SEED=0 picks a fresh seed, as
# libFuzzer does, and FUZZ_RUNS=-1 runs until FUZZ_SECONDS, for real fuzzing sessions).
seed="${FUZZ_SEED:-1}"
runs="${FUZZ_RUNS:-20000}"
seconds="${FUZZ_SECONDS:-60}"
rss_mb="${FUZZ_RSS_MB:-2048}"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DPREFIXSIM_FUZZ=ON \
  -DPREFIXSIM_BUILD_TESTS=OFF -DPREFIXSIM_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j"$(nproc)"

if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for src in tests/fuzz/*_fuzz.cc; do targets+=("$(basename "$src" .cc)"); done
fi
mkdir -p build-fuzz/artifacts build-fuzz/logs
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=()
for t in "${targets[@]}"; do
  # New inputs go to the scratch corpus (first folder); the checked-in seeds stay as they are.
  mkdir -p "build-fuzz/corpus/$t"
  log="build-fuzz/logs/$t.log"
  if ./build-fuzz/"$t" -seed="$seed" -runs="$runs" -max_total_time="$seconds" \
    -rss_limit_mb="$rss_mb" -timeout=25 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t-" \
    "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    echo "fuzz $t: ok ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}') runs)"
  else
    echo "fuzz $t: FAILED (log: $log)"
    tail -n 60 "$log"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing failed: ${failed[*]}; crashing inputs in build-fuzz/artifacts/" >&2
  exit 1
fi
echo "fuzzing: ${#targets[@]} targets, ${runs} runs (at most ${seconds} s) each, seed ${seed}, no crash"
