#!/usr/bin/env python3
"""Mutation testing: plants the project's own single-line bugs one at a time and runs the suite.

Each mutant in tests/mutation/mutants.txt replaces one exact piece of text in one file. For each
mutant the script applies it, rebuilds the binaries the suite runs in a separate build folder,
runs the suite without the soak and Slurm labels (stopping at the first failure), restores the
file and records whether the suite noticed. It prints the kill rate and every survivor with its
description. See docs/testing.md "Mutation testing".

  python3 scripts/mutate.py                     # every mutant
  python3 scripts/mutate.py plan/ kv/lru-order  # mutants whose id starts with any argument
  python3 scripts/mutate.py --check             # only check that every mutant still applies

Exit status: 0 when every mutant was run (survivors are a result, not an error), 1 when the
unmutated suite fails, 2 when the list is malformed or a mutant's text is not found exactly once.
"""

import argparse
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIELDS = ("id", "file", "find", "replace", "why")


class ListError(Exception):
    pass


def parse_mutants(path):
    """Blocks of `key: value` lines separated by blank lines; `#` lines are comments; a line
    starting with `|` continues the previous value on a new line (multi-line find/replace)."""
    mutants, block, block_line, last_key = [], {}, 0, None
    lines = path.read_text().splitlines() + [""]
    for number, line in enumerate(lines, 1):
        if line.startswith("#"):
            continue
        if line.startswith("|"):
            if last_key is None:
                raise ListError(f"{path}:{number}: a '|' line continues no field")
            block[last_key] += "\n" + line[1:]
            continue
        if not line.strip():
            if block:
                missing = [f for f in FIELDS if f not in block]
                if missing:
                    raise ListError(f"{path}:{block_line}: mutant lacks {', '.join(missing)}")
                mutants.append(dict(block, line=block_line))
                block, last_key = {}, None
            continue
        key, sep, value = line.partition(": ")
        if not sep or key not in FIELDS:
            raise ListError(f"{path}:{number}: expected one of {', '.join(FIELDS)} then ': '")
        if key in block:
            raise ListError(f"{path}:{number}: field '{key}' given twice")
        if not block:
            block_line = number
        block[key] = value
        last_key = key
    ids = [m["id"] for m in mutants]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        raise ListError(f"{path}: duplicated ids: {', '.join(duplicated)}")
    return mutants


def check_applies(mutant, list_path):
    source = ROOT / mutant["file"]
    where = f"{list_path}:{mutant['line']} ({mutant['id']})"
    if not source.is_file():
        raise ListError(f"{where}: file {mutant['file']} does not exist")
    count = source.read_text().count(mutant["find"])
    if count != 1:
        raise ListError(f"{where}: the find text occurs {count} times in {mutant['file']} "
                        "(must be exactly once; update the mutant to the current code)")
    if mutant["find"] == mutant["replace"]:
        raise ListError(f"{where}: replace equals find")


def run(cmd, log, timeout=None):
    with open(log, "w") as out:
        try:
            return subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return "timeout"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("prefixes", nargs="*", help="run only mutants whose id starts with one")
    parser.add_argument("--list", default="tests/mutation/mutants.txt")
    parser.add_argument("--build-dir", default="build-mutate")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--check", action="store_true", help="only check the list applies")
    args = parser.parse_args()

    list_path = ROOT / args.list
    try:
        mutants = parse_mutants(list_path)
        if args.prefixes:
            mutants = [m for m in mutants if any(m["id"].startswith(p) for p in args.prefixes)]
        for m in mutants:
            check_applies(m, args.list)
    except (ListError, OSError) as e:
        print(f"mutate: {e}", file=sys.stderr)
        return 2
    if args.check:
        print(f"mutate: {len(mutants)} mutants apply")
        return 0

    build = ROOT / args.build_dir
    logs = build / "mutate-logs"
    logs.mkdir(parents=True, exist_ok=True)
    configure = ["cmake", "-S", ".", "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ccache"):
        configure.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
    # Every target the suite runs (a fresh folder has none of them).
    compile_cmd = ["cmake", "--build", str(build), "-j", str(args.jobs), "--target", "prefixsim",
                   "prefixsim_tests", "prefixsim_kernel_emulation"]
    test_cmd = ["ctest", "--test-dir", str(build), "-LE", "soak|slurm", "-j", str(args.jobs),
                "--stop-on-failure"]

    if run(configure, logs / "configure.log") != 0 or run(compile_cmd, logs / "base-build.log"):
        print(f"mutate: the unmutated tree does not build (see {logs})", file=sys.stderr)
        return 1
    start = time.monotonic()
    if run(test_cmd, logs / "base-test.log") != 0:
        print(f"mutate: the unmutated suite fails (see {logs / 'base-test.log'})", file=sys.stderr)
        return 1
    # A mutant that makes the suite run far longer (a loop that no longer ends) counts as killed.
    test_timeout = max(120.0, 3 * (time.monotonic() - start))

    results = []
    for i, m in enumerate(mutants, 1):
        source = ROOT / m["file"]
        original = source.read_text()
        restore = lambda *_: source.write_text(original)  # noqa: E731
        # Whatever stops the run (Ctrl-C, a CI timeout, a closed terminal) restores the file.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda signum, _frame: (restore(), sys.exit(128 + signum)))
        safe_id = m["id"].replace("/", "_")
        t0 = time.monotonic()
        try:
            source.write_text(original.replace(m["find"], m["replace"], 1))
            if run(compile_cmd, logs / f"{safe_id}.build.log") != 0:
                outcome = "no-compile"
            else:
                rc = run(test_cmd, logs / f"{safe_id}.test.log", timeout=test_timeout)
                outcome = "survived" if rc == 0 else "killed"
        finally:
            restore()
        results.append((m, outcome))
        print(f"[{i}/{len(mutants)}] {outcome:10} {m['id']} ({time.monotonic() - t0:.0f} s)",
              flush=True)
    run(compile_cmd, logs / "restore-build.log")  # leave the build folder matching the tree

    killed = sum(1 for _, o in results if o == "killed")
    survived = [m for m, o in results if o == "survived"]
    no_compile = [m for m, o in results if o == "no-compile"]
    scored = killed + len(survived)
    rate = 100.0 * killed / scored if scored else 0.0
    print(f"\nmutants: {len(results)}   killed: {killed}   survived: {len(survived)}   "
          f"did not compile: {len(no_compile)}   kill rate: {rate:.1f}%")
    for m in survived:
        print(f"  survived  {m['id']}  {m['file']}: {m['why']}")
    for m in no_compile:
        print(f"  no-compile  {m['id']}  (fix the mutant: it should be a plausible, compiling bug)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
