"""examples/python/old_vs_new.py runs and writes its PNG (needs matplotlib)."""

import runpy
import sys

import pytest


def test_example_writes_a_png(repo, tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "old_vs_new.png"
    monkeypatch.setattr(sys, "argv", ["old_vs_new.py", "--out", str(out)])
    with pytest.raises(SystemExit) as exit_code:
        runpy.run_path(str(repo / "examples/python/old_vs_new.py"), run_name="__main__")
    assert exit_code.value.code == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "hit rate (%)" in printed and f"wrote {out}" in printed
