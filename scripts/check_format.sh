#!/usr/bin/env bash
# Checks every tracked C++ and CUDA file against the project's .clang-format (clang-format 14,
# the version scripts/setup.sh installs). Exits 1 and names the files that differ; `--fix` rewrites them.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format="${CLANG_FORMAT:-clang-format-14}"
if ! command -v "$clang_format" >/dev/null; then
  echo "check_format: $clang_format not found (run scripts/setup.sh)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cpp' '*.hpp' '*.cu' '*.cuh' | grep -v '^tests/fuzz/corpus/')
if [ "${1:-}" = "--fix" ]; then
  "$clang_format" -i "${files[@]}"
  exit 0
fi
unformatted=()
for f in "${files[@]}"; do
  "$clang_format" --dry-run --Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
done
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "check_format: ${#unformatted[@]} file(s) differ from .clang-format (fix: bash scripts/check_format.sh --fix):" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
