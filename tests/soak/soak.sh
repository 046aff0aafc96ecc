#!/usr/bin/env bash
# Soak (ctest label "soak"): generates a 1,000,000-request chat trace and replays it on the
# Kimi-K3-like model with the DSpark drafter (20 KV groups), checking the KV cache's invariants
# after every 1000th step (--check-invariants-every; a broken invariant aborts the run), then
# checks that every request read is accounted for: finished + skipped == read == 1,000,000.
# Usage: soak.sh PREFIXSIM_BINARY [requests]
set -euo pipefail
bin=$1
requests=${2:-1000000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" gen-trace --kind chat --seed 7 --requests "$requests" --out "$tmp/chat.jsonl" >/dev/null
start=$SECONDS
"$bin" replay --trace "$tmp/chat.jsonl" --model kimi-k3-like --engine kimi-k3-dspark --policy new \
  --no-progress --no-wall-time --check-invariants-every 1000 --json "$tmp/out.json" >"$tmp/out.txt"
field() {  # the integer value of "name": N in the JSON summary (first occurrence)
  grep -o "\"$1\": [0-9]*" "$tmp/out.json" | head -n 1 | awk '{print $2}'
}
read=$(field requests)
finished=$(field finished_requests)
skipped=$(( $(field prompt_too_long) + $(field does_not_fit) + $(field empty_prompt) ))
steps=$(field num_steps)
echo "soak: $read requests read, $finished finished, $skipped skipped, $steps steps, invariants checked every 1000 steps, $((SECONDS - start)) s"
if [ "$read" != "$requests" ] || [ $((finished + skipped)) != "$read" ]; then
  echo "soak: FAILED: not every request is accounted for" >&2
  exit 1
fi
