#!/usr/bin/env bash
# Records Google Benchmark JSON for the hot-path benchmarks, or compares two recordings.
#
#   bench/compare.sh record OUT.json [BUILD_DIR] [extra benchmark flags...]
#   bench/compare.sh compare BASE.json NEW.json [--threshold 0.10]
#
# `record` runs kv_bench, trace_reader_bench and cost_bench (the KV cache, trace reader and
# per-step hot paths) with --benchmark_out=FILE --benchmark_out_format=json and
# --benchmark_repetitions=5 (medians are compared), merging their "benchmarks" lists into OUT.json. See bench/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case "${1:-}" in
  record)
    out=$2
    build=${3:-$here/../build}
    shift $(( $# >= 3 ? 3 : 2 ))
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    files=()
    for b in ${PREFIXSIM_BENCHES:-kv_bench trace_reader_bench cost_bench}; do
      "$build/$b" --benchmark_out="$tmp/$b.json" --benchmark_out_format=json \
        --benchmark_repetitions="${REPETITIONS:-5}" --benchmark_report_aggregates_only=true \
        "$@" >&2
      files+=("$tmp/$b.json")
    done
    python3 - "$out" "${files[@]}" <<'PY'
import json, sys
out, files = sys.argv[1], sys.argv[2:]
docs = [json.load(open(f)) for f in files]
merged = {"context": docs[0]["context"], "benchmarks": [b for d in docs for b in d["benchmarks"]]}
json.dump(merged, open(out, "w"), indent=1)
PY
    echo "recorded $out" >&2
    ;;
  compare)
    shift
    exec python3 "$here/compare_bench.py" "$@"
    ;;
  *)
    sed -n '2,9p' "$0" >&2
    exit 2
    ;;
esac
