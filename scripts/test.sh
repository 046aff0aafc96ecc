#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (the README's test command). The suite is built
# once, under AddressSanitizer + UndefinedBehaviorSanitizer (scripts/test_sanitize.sh,
# build-asan/): every test but the soak and the Python module's runs there. Then the Release
# build (build/): the binary, the benchmarks and the Python module; the million-request soak,
# which needs the optimised binary, and the module's tests (tests/python/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/test_sanitize.sh
# The Python module is built here too, against the same core library (compiled position-
# independent for it), and its tests (ctest label python) run against this binary.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPREFIXSIM_PYTHON=ON >/dev/null
cmake --build build -j"$(nproc)" --target prefixsim prefixsim_benchmarks prefixsim_python
bash tests/soak/soak.sh build/prefixsim
ctest --test-dir build -L python --output-on-failure
