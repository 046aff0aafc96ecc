#!/usr/bin/env python3
"""Runs `prefixsim resolve` on the HuggingFace-derived model presets under both block-size
policies and prints a Markdown summary (groups, block sizes, S, H, A, padding waste).

Usage: scripts/resolve_presets.py [path/to/prefixsim] > configs/models/HF_PRESETS_RESOLVE.md
"""
import json
import subprocess
import sys

PRESETS = [
    "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "mistral-7b",
    "qwen2.5-7b", "qwen2.5-72b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
    "gpt-oss-20b", "gpt-oss-120b", "gemma-2-9b", "gemma-2-27b",
    "gemma-3-4b", "gemma-3-12b", "gemma-3-27b", "llama-4-scout", "llama-4-maverick",
    "deepseek-v3", "kimi-k2", "qwen3-next-80b-a3b", "kimi-linear-48b-a3b",
]
# Presets whose checkpoints carry MTP drafter layers also run with the MTP engine.
MTP = {"deepseek-v3", "qwen3-next-80b-a3b"}
# HuggingFace configs at other tensor-parallel sizes (shapes per rank change).
TP_RUNS = [
    ("tests/data/hf/llama-3.1-70b-instruct.json", 8),
    ("tests/data/hf/gemma-3-27b-it.json", 4),
    ("tests/data/hf/deepseek-v3.json", 8),
    ("tests/data/hf/qwen3-next-80b-a3b-instruct.json", 2),
    ("tests/data/hf/qwen3-next-80b-a3b-instruct.json", 4),
    ("tests/data/hf/kimi-linear-48b-a3b-instruct.json", 4),
]


def resolve(binary, model, engine, policy, extra=()):
    cmd = [binary, "resolve", "--model", model, "--engine", engine, "--policy", policy, "--json",
           *extra]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().replace("\n", " ")
    return json.loads(out.stdout), None


def summarize(plan):
    """Groups merged by (kind, block size, page, padding): count, drafter and padding layers."""
    merged = {}
    for g in plan["groups"]:
        key = (g["kind"], g["block_size"], g["page_bytes"], g["padding_bytes"])
        entry = merged.setdefault(key, [0, 0, 0])
        entry[0] += 1
        entry[1] += g.get("num_drafter_layers", 0)
        entry[2] += g.get("num_padding_layers", 0)
    parts = []
    for (kind, block, page, pad), (n, draft_layers, pad_layers) in merged.items():
        text = f"{kind} {n}x B={block}"
        if pad:
            text += f" (page {page} B, {pad} B = {100.0 * pad / page:.1f}% padding)"
        if draft_layers:
            text += f" incl. {draft_layers} drafter layer(s)"
        if pad_layers:
            text += f" +{pad_layers} padding layer(s)"
        parts.append(text)
    return "; ".join(parts)


def row(binary, label, model, engine, extra=()):
    lines = []
    for policy in ("old", "new"):
        plan, err = resolve(binary, model, engine, policy, extra)
        if plan is None:
            lines.append(f"| {label} | {engine} | {policy} | error: {err} | | | | | |")
            continue
        lines.append(
            f"| {label} | {engine} | {policy} | {summarize(plan)} | {plan['primary_block_size']} | "
            f"{plan['scheduler_block_size']} | {plan['hash_block_size']} | "
            f"{plan['hit_alignment']} | {plan['num_blocks']} |")
    return lines


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/prefixsim"
    print("| model | engine | policy | KV cache groups (kind, count x block size B, page padding) |"
          " P | S | H | A | num_blocks |")
    print("|---|---|---|---|---|---|---|---|---|")
    for preset in PRESETS:
        for line in row(binary, preset, preset, "h200"):
            print(line)
        if preset in MTP:
            for line in row(binary, preset, preset, "h200-mtp"):
                print(line)
    for path, tp in TP_RUNS:
        label = f"{path.split('/')[-1]} TP={tp}"
        for line in row(binary, label, path, "h200", ("--tensor-parallel-size", str(tp))):
            print(line)
        if "qwen3-next" in path or "deepseek" in path:
            for line in row(binary, label, path, "h200-mtp", ("--tensor-parallel-size", str(tp))):
                print(line)


if __name__ == "__main__":
    main()
