#!/usr/bin/env bash
# Sets up, builds, and runs the main job on the shipped defaults: the sample multi-turn chat trace
# replayed on the Kimi-K3-like model with the DSpark drafter, old vs new block-size policy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The binary alone: the test suite and the benchmarks are scripts/test.sh's to build.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target prefixsim
./build/prefixsim resolve --model kimi-k3-like --engine kimi-k3-dspark --policy new
./build/prefixsim compare --trace traces/sample_chat.jsonl --model kimi-k3-like \
  --engine kimi-k3-dspark --policies old,new "$@"
