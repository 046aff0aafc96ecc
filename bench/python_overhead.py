#!/usr/bin/env python3
"""The Python module's overhead against the CLI (docs/python.md, "Overhead"):

  * replay wall time of the Mooncake conversation trace, in-process (prefixsim.replay) against
    the built binary (`prefixsim replay`, a process per run, so its start-up is included), with
    and without per-request records (the module's requests=True against the CLI's --csv);
  * the time and memory to build the request frame (ReplayResult.requests) for that trace and
    for a generated chat trace of a million requests.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py --binary build/prefixsim \\
        --trace /tmp/mooncake_conversation_trace.jsonl --big-trace /tmp/chat_1m.jsonl

Medians of --runs runs; memory is the process's resident set (VmRSS) before and after, and the
frame's own pandas memory_usage(deep=True)."""

import argparse
import statistics
import subprocess
import time

import prefixsim
from prefixsim import _results

MODEL, ENGINE = "kimi-k3-like", "kimi-k3-dspark"


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def cli_replay(binary, trace, extra):
    subprocess.run([binary, "replay", "--trace", trace, "--model", MODEL, "--engine", ENGINE,
                    "--policy", "new", "--no-progress", *extra], check=True,
                   stdout=subprocess.DEVNULL)


def frame_figures(label, trace, runs, **options):
    before_replay = rss_mib()
    start = time.perf_counter()
    result = prefixsim.replay(trace, MODEL, ENGINE, "new", **options)
    replay_s = time.perf_counter() - start
    native = result._native
    before = rss_mib()
    start = time.perf_counter()
    frame = result.requests  # the first build, kept: what a user pays
    first_s = time.perf_counter() - start
    after = rss_mib()
    build_s, all_s = timed(lambda: _results._request_frame(native.request_columns()), runs)
    deep = frame.memory_usage(deep=True).sum() / 2**20
    print(f"{label}: {len(frame)} requests, replay {replay_s:.2f} s (RSS {before_replay:.0f} -> "
          f"{before:.0f} MiB with the records); frame: first build {first_s * 1e3:.1f} ms, "
          f"rebuilds median {build_s * 1e3:.1f} ms ({', '.join(f'{t * 1e3:.1f}' for t in all_s)}); "
          f"{deep:.1f} MiB (pandas, deep), RSS +{after - before:.1f} MiB ({before:.0f} -> "
          f"{after:.0f} MiB)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--trace", required=True, help="the Mooncake conversation trace")
    parser.add_argument("--big-trace", help="a generated trace of a million requests")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    # CLI and module runs alternate, so that a load that comes and goes (a shared machine) falls on
    # both alike.
    cases = [
        ("replay, no records", lambda: cli_replay(args.binary, args.trace, []),
         lambda: prefixsim.replay(args.trace, MODEL, ENGINE, "new", requests=False)),
        ("replay with records (CLI --csv, module .requests)",
         lambda: cli_replay(args.binary, args.trace, ["--csv", "/tmp/prefixsim_overhead.csv"]),
         lambda: prefixsim.replay(args.trace, MODEL, ENGINE, "new").requests),
    ]
    for label, cli, module in cases:
        cli_all, module_all = [], []
        for _ in range(args.runs):
            cli_all.append(timed(cli, 1)[0])
            module_all.append(timed(module, 1)[0])
        print(f"{label}: CLI median {statistics.median(cli_all):.3f} s "
              f"{[round(t, 3) for t in cli_all]}, module median "
              f"{statistics.median(module_all):.3f} s {[round(t, 3) for t in module_all]}")
    frame_figures("mooncake", args.trace, args.runs)
    if args.big_trace:
        frame_figures("1M chat", args.big_trace, 3)


if __name__ == "__main__":
    main()
