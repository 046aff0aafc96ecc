"""Shared fixtures of the Python module's tests: the repository, the built binary, and running it.

Run by ctest's python_module (tests/python/run_pytest.sh), which puts the built module on
PYTHONPATH and names the binary in PREFIXSIM_BINARY."""

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo():
    return REPO


@pytest.fixture(scope="session")
def binary():
    path = os.environ.get("PREFIXSIM_BINARY")
    if not path or not os.path.exists(path):
        pytest.fail("PREFIXSIM_BINARY must name the built prefixsim binary "
                    "(tests/python/run_pytest.sh sets it)")
    return path


@pytest.fixture(scope="session")
def cli(binary):
    """Runs `prefixsim ARGS...` from the repository root; returns its stdout (bytes)."""

    def run(*args):
        done = subprocess.run([binary, *map(str, args)], cwd=REPO, capture_output=True,
                              check=False)
        if done.returncode != 0:
            raise AssertionError(f"prefixsim {' '.join(map(str, args))} exited "
                                 f"{done.returncode}: {done.stderr.decode()}")
        return done.stdout

    return run
