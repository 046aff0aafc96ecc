#!/usr/bin/env bash
# Prints the wall-time ratio of the 16-replica kv_aware fleet replay of the Mooncake conversation
# trace over the single-replica replay of the same trace (issue 10: at most 1.5), from Google
# Benchmark's own JSON output of bench/fleet_bench.cc. Usage: bench/fleet_ratio.sh [build dir]
set -euo pipefail
build=${1:-build}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$build/fleet_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out" --benchmark_out_format=json >/dev/null
python3 - "$out" <<'PY'
import json, sys
runs = {b["name"]: b for b in json.load(open(sys.argv[1]))["benchmarks"]}
one = runs["ReplayFleetMooncake/kv_aware/1/real_time_median"]
fleet = runs["ReplayFleetMooncake/kv_aware/16/real_time_median"]
ratio = fleet["real_time"] / one["real_time"]
print(f"single replica: {one['real_time']:.0f} ms (hit rate {100 * one['hit_rate']:.2f}%)")
print(f"16 replicas, kv_aware: {fleet['real_time']:.0f} ms (hit rate {100 * fleet['hit_rate']:.2f}%)")
print(f"ratio: {ratio:.2f} (target <= 1.5)")
sys.exit(0 if ratio <= 1.5 else 1)
PY
