#!/usr/bin/env bash
# ctest's `python_module` (label python): the Python module's pytest suite, against the built
# module and the built binary (tests/python/, docs/python.md). Exits 77, which ctest reports as
# SKIPPED, where the module was not built (-DPREFIXSIM_PYTHON=OFF) or the interpreter lacks
# pytest, NumPy or pandas; it never passes without running the tests.
# Usage: run_pytest.sh INTERPRETER MODULE_DIR PREFIXSIM_BINARY [pytest arguments]
set -euo pipefail
interpreter=$1 module_dir=$2 binary=$3
shift 3
if [[ -z "$module_dir" ]]; then
  echo "SKIPPED: the Python module is not built here (configure with -DPREFIXSIM_PYTHON=ON)"
  exit 77
fi
for package in pytest numpy pandas; do
  if ! "$interpreter" -c "import $package" 2>/dev/null; then
    echo "SKIPPED: $interpreter has no $package (scripts/setup.sh installs python3-$package)"
    exit 77
  fi
done
cd "$(dirname "$0")/../.."
# module_dir is the package folder (<build>/python/prefixsim); its parent goes on the path.
export PYTHONPATH="$(dirname "$module_dir")${PYTHONPATH:+:$PYTHONPATH}"
export PREFIXSIM_BINARY="$binary"
# No __pycache__ folders in the source tree.
export PYTHONDONTWRITEBYTECODE=1
exec "$interpreter" -m pytest -p no:cacheprovider -q tests/python "$@"
