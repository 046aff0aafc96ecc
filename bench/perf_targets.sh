#!/usr/bin/env bash
# Issue 15's targets, measured side by side in one run (the machines are noisy: compare ratios,
# not absolute times):
#  1. whole-process wall time of the full DES replay of the Mooncake conversation trace
#     (Kimi-K3-like + DSpark, 1 TiB of KV: new, old, and new without speculation) over that of the
#     plain Python LRU yardstick (PY_LRU_BASELINE, not part of this repository) over the same trace. The runs are
#     interleaved (one of each per round, N rounds) so that a slow phase of the machine hits every
#     command alike; the ratios are of the medians (and of the best runs);
#  2. with MEMORY=1: peak RSS of `replay --csv` on generated chat traces of 10k and 1M requests
#     (same generator and rate); the 1M trace is generated once into $TMPDIR (~220 MB).
# Usage: bench/perf_targets.sh [build dir]   (env RUNS=N rounds, default 9; MEMORY=1; PYTHON=
# the interpreter, default the python3 on PATH; PY_LRU_BASELINE= the yardstick script; TRACE= the
# plain-JSONL Mooncake trace, default traces/real/ decompressed into $TMPDIR)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${RUNS:-9}
baseline=${PY_LRU_BASELINE:-}
# Without the yardstick the replays are still timed (the figures README.md quotes), with no ratio.
if [ -z "$baseline" ] || [ ! -f "$baseline" ]; then
  echo "no PY_LRU_BASELINE: timing the replays only, no ratios"
  baseline=""
fi
trace=${TRACE:-}
if [ -z "$trace" ]; then
  trace=${TMPDIR:-/tmp}/mooncake_conversation_trace.jsonl
  zstd -q -d -f traces/real/mooncake_conversation_trace.jsonl.zst -o "$trace"
fi

timing=$(mktemp)
samples=$(mktemp -d)
trap 'rm -rf "$timing" "$samples"' EXIT
run() {  # appends the wall time in seconds of "${@:2}" to $samples/$1 (ms resolution, not
         # /usr/bin/time's 10 ms: the runs take 0.1-0.3 s)
  local start end
  start=$(date +%s%N)
  "${@:2}" >/dev/null 2>&1
  end=$(date +%s%N)
  awk "BEGIN{printf \"%.3f\\n\", ($end - $start) / 1e9}" >>"$samples/$1"
}
stat() {  # "median best" of the samples of $1
  sort -n "$samples/$1" | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)], a[1]}'
}

# The interpreter itself, not a launcher in front of it: a version manager's shim (pyenv's is a
# bash script) adds its own start-up to every run (0.27 s of 0.39 s on one machine), which would
# flatter the ratios.
python=${PYTHON:-$(python3 -c 'import sys; print(sys.executable)')}
replay=("$build/prefixsim" replay --trace "$trace" --model kimi-k3-like --no-progress
        --kv-cache-bytes 1099511627776)
variants=("new:--engine kimi-k3-dspark --policy new" "old:--engine kimi-k3-dspark --policy old"
          "no-spec:--engine kimi-k3 --policy new"
          "new-no-causes:--engine kimi-k3-dspark --policy new --no-miss-causes")
for _ in $(seq "$runs"); do
  [ -n "$baseline" ] && run python "$python" "$baseline" "$trace"
  for variant in "${variants[@]}"; do
    # shellcheck disable=SC2086
    run "${variant%%:*}" "${replay[@]}" ${variant#*:}
  done
done
if [ -n "$baseline" ]; then
  read -r py_med py_best <<<"$(stat python)"
  echo "python LRU baseline ($python): median ${py_med} s, best ${py_best} s ($runs interleaved rounds)"
fi
for variant in "${variants[@]}"; do
  name=${variant%%:*}
  read -r med best <<<"$(stat "$name")"
  if [ -n "$baseline" ]; then
    echo "prefixsim replay ($name): median ${med} s, best ${best} s;" \
      "ratio $(awk "BEGIN{printf \"%.2f\", $med / $py_med}") (best $(awk "BEGIN{printf \"%.2f\", $best / $py_best}")) (target <= 1.0)"
  else
    echo "prefixsim replay ($name): median ${med} s, best ${best} s ($runs interleaved rounds)"
  fi
done

if [ "${MEMORY:-0}" = 1 ]; then
  tmp=${TMPDIR:-/tmp}
  for n in 10000 1000000; do
    t=$tmp/prefixsim_chat_$n.jsonl
    [ -f "$t" ] || "$build/prefixsim" gen-trace --kind chat --seed 1 --requests $n --out "$t" >/dev/null
    /usr/bin/time -f "%M" -o "$timing" "$build/prefixsim" replay --trace "$t" --model kimi-k3-like \
      --engine kimi-k3-dspark --policy new --no-progress --csv "$tmp/prefixsim_chat_$n.csv" \
      >/dev/null 2>&1
    rss=$(tail -n 1 "$timing")
    echo "peak RSS, $n requests with --csv: ${rss} KB"
    eval "rss_$n=$rss"
  done
  echo "ratio 1M / 10k: $(awk "BEGIN{printf \"%.2f\", $rss_1000000 / $rss_10000}") (target <= 1.2)"
fi
