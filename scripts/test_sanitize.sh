#!/usr/bin/env bash
# Builds prefixsim and its whole test suite with AddressSanitizer + UndefinedBehaviorSanitizer
# (LeakSanitizer included) in build-asan/ and runs it. Any sanitizer report fails its test.
# Extra arguments go to ctest (e.g. -R Trace).
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# clang, at -O1 with line tables only: it compiles the suite in about half the time GCC takes at
# -O2 -g, and the reports still name file and line. A build-asan/ made by another compiler is
# made again (CMake cannot switch compilers in place).
if [ -f build-asan/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang' build-asan/CMakeCache.txt; then
  rm -rf build-asan
fi
CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPREFIXSIM_SANITIZE=ON "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
  -DPREFIXSIM_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build build-asan -j"$(nproc)"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# The soak (a million requests) is a Release-build test (scripts/test.sh runs it there).
ctest --test-dir build-asan --output-on-failure -j"$(nproc)" -LE soak "$@"
