#!/usr/bin/env bash
# Builds prefixsim and its whole test suite with AddressSanitizer + UndefinedBehaviorSanitizer
# (LeakSanitizer included) in build-asan/ and runs it. Any sanitizer report fails its test.
# Extra arguments go to ctest (e.g. -R Trace).
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPREFIXSIM_SANITIZE=ON \
  -DPREFIXSIM_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build build-asan -j"$(nproc)"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# The soak (a million requests) is a Release-build test: under the sanitizers it would take an hour.
ctest --test-dir build-asan --output-on-failure -j"$(nproc)" -LE soak "$@"
