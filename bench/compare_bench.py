#!/usr/bin/env python3
"""Compares two Google Benchmark JSON files (--benchmark_out_format=json) benchmark by name.

    bench/compare_bench.py BASE.json NEW.json [--threshold 0.10] [--metric real_time|cpu_time]

Prints one row per benchmark present in both files: base and new time (in each benchmark's
time unit) and the relative change (new/base - 1; positive = slower). With repetitions, the
`_median` aggregate is used when present. Exit 0 when no benchmark got slower than the
threshold, 1 when some did, 2 on bad input. Debian's libbenchmark-dev does not ship Google
Benchmark's tools/compare.py; this script reads the same JSON format.
"""
import argparse
import json
import sys


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
        benches = doc["benchmarks"]
    except (OSError, ValueError, KeyError) as e:
        print(f"compare_bench: {path}: not a Google Benchmark JSON file ({e})", file=sys.stderr)
        sys.exit(2)
    plain, medians = {}, {}
    for b in benches:
        if b.get("error_occurred"):
            continue
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[b["run_name"]] = b
        else:
            # With repetitions, keep the first iteration run (medians win below).
            plain.setdefault(b.get("run_name", b["name"]), b)
    plain.update(medians)
    return plain


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base")
    p.add_argument("new")
    p.add_argument("--threshold", type=float, default=0.10,
                   help="relative slowdown that fails (default 0.10 = 10%%)")
    p.add_argument("--metric", choices=["real_time", "cpu_time"], default="cpu_time")
    a = p.parse_args()
    base, new = load(a.base), load(a.new)
    names = [n for n in base if n in new]
    if not names:
        print("compare_bench: no benchmark in common", file=sys.stderr)
        return 2
    width = max(len(n) for n in names)
    print(f"{'benchmark':<{width}}  {'base':>14}  {'new':>14}  {'change':>8}")
    slower = []
    for n in names:
        b, c = base[n][a.metric], new[n][a.metric]
        unit = new[n].get("time_unit", "ns")
        change = (c / b - 1.0) if b > 0 else 0.0
        flag = ""
        if change > a.threshold:
            flag = "  SLOWER"
            slower.append(n)
        elif change < -a.threshold:
            flag = "  faster"
        print(f"{n:<{width}}  {b:>11.1f} {unit:<2}  {c:>11.1f} {unit:<2}  {change:>+7.1%}{flag}")
    for n in sorted(set(base) ^ set(new)):
        print(f"{n:<{width}}  (only in {'base' if n in base else 'new'})")
    if slower:
        print(f"compare_bench: {len(slower)} benchmark(s) slower than {a.threshold:.0%}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
