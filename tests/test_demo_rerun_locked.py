"""`spendlake demo` re-run with another window removes the lake it made before: it removed it
without the lake's locks, so a `spendlake serve` or an ingest on the demo lake lost its files
mid-read or mid-write. It takes every lock of the lake for the removal, and refuses while another
process holds one (exit 3, naming it), the lake untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from service.cli.demo_org import CONFIG_HEADER
from service.cli.main import cli

HOLD = ("import sys, time\nfrom service.core.lake import Lake\n"
        "held = Lake(sys.argv[1]).lock(sys.argv[2])\nheld.__enter__()\nprint('held', flush=True)\ntime.sleep(120)\n")


def another_windows_demo(root):
    (root / "demo").mkdir(parents=True)
    (root / "demo" / "spendlake.yaml").write_text(CONFIG_HEADER + "\nlake: x\n")
    (root / "demo" / "window.json").write_text(json.dumps({"seed": 7, "start": "2026-10-01", "days": 9}))
    kept = root / "lake" / "costs" / "source=demo" / "billing_period=2026-10" / "data.parquet"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"PAR1")
    return kept


@pytest.mark.parametrize("name, command", [("service", "serve"), ("ingest", "ingest"), ("findings", "rules run")])
def test_a_demo_of_another_window_is_refused_while_another_process_holds_the_lake(tmp_path, name, command):
    kept = another_windows_demo(tmp_path)
    (tmp_path / "lake" / "_locks").mkdir()
    (tmp_path / "lake" / "_locks" / f"{name}.lock").touch()  # a lock the lake has made before
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "lake"), name], stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path), "--days", "3", "--start", "2026-10-01"])
    finally:
        holder.kill()
        holder.wait()
    assert result.exit_code == 3, result.output
    assert f"holds the lake (pid {holder.pid}" in result.output and f"{name}.lock" in result.output, result.output
    assert kept.read_bytes() == b"PAR1"  # the holder's files are where it left them
    assert (tmp_path / "demo" / "window.json").read_text() == json.dumps({"seed": 7, "start": "2026-10-01", "days": 9})


def test_a_demo_of_another_window_removes_the_lake_but_its_locks_once_none_holds_them(tmp_path):
    from service.cli import demo_org

    kept = another_windows_demo(tmp_path)
    said = demo_org._start_afresh_for_another_window(tmp_path, {"seed": 7, "start": "2026-10-01", "days": 3})
    assert "started afresh" in said and not kept.exists()
    assert sorted(p.name for p in (tmp_path / "lake").iterdir()) == ["_locks"]
