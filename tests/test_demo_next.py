"""The demo's `next:` commands run as they are pasted: the program named as the README's first command started it."""

from __future__ import annotations

import sys

from service.cli.demo import program


def _installed(root):
    script = root / ".venv" / "bin" / "spendlake"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    return script


def test_a_venv_script_off_the_path_is_named_by_its_path(tmp_path, monkeypatch):
    script = _installed(tmp_path / "my work")
    monkeypatch.chdir(tmp_path / "my work")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(sys, "argv", [".venv/bin/spendlake", "demo"])
    assert program() == ".venv/bin/spendlake"  # `spendlake` alone: command not found outside the venv
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script), "demo"])
    assert program() == "'my work/.venv/bin/spendlake'"  # pasted into a shell as one word


def test_spendlake_on_the_path_and_other_callers_say_spendlake(tmp_path, monkeypatch):
    script = _installed(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")  # an activated venv
    monkeypatch.setattr(sys, "argv", [".venv/bin/spendlake", "demo"])
    assert program() == "spendlake"
    monkeypatch.setattr(sys, "argv", ["/usr/lib/python3/pytest", "demo"])  # a test runner, python -m service
    assert program() == "spendlake"
