#!/usr/bin/env bash
# A replay on this tree's build against the same replay on an older commit's build, paired and
# interleaved round by round (ROUNDS, default 3): median wall time, CPU time and peak RSS of each
# variant, and each variant's ratio to the older commit. The older commit is built once, Release,
# `prefixsim` target only, in a worktree under ${VS_COMMIT_DIR:-/tmp/prefixsim-vs}/<commit>.
#
#   bench/vs_commit.sh COMMIT [build dir] -- [replay flags shared by every variant]
#
# Variants (each a line of extra flags; override with VARIANTS, one variant per line):
#   defaults                      (this build, its default threads and miss attribution)
#   --no-miss-causes
#   --no-miss-causes --threads 1
# The older commit runs with the shared flags only. The default pairing is issue-sized: 60,000
# generated chat requests on 16 Llama-3.1-8B replicas behind kv_aware, policy `new`:
#   bench/vs_commit.sh 0247316 build -- --trace /tmp/chat60k.jsonl --model llama-3.1-8b \
#     --engine llama-3.1-8b --policy new --replicas 16 --router kv_aware
# (trace: prefixsim gen-trace --kind chat --seed 5 --rate 16 --requests 60000 --out /tmp/chat60k.jsonl)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
commit=${1:?usage: bench/vs_commit.sh COMMIT [build dir] -- [replay flags]}
shift
build=build
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build=$1; shift; fi
[ "${1:-}" = "--" ] && shift
shared=("$@")

base_root=${VS_COMMIT_DIR:-/tmp/prefixsim-vs}
sha=$(git -C "$here" rev-parse --short "$commit")
base_src=$base_root/$sha
base_bin=$base_src/build/prefixsim
if [ ! -x "$base_bin" ]; then
  mkdir -p "$base_root"
  [ -d "$base_src" ] || git -C "$here" worktree add --detach "$base_src" "$sha" >&2
  cmake -S "$base_src" -B "$base_src/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$base_src/build" --target prefixsim -j"$(nproc)" >&2
fi

variants=${VARIANTS:-$'defaults\n--no-miss-causes\n--no-miss-causes --threads 1'}
rounds=${ROUNDS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() { # label binary flags...
  local label=$1 bin=$2
  shift 2
  /usr/bin/time -f "%e %U %S %M" -o "$out/time" "$bin" replay "${shared[@]}" "$@" \
    --no-progress >/dev/null
  echo "$label|$(cat "$out/time")" >>"$out/runs"
}
for ((i = 0; i < rounds; i++)); do
  run "$sha" "$base_bin"
  while IFS= read -r v; do
    [ -n "$v" ] || continue
    if [ "$v" = defaults ]; then run "$v" "$build/prefixsim"; else
      # shellcheck disable=SC2086
      run "$v" "$build/prefixsim" $v
    fi
  done <<<"$variants"
done
python3 - "$out/runs" "$sha" <<'PY'
import statistics, sys
runs, base = {}, sys.argv[2]
for line in open(sys.argv[1]):
    label, t = line.rstrip("\n").split("|")
    wall, user, sys_, rss = (float(x) for x in t.split())
    runs.setdefault(label, []).append((wall, user + sys_, rss / 1024))
med = {k: tuple(statistics.median(r[i] for r in v) for i in range(3)) for k, v in runs.items()}
bw, bc, br = med[base]
print(f"{'variant':34} {'wall s':>7} {'CPU s':>7} {'RSS MB':>7} {'wall x':>7} {'CPU x':>6} {'RSS x':>6}")
for k, (w, c, r) in med.items():
    name = f"{base} (base)" if k == base else k
    print(f"{name:34} {w:7.2f} {c:7.2f} {r:7.0f} {w / bw:7.2f} {c / bc:6.2f} {r / br:6.2f}")
PY
