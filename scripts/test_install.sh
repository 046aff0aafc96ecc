#!/usr/bin/env bash
# The installed package, end to end (docs/embedding.md): `cmake --install build` into a temporary
# prefix, the headers, presets and CMake package are there, the installed binary finds its presets
# next to itself, and examples/embed builds against the prefix and prints the same JSON report as
# `prefixsim replay` for the same inputs. Needs a built build/ (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
build=${BUILD_DIR:-build}

prefix=$(mktemp -d /tmp/prefixsim-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
fail() {
  echo "test_install: $*" >&2
  exit 1
}

cmake --install "$build" --prefix "$prefix/p" >/dev/null
p=$prefix/p

# What an embedder and the installed binary need.
for f in bin/prefixsim include/prefixsim/engine.h include/prefixsim/report.h \
  include/prefixsim/model.h include/prefixsim/trace.h share/prefixsim/scripts/slurm/sweep.sbatch; do
  [[ -e "$p/$f" ]] || fail "$f not installed"
done
diff -r "$src/configs" "$p/share/prefixsim/configs" >/dev/null || fail "share/prefixsim/configs differs from configs/"
config=$(find "$p" -name prefixsimConfig.cmake | head -n 1)
[[ -n "$config" ]] || fail "prefixsimConfig.cmake not installed"
[[ -e "$(dirname "$config")/prefixsimConfigVersion.cmake" ]] || fail "prefixsimConfigVersion.cmake not installed"
if grep -rq "\"sim/" "$p/include/prefixsim"; then
  fail "a public header includes an internal sim/ header"
fi

# The installed binary finds presets in its own share/prefixsim: a preset that exists only there.
cp "$src/configs/models/llama-3.1-8b.json" "$p/share/prefixsim/configs/models/installed-only.json"
"$p/bin/prefixsim" replay --trace "$src/traces/sample_chat.jsonl" --model installed-only \
  --engine llama-3.1-8b --json - --no-wall-time --no-progress >/dev/null 2>"$prefix/err" ||
  fail "installed binary did not find its installed preset: $(cat "$prefix/err")"
rm "$p/share/prefixsim/configs/models/installed-only.json"

# examples/embed against the installed package only.
cmake -S "$src/examples/embed" -B "$prefix/embed" -DCMAKE_PREFIX_PATH="$p" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$prefix/embed" -j2 >/dev/null

check() {
  local model=$1 engine=$2 trace=$3 policy=$4
  PREFIXSIM_CONFIG_DIR="$p/share/prefixsim" "$prefix/embed/embed" "$model" "$engine" "$src/$trace" \
    "$policy" >"$prefix/embed.json"
  "$p/bin/prefixsim" replay --trace "$src/$trace" --model "$model" --engine "$engine" \
    --policy "$policy" --json - --no-wall-time --no-progress >"$prefix/cli.json" 2>/dev/null
  cmp -s "$prefix/embed.json" "$prefix/cli.json" ||
    fail "embed and prefixsim replay differ for $model $engine $trace $policy: $(diff "$prefix/embed.json" "$prefix/cli.json" | head -20)"
  echo "test_install: embed = prefixsim replay ($model, $engine, $trace, $policy)"
}
check kimi-k3-like kimi-k3-dspark traces/sample_chat.jsonl old
check kimi-k3-like kimi-k3-dspark traces/sample_chat.jsonl new
check llama-3.1-8b llama-3.1-8b traces/sample_shared_doc.jsonl new

# The Python module, where build/ has it (-DPREFIXSIM_PYTHON=ON, scripts/test.sh): installed under
# the prefix, importable from anywhere with that folder on PYTHONPATH, finding the presets it
# carries, and giving prefixsim replay's JSON.
if compgen -G "$build/python/prefixsim/_core*.so" >/dev/null; then
  site=$(find "$p" -path '*-packages/prefixsim/__init__.py' | head -n 1)
  [[ -n "$site" ]] || fail "the Python package prefixsim was not installed"
  site=$(dirname "$(dirname "$site")")
  python=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
  # A preset only the package's own share/ (and, for the CLI, share/prefixsim) has.
  for dir in "$site/prefixsim/share" "$p/share/prefixsim"; do
    cp "$src/configs/models/llama-3.1-8b.json" "$dir/configs/models/installed-only.json"
  done
  (cd "$prefix" && env -u PREFIXSIM_CONFIG_DIR PYTHONPATH="$site" "$python" -c '
import sys, prefixsim
r = prefixsim.replay(sys.argv[1], "installed-only", "llama-3.1-8b", "new")
sys.stdout.write(r.to_json(include_wall_time=False))' "$src/traces/sample_chat.jsonl" >"$prefix/py.json") ||
    fail "the installed Python module failed"
  "$p/bin/prefixsim" replay --trace "$src/traces/sample_chat.jsonl" --model installed-only \
    --engine llama-3.1-8b --policy new --json - --no-wall-time --no-progress >"$prefix/cli.json" 2>/dev/null
  cmp -s "$prefix/py.json" "$prefix/cli.json" || fail "the installed Python module and prefixsim replay differ"
  echo "test_install: python module = prefixsim replay (installed in $site)"
fi
echo "test_install: ok"
