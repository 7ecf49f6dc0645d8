"""`spendlake demo` re-run over its own directory with another window answers as a fresh demo of that window."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from click.testing import CliRunner

from service.attribution import attribute
from service.cli.main import cli
from service.core.config import load_config
from service.core.lake import Lake
from service.core.timewindow import Window

pytestmark = pytest.mark.slow  # each runs the demo three times

START = "2026-10-30"


def demo(root, days):
    result = CliRunner().invoke(cli, ["demo", "--dir", str(root), "--days", str(days), "--start", START])
    assert result.exit_code == 0, result.output
    return result


def spend_by_job_type(root):
    config = load_config(root / "demo" / "spendlake.yaml")
    window = Window(datetime(2026, 10, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
    rows = attribute(Lake.of(config), config, window, by=("team", "job_type")).rows
    return sorted((r.values["team"] or "", r.values["job_type"] or "", r.currency, r.cost) for r in rows)


@pytest.mark.parametrize("noted", [True, False], ids=["noted", "a demo from before the window note"])
def test_a_demo_rerun_with_a_longer_window_answers_as_a_fresh_demo_of_that_window(tmp_path, noted):
    demo(tmp_path / "again", 3)
    if not noted:  # told by its Slurm files' days
        (tmp_path / "again" / "demo" / "window.json").unlink()
    again = demo(tmp_path / "again", 5)
    demo(tmp_path / "fresh", 5)
    assert spend_by_job_type(tmp_path / "again") == spend_by_job_type(tmp_path / "fresh")
    assert "over-booked" not in again.output
    sacct = sorted(p.name for p in (tmp_path / "again" / "demo" / "inventory").rglob("sacct-*.json"))
    assert sacct == sorted(p.name for p in (tmp_path / "fresh" / "demo" / "inventory").rglob("sacct-*.json"))
    assert "afresh" in again.output


def test_a_demo_rerun_of_the_same_window_keeps_its_lake(tmp_path):
    demo(tmp_path, 3)
    marker = next((tmp_path / "lake").rglob("*.parquet"))
    again = demo(tmp_path, 3)
    assert marker.exists() and "afresh" not in again.output
