#!/usr/bin/env bash
# Installs the Debian packages prefixsim needs to build and test. Safe to re-run.
set -euo pipefail
packages=(cmake g++ make pkg-config
  libabsl-dev libboost-graph-dev libsimdjson-dev nlohmann-json3-dev libcli11-dev
  zlib1g-dev libzstd-dev zstd libgtest-dev libgmock-dev libbenchmark-dev
  libjemalloc-dev  # the binary's allocator (CMake option PREFIXSIM_JEMALLOC)
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev  # vLLM's KV event stream: ZMQ sockets, msgpack (sim/events)
  python3-msgpack python3-zmq  # the independent KV event reader/subscriber (tests/events/vllm_kv_events.py)
  chromium     # headless browser check of the HTML report (tests/report/html_browser_test.cc)
  slurm-wlm munge      # a single-node Slurm for tests/slurm/slurm_roundtrip.sh
  clang libclang-rt-dev  # libFuzzer and the sanitizer runtimes (scripts/fuzz.sh)
  clang-format-14  # the style check (scripts/check_format.sh), pinned: versions format differently
  python3  # scripts/mutate.py (.ci/run checks that every mutant still applies to the code)
  # The Python module (-DPREFIXSIM_PYTHON=ON, python/): its build, its tests (tests/python/) and
  # its example's plots (examples/python/).
  pybind11-dev python3-dev python3-pytest python3-numpy python3-pandas python3-matplotlib)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y --no-install-recommends "${missing[@]}"
fi
