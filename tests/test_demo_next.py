"""The demo's `next:` commands run as they are pasted: the program named as the README's first command started it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import service
from service.cli.demo import program
from tests.conftest import REPO


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


@pytest.mark.parametrize("interpreter, named", [("python", "python -m service"),
                                                (".venv/bin/python", ".venv/bin/python -m service"),
                                                ("/opt/my work/bin/python3", "'/opt/my work/bin/python3' -m service")])
def test_python_dash_m_service_is_named_as_the_interpreter_was_typed(tmp_path, monkeypatch, interpreter, named):
    """break47 #13: `python -m service demo` printed `spendlake --config …`, not on the PATH when run so."""
    script = _installed(tmp_path)
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")  # even with a `spendlake` found
    main = Path(service.__file__).parent / "__main__.py"  # what Python sets argv[0] to for `-m service`
    monkeypatch.setattr(sys, "argv", [str(main), "demo"])
    monkeypatch.setattr(sys, "orig_argv", [interpreter, "-m", "service", "demo"])
    assert program() == named


@pytest.mark.slow  # a one-day demo in a process of its own
def test_the_demo_run_as_a_module_prints_next_commands_that_run(tmp_path):
    """Python's own argv for `-m service` (no monkeypatch): each `next:` command names the interpreter
    and runs as pasted into a shell, where `spendlake` is not found."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    demo = subprocess.run([sys.executable, "-m", "service", "demo", "--dir", "d", "--days", "1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stderr
    commands = demo.stdout.split("next:\n", 1)[1].splitlines()
    assert commands and all(line.startswith(f"  {sys.executable} -m service --config d/demo/spendlake.yaml ")
                            for line in commands), commands
    [plans] = [line for line in commands if line.endswith(" plans")]
    pasted = subprocess.run(plans, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert pasted.returncode == 0 and "llama-405b-r1" in pasted.stdout, pasted.stdout + pasted.stderr
