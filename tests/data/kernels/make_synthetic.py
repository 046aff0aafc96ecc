#!/usr/bin/env python3
"""Writes synthetic_kimi_old_new.csv: a SYNTHETIC kernel-time CSV in prefixsim_kernel_bench's
format for the unit tests of the measured cost model. Nothing in it was measured: every time is a
formula of the bytes each kernel must move (and, for prefill, its FLOPs) at made-up rates.

  python3 tests/data/kernels/make_synthetic.py bench/cuda/grid_kimi_old_new.txt \
      > tests/data/kernels/synthetic_kimi_old_new.csv
"""
import sys

BW = 3.0e12        # made-up bytes/s a kernel achieves
COPY = 4.0e12      # made-up copy bandwidth (read + write)
GEMM = 7.0e14      # made-up bf16 GEMM rate
FLOPS = 3.0e14     # made-up attention FLOP rate (prefill)
LAUNCH_US = 4.0

lines = open(sys.argv[1]).read().splitlines()
print("# SYNTHETIC kernel times for unit tests: NOT MEASURED (tests/data/kernels/make_synthetic.py)")
print("# synthetic: time_us = 4 + bytes / 3e12 (+ prefill FLOPs / 3e14); copy and GEMM rates made up")
print("# gpu: none (synthetic)")
print(f"# copy_bytes_per_s: {COPY}")
print(f"# gemm_flops_per_s: {GEMM}")
header = None
for line in lines:
    if not line or line.startswith("#"):
        continue
    f = line.split(",")
    if header is None:
        header = f
        print(line + ",splits,rotations,time_us,p10_us,p90_us,bytes,bytes_per_s,copy_fraction,"
              "check_error,check_ok")
        continue
    r = dict(zip(header, f))
    op = r["op"]
    n = {k: int(v) for k, v in r.items() if k not in ("op", "policies", "kind")}
    mla = r["kind"] == "mla"
    row = (n["k_dim"] + (0 if mla else n["v_dim"])) * n["elem_bytes"] * n["kv_heads"]
    flops = 0.0
    if op in ("decode", "mla_decode", "prefill", "mla_prefill"):
        keys = n["context"]
        if n["window"] > 0:
            keys = min(keys, n["window"] + n["q_tokens"] - 1)
        nbytes = n["batch"] * keys * row
        flops = 4.0 * n["batch"] * n["q_tokens"] * keys * n["q_heads"] * n["k_dim"]
        if op.endswith("prefill"):
            flops /= 2  # causal
    elif op == "append":
        nbytes = 2 * n["batch"] * n["q_tokens"] * row
    else:
        nbytes = 2 * n["batch"] * n["state_bytes"]
    t = LAUNCH_US + nbytes / BW * 1e6 + flops / FLOPS * 1e6
    bps = nbytes / (t * 1e-6)
    print(f"{line},1,1,{t:.3f},{t:.3f},{t:.3f},{nbytes},{bps:.4g},{bps / COPY:.4f},0,1")
