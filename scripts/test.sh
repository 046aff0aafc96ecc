#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (the README's test command). The suite is built
# once, under AddressSanitizer + UndefinedBehaviorSanitizer (scripts/test_sanitize.sh,
# build-asan/): every test but the soak runs there. Then the Release build (build/): the binary
# and the benchmarks, and the million-request soak, which needs the optimised binary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/test_sanitize.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target prefixsim prefixsim_benchmarks
bash tests/soak/soak.sh build/prefixsim
