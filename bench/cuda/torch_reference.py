#!/usr/bin/env python3
"""Peer reference for bench/cuda's kernels (docs/cuda.md): PyTorch's fastest attention (SDPA) at
the grid's GQA decode and prefill shapes, on contiguous bf16 KV, timed like the tool times ours
(warm-up, one CUDA event pair per call, median, KV sets rotated past 2.5x L2).

  python3 bench/cuda/torch_reference.py OUT.csv [COPY_BYTES_PER_S]

Optional: measure.sh runs it after the main measurement when PyTorch is importable. Not run in CI.
"""
import math
import statistics
import sys

import torch
import torch.nn.functional as F

Q_HEADS, KV_HEADS, HEAD_DIM = 32, 4, 128  # the Kimi drafter's per-rank shape, 8 q heads per kv
BATCHES = [1, 32, 128]
CONTEXTS = [1024, 8192, 32768]
REPS = 25


def time_call(fn, sets):
    for i in range(3):
        fn(i % sets)
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(REPS)]
    for i, (a, b) in enumerate(events):
        a.record()
        fn((i + 3) % sets)
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in events) * 1e3  # us


def main():
    out = sys.argv[1]
    copy = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    rows = []
    for q_tokens in (1, 4, 512):
        for batch in BATCHES if q_tokens < 512 else [1]:
            for ctx in CONTEXTS:
                kv_bytes = 2 * batch * ctx * KV_HEADS * HEAD_DIM * 2
                sets = max(1, min(64, math.ceil(2.5 * l2 / kv_bytes)))
                if kv_bytes * sets > 0.5 * props.total_memory:
                    continue
                k = [torch.randn(batch, KV_HEADS, ctx, HEAD_DIM, device="cuda",
                                 dtype=torch.bfloat16) for _ in range(sets)]
                v = [torch.randn_like(k[0]) for _ in range(sets)]
                q = torch.randn(batch, Q_HEADS, q_tokens, HEAD_DIM, device="cuda",
                                dtype=torch.bfloat16)
                # The queries are the last q_tokens positions: causal among themselves.
                mask = None
                if q_tokens > 1:
                    pos = torch.arange(ctx - q_tokens, ctx, device="cuda")[:, None]
                    mask = torch.arange(ctx, device="cuda")[None, :] <= pos

                def call(i):
                    F.scaled_dot_product_attention(q, k[i], v[i], attn_mask=mask,
                                                   enable_gqa=True)

                us = time_call(call, sets)
                bps = kv_bytes / (us * 1e-6)
                rows.append((batch, q_tokens, ctx, us, kv_bytes, bps, bps / copy if copy else 0))
                print(f"sdpa batch {batch:4d} q {q_tokens:4d} ctx {ctx:6d}: {us:10.2f} us"
                      + (f"  {100 * bps / copy:5.1f}% of copy" if copy else ""), flush=True)
                del k, v
                torch.cuda.empty_cache()
    with open(out, "w") as f:
        f.write(f"# torch {torch.__version__} SDPA on contiguous bf16 KV, {props.name}\n")
        f.write(f"# q_heads {Q_HEADS}, kv_heads {KV_HEADS}, head_dim {HEAD_DIM}; median of {REPS}\n")
        f.write("batch,q_tokens,context,time_us,bytes,bytes_per_s,copy_fraction\n")
        for r in rows:
            f.write("%d,%d,%d,%.3f,%d,%.4g,%.4f\n" % r)


if __name__ == "__main__":
    main()
