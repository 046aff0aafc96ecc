#!/usr/bin/env python3
"""Old against new block-size policy on the Mooncake conversation trace, from Python.

Replays the trace under both policies in-process (prefixsim.compare) on a fleet of 16 Kimi-K3-like
+ DSpark replicas behind a KV-aware router (one replica cannot keep up with the trace: its queue,
not the policy, would decide the hit rate; docs/results.md), then plots the hit rate over time
and what the misses were (miss causes, docs/design.md §7) into one PNG:

    PYTHONPATH=build/python python3 examples/python/old_vs_new.py --out old_vs_new.png

(after `cmake --install`, plain `python3`; docs/python.md). The numbers are the ones
`prefixsim compare` prints for the same arguments."""

import argparse
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402

import prefixsim  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]


def hit_rate_over_time(requests, bin_s):
    """Token-weighted hit rate of the requests arriving in each `bin_s`-second bin."""
    bins = (requests["arrival_s"] // bin_s) * bin_s
    grouped = requests.groupby(bins)[["hit_tokens", "prompt_tokens"]].sum()
    return grouped["hit_tokens"] / grouped["prompt_tokens"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(
        REPO / "traces/real/mooncake_conversation_trace.jsonl.zst"))
    parser.add_argument("--model", default="kimi-k3-like")
    parser.add_argument("--engine", default="kimi-k3-dspark")
    parser.add_argument("--policies", default="old,new")
    parser.add_argument("--replicas", default="16", help="fleet size, or auto")
    parser.add_argument("--router", default="kv_aware")
    parser.add_argument("--bin-s", type=float, default=120.0, help="seconds per time bin")
    parser.add_argument("--out", default="old_vs_new.png", help="the PNG to write")
    args = parser.parse_args(argv)

    replicas = args.replicas if args.replicas == "auto" else int(args.replicas)
    ab = prefixsim.compare(args.trace, args.model, args.engine, policies=args.policies,
                           replicas=replicas, router=args.router, progress=True)
    print(ab.text)

    fig, (over_time, causes) = plt.subplots(1, 2, figsize=(13, 4.8),
                                            gridspec_kw={"width_ratios": [3, 2]})
    for policy, result in ab.results.items():
        series = hit_rate_over_time(result.requests, args.bin_s)
        over_time.plot(series.index / 60, 100 * series.values, label=(
            f"{policy} (A = {result.summary['kv_plan']['hit_alignment']}, "
            f"{100 * result.hit_rate:.1f}% overall)"))
    over_time.set_xlabel("arrival (minutes since the first request)")
    over_time.set_ylabel(f"prefix-cache hit rate per {args.bin_s:.0f} s (%)")
    over_time.set_title("Hit rate over time")
    over_time.grid(alpha=0.3)
    over_time.legend()

    # Tokens looked up by first admissions, split by cause (hit included), as shares.
    table = {policy: r.miss_causes for policy, r in ab.results.items()}
    names = [c for c in next(iter(table.values())).index if any(t[c] for t in table.values())]
    left = [0.0] * len(table)
    for cause in names:
        shares = [100 * t[cause] / t.sum() for t in table.values()]
        causes.barh(list(table), shares, left=left, label=cause)
        left = [a + b for a, b in zip(left, shares)]
    causes.set_xlabel("share of the tokens looked up (%)")
    causes.set_title("Why tokens missed")
    causes.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3)

    trace_name = pathlib.Path(args.trace).name
    fig.suptitle(f"{args.model} on {args.engine} x {args.replicas} ({args.router}): {trace_name}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
