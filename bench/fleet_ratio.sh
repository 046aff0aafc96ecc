#!/usr/bin/env bash
# The cost of a fleet over its engines, on one thread, from Google Benchmark's own JSON output of
# bench/fleet_bench.cc (medians of 3): the Mooncake conversation trace on 16 kv_aware replicas
# against the same 16 replicas alone (each replica's requests, as the fleet routed them, replayed
# on an engine of its own, one after another: the same simulated work without the fleet), and,
# for reference, against one replica given the whole trace and one given a sixteenth of the load
# (arrivals 16 times slower). Those two single engines simulate other things: the first cannot
# keep up and runs about 80 times fewer steps than the fleet, the second loses the fleet's hit
# rate; their ratios say little about the fleet's own cost. Exits 1 when the fleet takes more
# 2.5 times the wall of its replicas alone (a regression guard; docs/performance.md gives the
# measured figure). Usage: bench/fleet_ratio.sh [build dir]
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
alone = runs["ReplayFleetReplicasAlone/real_time_median"]
for label, r in (("16 replicas, kv_aware", fleet), ("the same 16 replicas alone", alone),
                 ("1 replica, the whole trace", one), ("1 replica, arrivals 16x slower", slow)):
    hit = f", hit rate {100 * r['hit_rate']:.2f}%" if "hit_rate" in r else ""
    print(f"{label}: {r['real_time']:.0f} ms, {r['steps_per_s'] / 1e6:.2f} M steps/s{hit}")
ratio = fleet["real_time"] / alone["real_time"]
print(f"16 replicas / the same replicas alone: wall {ratio:.2f}x (guard: <= 2.5)")
print(f"16 replicas / 1 replica, whole trace: wall {fleet['real_time'] / one['real_time']:.2f}x; "
      f"same load per replica: wall {fleet['real_time'] / slow['real_time']:.2f}x, "
      f"per step {slow['steps_per_s'] / fleet['steps_per_s']:.2f}x")
sys.exit(0 if ratio <= 2.5 else 1)
PY
