#!/usr/bin/env bash
# What `prefixsim tune`'s shared parsing and successive halving save (docs/tune.md): a search
# with --budget N against the same N plans (and the baselines) each replayed separately on the
# whole trace by `prefixsim replay` (each parsing and hashing the trace itself), on the same
# cores, in one sitting. Prints both wall times and their ratio.
#
#   bench/tune_search.sh [BUILD_DIR] [TRACE] [BUDGET]
#
# Defaults: build, the Mooncake conversation trace, a budget of 100; Kimi-K3-like + DSpark with
# 1 TiB of KV per rank (where one engine's hit rate measures the plan rather than the pool).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
trace="${2:-}"
budget="${3:-100}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ -z "$trace" ]]; then
  trace="$work/mooncake.jsonl"
  zstd -q -d -f "$root/traces/real/mooncake_conversation_trace.jsonl.zst" -o "$trace"
fi
bin="$build/prefixsim"
args=(--model kimi-k3-like --engine kimi-k3-dspark --trace "$trace" --kv-cache-bytes 1TiB)

start=$(date +%s.%N)
"$bin" tune "${args[@]}" --budget "$budget" --no-progress --top 100000 --json "$work/all.json" \
  > "$work/tune.txt"
tune_s=$(echo "$(date +%s.%N) - $start" | bc)
# The plans the search replayed are the first rows of its order; the scenario holds exactly them.
replayed=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); \
print(sum(1 for c in d['candidates'] if c['replayed_requests'] > 0))" "$work/all.json")
mkdir -p "$work/scenario"
"$bin" tune "${args[@]}" --budget "$budget" --no-progress --top "$replayed" \
  --write-scenario "$work/scenario/tune.json" --json "$work/shown.json" > /dev/null
# One `replay` per plan, as a user would run them (miss attribution off, as tune's replays),
# on as many processes at once as there are cores.
python3 - "$work/shown.json" "$work/scenario" > "$work/replays.txt" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["candidates"]:
    flags = []
    for field, value in c["replay_options"].items():
        if field == "policy" and value.endswith(".json"):
            value = sys.argv[2] + "/" + value
        flags += ["--" + field.replace("_", "-"), str(value)]
    print(" ".join(flags))
PY
start=$(date +%s.%N)
xargs -P "$(nproc)" -L 1 "$bin" replay "${args[@]}" --no-miss-causes --no-progress \
  < "$work/replays.txt" > /dev/null
separate_s=$(echo "$(date +%s.%N) - $start" | bc)

head -1 "$work/tune.txt"
printf 'plans replayed by the search: %d (separately: %d)\n' "$replayed" "$(wc -l < "$work/replays.txt")"
printf 'tune (halving, one parse):            %8.1f s\n' "$tune_s"
printf 'separate whole-trace replays:         %8.1f s\n' "$separate_s"
printf 'ratio tune / separate:                %8.2f\n' "$(echo "$tune_s / $separate_s" | bc -l)"
