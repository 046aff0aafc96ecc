#!/usr/bin/env bash
# Wall time, peak RSS and simulated requests per wall-second of the Mooncake conversation trace
# (Kimi-K3-like with DSpark, `new`, kv_aware) on 16 and on 256 replicas, interleaved round by
# round (ROUNDS, default 3), and the 256/16 ratios of the medians (issue 29: at most 2 each).
# Usage: bench/fleet_scale.sh [build dir]
set -euo pipefail
build=${1:-build}
trace=traces/real/mooncake_conversation_trace.jsonl.zst
rounds=${ROUNDS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((i = 0; i < rounds; i++)); do
  for n in 16 256; do
    /usr/bin/time -f "%e %M" -o "$out/time" "$build/prefixsim" replay --trace "$trace" \
      --model kimi-k3-like --engine kimi-k3-dspark --policy new --replicas "$n" \
      --router kv_aware --json "$out/r.json" >/dev/null
    echo "$n $(cat "$out/time") $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$out/r.json")" >>"$out/runs"
  done
done
python3 - "$out/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    n, wall, rss, requests = line.split()
    runs.setdefault(int(n), []).append((float(wall), int(rss), int(requests)))
med = {n: (statistics.median(w for w, _, _ in r), statistics.median(m for _, m, _ in r), r[0][2])
       for n, r in runs.items()}
for n, (wall, rss, requests) in sorted(med.items()):
    print(f"{n:4d} replicas: {wall:.2f} s, {rss / 1024:.1f} MB, {requests / wall:,.0f} requests per wall-second")
wall_ratio = med[256][0] / med[16][0]
rss_ratio = med[256][1] / med[16][1]
print(f"256 / 16: wall {wall_ratio:.2f}x, peak RSS {rss_ratio:.2f}x (targets <= 2)")
sys.exit(0 if wall_ratio <= 2 and rss_ratio <= 2 else 1)
PY
