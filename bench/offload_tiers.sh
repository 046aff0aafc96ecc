#!/usr/bin/env bash
# Offload tiers on the Mooncake conversation trace (docs/semantics.md §16): the hit rate by tier
# for the Kimi-K3-like + DSpark plan under old and new, with 0, 256 GiB and 1 TiB of CPU tier,
# under both CPU slot sizings; then a 16-replica kv_aware fleet with a CPU and a file-system tier
# per replica; and the replay's wall time with tiers against without, in one run.
# Usage: bench/offload_tiers.sh [build dir]   (default: build)
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/prefixsim"
TRACE=$(mktemp --suffix=.jsonl)
OUT=$(mktemp -d)
trap 'rm -rf "$TRACE" "$OUT"' EXIT
zstd -q -d -f traces/real/mooncake_conversation_trace.jsonl.zst -o "$TRACE"

row() {  # label json
  python3 - "$1" "$2" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
j = json.load(open(path))
pc = j["prefix_cache"]
q = pc["queries"] - pc.get("preempted_queries", 0)
o = j.get("offload")
split = ""
if o:
    split = "GPU %.2f%%" % (100.0 * o["gpu_hit_tokens"] / q)
    for t in o["tiers"]:
        split += ", %s %.2f%% (stored %d, loaded %d, never loaded %d)" % (
            t["medium"], 100.0 * t["hit_tokens"] / q, t["stored_blocks"], t["loaded_blocks"],
            t["never_loaded_blocks"])
print("| %s | %.2f%% | %s |" % (label, 100.0 * pc["hit_rate"], split or "GPU only"))
PY
}

echo "| run | hit rate | by tier (first admissions) |"
echo "|---|---|---|"
single() {  # sizing time_scale cpu_gib...
  local sizing=$1 scale=$2
  shift 2
  for cpu in "$@"; do
    for policy in old new; do
      "$BIN" replay --model kimi-k3-like --engine kimi-k3-dspark --trace "$TRACE" \
        --policy "$policy" --kv-offloading-size "$cpu" --kv-offload-slot-sizing "$sizing" \
        --time-scale "$scale" --json "$OUT/r.json" > /dev/null
      row "$policy, 64 GiB GPU + ${cpu} GiB CPU ($sizing, time scale $scale)" "$OUT/r.json"
    done
  done
}
# At the trace's rate (one replica falls behind it, as in docs/results.md), then at a third of it.
single row_per_key 1 0 256 1024
single largest_group 1 256 1024
single row_per_key 3 0 1024 4096
single largest_group 3 256 1024 4096

# A fleet: 16 replicas behind kv_aware, each with 256 GiB of CPU tier, sharing 64 TiB of file system.
cat > "$OUT/fleet.json" <<'JSON'
{"kv_cache_bytes": 68719476736, "tensor_parallel_size": 4,
 "backends": {"mla": "FLASHMLA", "sliding_window": "FLASH_ATTN"},
 "max_num_batched_tokens": 8192, "max_num_seqs": 256, "max_model_len": 131072,
 "speculative": {"method": "dspark", "num_speculative_tokens": 3,
                 "acceptance": {"model": "per_position", "rates": [0.8, 0.6, 0.4]}},
 "kv_offloading_size": 256,
 "kv_transfer_config": {"kv_connector_extra_config":
   {"secondary_tiers": [{"type": "fs", "capacity": "64TiB", "read_gbps": 10, "write_gbps": 5,
                         "shared": true}]}},
 "kv_offload_link": {"slot_sizing": "largest_group"},
 "replicas": 16, "router": "kv_aware"}
JSON
python3 - "$OUT" <<'PY'
import json, sys
j = json.load(open(sys.argv[1] + "/fleet.json"))
for k in ("kv_offloading_size", "kv_transfer_config", "kv_offload_link"):
    del j[k]
json.dump(j, open(sys.argv[1] + "/fleet_plain.json", "w"))
PY
for policy in old new; do
  "$BIN" replay --model kimi-k3-like --engine "$OUT/fleet_plain.json" --trace "$TRACE" \
    --policy "$policy" --json "$OUT/f.json" > /dev/null
  row "$policy, 16 replicas kv_aware, each 64 GiB GPU" "$OUT/f.json"
  "$BIN" replay --model kimi-k3-like --engine "$OUT/fleet.json" --trace "$TRACE" \
    --policy "$policy" --router-cpu-tier-weight 0 --router-storage-tier-weight 0 \
    --json "$OUT/f.json" > /dev/null
  row "$policy, 16 replicas kv_aware blind to tiers, each 64 GiB GPU + 256 GiB CPU, one shared 64 TiB FS" "$OUT/f.json"
  "$BIN" replay --model kimi-k3-like --engine "$OUT/fleet.json" --trace "$TRACE" \
    --policy "$policy" --json "$OUT/f.json" > /dev/null
  row "$policy, 16 replicas kv_aware weighing tiers, each 64 GiB GPU + 256 GiB CPU, one shared 64 TiB FS" "$OUT/f.json"
done

# Replay time with tiers against without: medians of 5 interleaved runs, one replica, new.
python3 - "$BIN" "$TRACE" <<'PY'
import statistics, subprocess, sys, time
bin_, trace = sys.argv[1], sys.argv[2]
base = [bin_, "replay", "--model", "kimi-k3-like", "--engine", "kimi-k3-dspark", "--trace", trace,
        "--policy", "new"]
variants = {"no tier": [], "1 TiB CPU": ["--kv-offloading-size", "1024",
                                         "--kv-offload-slot-sizing", "largest_group"]}
times = {k: [] for k in variants}
for _ in range(5):
    for name, extra in variants.items():
        t = time.perf_counter()
        subprocess.run(base + extra, check=True, stdout=subprocess.DEVNULL)
        times[name].append(time.perf_counter() - t)
m = {k: statistics.median(v) for k, v in times.items()}
print("\nreplay wall time, median of 5: no tier %.3f s, 1 TiB CPU tier %.3f s (%.2fx)" %
      (m["no tier"], m["1 TiB CPU"], m["1 TiB CPU"] / m["no tier"]))
PY
