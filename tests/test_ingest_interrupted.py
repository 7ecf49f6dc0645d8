"""`spendlake ingest` stopped by SIGTERM (a supervisor stopping it) or SIGINT: one line saying
what stopped and what it left, exit 128 + the signal's number, nothing staged left behind, and
the next ingest complete and exact (RELIABILITY 10, 12)."""

from __future__ import annotations

import signal
import time

import pytest

from service.core.lake import Lake
from tests.test_one_pass_faults import cli, exactly_the_files, months_folder, staged_folders


@pytest.mark.slow  # two subprocess ingests per signal
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_10_12_an_ingest_stopped_by_a_signal_says_so_exits_128_plus_it_and_leaves_nothing_staged(tmp_path, signum,
                                                                                                  code):
    export, config = months_folder(tmp_path, files=3, rows=30_000)
    lake = Lake(tmp_path / "lake")
    process = cli(config)
    deadline = time.monotonic() + 120
    while not list(lake.staging.glob("costs-*/*/*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert process.poll() is None, "ingest finished before it could be stopped; give it more rows"
    process.send_signal(signum)
    out, err = process.communicate(timeout=120)
    assert process.returncode == code, (out, err)  # main: -15 (killed, no message), or 1 ("Aborted!")
    assert "Traceback" not in err, err
    assert (f"error: spendlake ingest interrupted by {signal.Signals(signum).name}: the periods committed above are "
            "in the lake, nothing half-written is visible") in err, err
    assert lake.ledger() == [] and not list((tmp_path / "lake").glob("costs/**/*.parquet"))
    assert sorted(p.name for p in lake.staging.iterdir()) == []  # no stage, no DuckDB spill
    again = cli(config)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-2000:]
    assert staged_folders(lake) == []
    exactly_the_files(lake, export)
