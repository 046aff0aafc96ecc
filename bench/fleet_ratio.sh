#!/usr/bin/env bash
# The cost of a fleet over one engine, on one thread, from Google Benchmark's own JSON output of
# bench/fleet_bench.cc (medians of 3): the Mooncake conversation trace on 16 kv_aware replicas,
# against one replica given the whole trace (issue 10: wall at most 1.5x; issue 29: 1.2x) and
# against one replica given a sixteenth of the load (arrivals 16 times slower, what each of the
# 16 replicas gets). The first single engine cannot keep up: it runs fewer, larger steps than
# the fleet, so the per-step ratio against the second says more about the fleet's own cost.
# Exits 1 when the issue 10 ratio is missed. Usage: bench/fleet_ratio.sh [build dir]
set -euo pipefail
build=${1:-build}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$build/fleet_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$out" --benchmark_out_format=json >/dev/null
python3 - "$out" <<'PY'
import json, sys
runs = {b["name"]: b for b in json.load(open(sys.argv[1]))["benchmarks"]}
def run(replicas, time_scale):
    return runs[f"ReplayFleetMooncake/kv_aware/replicas:{replicas}/time_scale:{time_scale}/real_time_median"]
one, slow, fleet = run(1, 1), run(1, 16), run(16, 1)
for label, r in (("1 replica, the whole trace", one), ("1 replica, arrivals 16x slower", slow),
                 ("16 replicas, kv_aware", fleet)):
    print(f"{label}: {r['real_time']:.0f} ms, {r['steps_per_s'] / 1e6:.2f} M steps/s, "
          f"hit rate {100 * r['hit_rate']:.2f}%")
ratio = fleet["real_time"] / one["real_time"]
print(f"16 replicas / 1 replica, whole trace: wall {ratio:.2f}x (issue 10: <= 1.5, issue 29: <= 1.2)")
print(f"16 replicas / 1 replica, same load per replica: wall {fleet['real_time'] / slow['real_time']:.2f}x, "
      f"per step {slow['steps_per_s'] / fleet['steps_per_s']:.2f}x")
sys.exit(0 if ratio <= 1.5 else 1)
PY
