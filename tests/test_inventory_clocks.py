"""A jobs snapshot dated after this run's day and stamped after this machine's clock: set
aside when only it says a clock ran ahead (test_jobs_file's breaker35 case); left where it is,
the source failing naming both clocks, when the ledger's newest delivery is stamped ahead too
(this clock may be the one behind); and one stamped within CLOCK_SKEW is no clock ahead."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone

from conftest import SAMPLES
from service.core import commit, snapshot_ledger
from service.core.config import parse_config
from service.core.snapshot_ledger import SET_ASIDE
from service.ingest.billing import ingest
from service.ingest.inventory import run_inventory
from tests.test_jobs_file import jobs

HEADER = "job_id,start_time,end_time,gpus\n"
RIGHT_CLOCK = "2099-01-01T00:00:00Z"  # what a right clock read, this machine's being behind it


def setup(tmp_path, billing: bool):
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLES / "focus" / "focus_1.0_sample_1000.csv", tmp_path / "export")
    return tmp_path / "jobs.csv", parse_config({
        "lake": str(tmp_path / "lake"), "inventory": [{"name": "trace", "kind": "jobs-file", "path": str(tmp_path / "jobs.csv")}],
        "sources": [{"name": "bill", "kind": "focus", "location": str(tmp_path / "export")}] if billing else []})


def test_a_later_snapshot_is_not_moved_when_the_ledger_says_this_clock_may_be_behind(tmp_path, monkeypatch):
    """The lake written by a right clock (a delivery, and a snapshot seeing job 7 running on
    2099-01-01); this machine's clock behind it read the snapshot as written by a clock ahead
    and moved it under _damaged/, job 7's later record hidden from every read."""
    path, config = setup(tmp_path, billing=True)
    today = datetime.now(timezone.utc)
    path.write_text(HEADER + "7,2026-11-30T10:00:00Z,,8\n")
    with monkeypatch.context() as right:
        right.setattr(snapshot_ledger, "utc_now_iso", lambda: RIGHT_CLOCK)
        right.setattr(commit, "utc_now_iso", lambda: RIGHT_CLOCK)
        assert not ingest(config).failed
        assert run_inventory(config, now=today + timedelta(days=40))[0].error is None
    path.write_text(HEADER + "7,2026-11-30T10:00:00Z,2026-11-30T11:00:00Z,8\n")
    [outcome] = run_inventory(config, now=today)
    assert outcome.error is not None and outcome.error.exit_code == 3
    said = f"{outcome.error.where}: {outcome.error.message} — {outcome.error.hint}"
    assert "this clock may be behind" in said and "ingested 2099-01-01T00:00:00Z" in said and "nothing was moved" in said
    assert "date -u" in said and f"move the folder {tmp_path / 'lake' / 'jobs' / 'source=trace'}/snapshot_date=" in said
    assert not (tmp_path / "lake" / SET_ASIDE).exists()
    assert jobs(tmp_path, "job_id, end_time") == [("7", None)]  # the right clock's record, kept


def test_a_snapshot_stamped_within_the_clock_skew_is_no_clock_ahead(tmp_path, monkeypatch):
    """Another host's snapshot taken a minute past midnight by a clock a minute ahead of this
    one: dated tomorrow, stamped after now, it was set aside as a clock's run weeks ahead."""
    path, config = setup(tmp_path, billing=False)
    wall = datetime.now(timezone.utc)
    path.write_text(HEADER + "7,2026-11-30T10:00:00Z,,8\n")
    with monkeypatch.context() as other_host:
        ahead = (wall + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        other_host.setattr(snapshot_ledger, "utc_now_iso", lambda: ahead)
        assert run_inventory(config, now=wall + timedelta(days=1))[0].error is None
    [outcome] = run_inventory(config, now=wall)
    assert outcome.error is None, outcome.error
    assert not (tmp_path / "lake" / SET_ASIDE).exists()
    assert len({day for _, day in jobs(tmp_path, "job_id, snapshot_date")}) == 2
