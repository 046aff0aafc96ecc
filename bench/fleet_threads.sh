#!/usr/bin/env bash
# A fleet replay on one thread against THREADS threads (default: the machine's cores), interleaved
# round by round (ROUNDS, default 3): median wall time, simulated requests per wall-second, the
# speedup, and that both reports are byte-identical (--no-wall-time).
# Usage: bench/fleet_threads.sh [build dir] [trace] [extra replay flags...]
#   default trace: the Mooncake conversation trace, Kimi-K3-like with DSpark, `new`, 16 replicas,
#   kv_aware. Example (generated chat, 16 Llama-3.1-8B replicas):
#   prefixsim gen-trace --kind chat --seed 1 --requests 100000 --out /tmp/chat.jsonl
#   bench/fleet_threads.sh build /tmp/chat.jsonl --model llama-3.1-8b --engine llama-3.1-8b
set -euo pipefail
build=${1:-build}
trace=${2:-traces/real/mooncake_conversation_trace.jsonl.zst}
shift $(($# < 2 ? $# : 2))
flags=("$@")
if [ ${#flags[@]} -eq 0 ]; then
  flags=(--model kimi-k3-like --engine kimi-k3-dspark --policy new)
fi
threads=${THREADS:-$(nproc)}
rounds=${ROUNDS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((i = 0; i < rounds; i++)); do
  for t in 1 "$threads"; do
    /usr/bin/time -f "%e %M" -o "$out/time" "$build/prefixsim" replay --trace "$trace" \
      --replicas "${REPLICAS:-16}" --router "${ROUTER:-kv_aware}" "${flags[@]}" --threads "$t" \
      --no-progress --no-wall-time --json "$out/r$t.json" >/dev/null
    echo "$t $(cat "$out/time")" >>"$out/runs"
  done
  cmp -s "$out/r1.json" "$out/r$threads.json" || {
    echo "reports differ between 1 and $threads threads" >&2
    exit 1
  }
done
python3 - "$out/runs" "$out/r1.json" "$threads" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    t, wall, rss = line.split()
    runs.setdefault(int(t), []).append(float(wall))
requests = json.load(open(sys.argv[2]))["requests"]
many = int(sys.argv[3])
for t in sorted(runs):
    wall = statistics.median(runs[t])
    print(f"{t:3d} thread(s): {wall:.2f} s median of {len(runs[t])}, "
          f"{requests / wall:,.0f} simulated requests per wall-second")
print(f"speedup {statistics.median(runs[1]) / statistics.median(runs[many]):.2f}x on {many} "
      "threads; reports byte-identical")
PY
