"""`spendlake ingest`, `inventory` and `rollup` stopped by SIGTERM (a supervisor stopping it) or
SIGINT: one line saying what stopped and what it left, exit 128 + the signal's number, nothing
staged left behind, and the next run complete and exact (RELIABILITY 10, 12)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from service.core.lake import Lake
from tests.test_inventory_integrity import HEADER, job_count
from tests.test_one_pass_faults import REPO, cli, exactly_the_files, months_folder, staged_folders


@pytest.mark.slow  # two subprocess ingests per signal
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_10_12_an_ingest_stopped_by_a_signal_says_so_exits_128_plus_it_and_leaves_nothing_staged(tmp_path, signum):
    export, config = months_folder(tmp_path, files=3, rows=30_000)
    lake = Lake(tmp_path / "lake")
    err = stopped_once_staged(cli(config), lake, "costs-*/*/*.parquet", signum)
    assert (f"error: spendlake ingest interrupted by {signal.Signals(signum).name}: the periods committed above are "
            "in the lake, nothing half-written is visible") in err, err
    assert lake.ledger() == [] and not list((tmp_path / "lake").glob("costs/**/*.parquet"))
    completed(cli(config))
    assert staged_folders(lake) == []
    exactly_the_files(lake, export)


def spendlake(config: Path, command: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "service", "--config", str(config), command],
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def stopped_once_staged(process: subprocess.Popen, lake: Lake, staged: str, signum: int) -> str:
    """Send `signum` once a file matching `staged` is in the staging area; the run's stderr."""
    deadline = time.monotonic() + 120
    while not list(lake.staging.glob(staged)) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.002)
    assert process.poll() is None, "the run finished before it could be stopped; give it more rows"
    process.send_signal(signum)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signum, (out, err)  # main: -15 (killed, no message), or 1 ("Aborted!")
    assert "Traceback" not in err, err
    assert sorted(p.name for p in lake.staging.iterdir()) == []  # no staged file, scratch or DuckDB spill
    return err


def completed(process: subprocess.Popen) -> str:
    """The run's stdout, once it ended with exit 0."""
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-2000:]
    return out


@pytest.mark.slow  # a subprocess inventory of 200,000 job records, then another
def test_10_12_an_inventory_stopped_by_sigterm_says_so_exits_143_and_leaves_nothing_staged(tmp_path):
    rows = 200_000
    with open(tmp_path / "jobs.csv", "w") as jobs:
        jobs.write(HEADER)
        jobs.writelines(f"{100 + i},2026-11-{1 + i % 28:02d}T10:00:00Z,2026-11-{1 + i % 28:02d}T12:00:00Z,{i % 8},"
                        f"p5,COMPLETED,user{i % 50},team{i % 7}\n" for i in range(rows))
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "attribution": {"clusters": {}},
                                      "inventory": [{"name": "trace", "kind": "jobs-file",
                                                     "path": str(tmp_path / "jobs.csv")}]}))
    lake = Lake(tmp_path / "lake")
    err = stopped_once_staged(spendlake(config, "inventory"), lake, "jobs-*.parquet", signal.SIGTERM)
    assert ("error: spendlake inventory interrupted by SIGTERM: the snapshots committed are in the lake, nothing "
            "half-written is visible") in err, err
    completed(spendlake(config, "inventory"))
    assert job_count(lake) == rows


@pytest.mark.slow  # a subprocess ingest of twelve periods, a rollup stopped, and another
def test_10_12_a_rollup_stopped_by_sigint_says_so_exits_130_and_leaves_nothing_staged(tmp_path):
    periods = 12
    export, config = months_folder(tmp_path, files=periods, rows=20_000)
    completed(cli(config))
    document = yaml.safe_load(config.read_text())  # another attribution: every period's rollup is built again
    config.write_text(yaml.safe_dump({**document, "attribution": {"dimensions": {"cost_center": {"tags": ["cc"]}}}}))
    lake = Lake(tmp_path / "lake")
    err = stopped_once_staged(spendlake(config, "rollup"), lake, "attribution_rollup-*.parquet", signal.SIGINT)
    assert ("error: spendlake rollup interrupted by SIGINT: the rollups stored before are in the lake, nothing "
            "half-written is visible") in err, err
    out = completed(spendlake(config, "rollup"))
    built, stored = (int(out.split(f" {word}")[0].rsplit(" ", 1)[-1]) for word in ("built", "already stored"))
    assert built + stored == periods and built > 0, out  # the periods stored before the signal are kept
    exactly_the_files(lake, export)
