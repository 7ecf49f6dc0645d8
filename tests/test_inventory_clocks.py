"""A jobs snapshot dated after this run's day and stamped after this machine's clock: set
aside as written by a clock that ran ahead (test_jobs_file's breaker35 case), also when that
clock stamped the lake's deliveries too; left where it is, the source failing naming both
times, when the bill's usage reaches past this clock (this clock is the one behind); and one
stamped within CLOCK_SKEW is no clock ahead."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone

from conftest import SAMPLES
from service.core import commit, snapshot_ledger
from service.core.config import parse_config
from service.core.lake import Lake
from service.core.snapshot_ledger import SET_ASIDE
from service.ingest import inventory
from service.ingest.billing import ingest
from service.ingest.inventory import run_inventory
from tests.test_jobs_file import jobs
from tests.test_slurm_jobs_http import ANSWER, NOW, slurmrestd  # noqa: F401 (the fixture)

HEADER = "job_id,start_time,end_time,gpus\n"
RUNNING, ENDED = HEADER + "7,2024-09-20T10:00:00Z,,8\n", HEADER + "7,2024-09-20T10:00:00Z,2024-09-20T11:00:00Z,8\n"


def setup(tmp_path, billing: bool):
    """A jobs-file source and, with `billing`, the FOCUS sample (usage through 2024-10-01)."""
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLES / "focus" / "focus_1.0_sample_1000.csv", tmp_path / "export")
    return tmp_path / "jobs.csv", parse_config({
        "lake": str(tmp_path / "lake"), "inventory": [{"name": "trace", "kind": "jobs-file", "path": str(tmp_path / "jobs.csv")}],
        "sources": [{"name": "bill", "kind": "focus", "location": str(tmp_path / "export")}] if billing else []})


def stamped(monkeypatch, when: datetime):
    """The clock that stamps snapshot records and deliveries reads `when`."""
    monkeypatch.setattr(snapshot_ledger, "utc_now_iso", lambda: when.strftime("%Y-%m-%dT%H:%M:%SZ"))
    monkeypatch.setattr(commit, "utc_now_iso", lambda: when.strftime("%Y-%m-%dT%H:%M:%SZ"))


def written_by_a_right_clock(tmp_path, monkeypatch, right: datetime):
    """The lake as a right clock reading `right` wrote it: the bill (usage through 2024-10-01)
    and a snapshot seeing job 7 running."""
    path, config = setup(tmp_path, billing=True)
    path.write_text(RUNNING)
    with monkeypatch.context() as clock:
        stamped(clock, right)
        clock.setattr(inventory, "_wall", lambda: right)
        assert not ingest(config).failed
        assert run_inventory(config, now=right)[0].error is None
    return path, config


def test_a_later_snapshot_is_not_moved_when_the_bill_says_this_clock_is_behind(tmp_path, monkeypatch):
    """A right clock wrote the lake on 2024-10-02 (the bill, usage through 10-01; a snapshot
    seeing job 7 running); this machine's clock, reading 2024-09-21, took the snapshot for one a
    clock ahead wrote and moved it under _damaged/, job 7's later record hidden from every read."""
    path, config = written_by_a_right_clock(tmp_path, monkeypatch, datetime(2024, 10, 2, 6, tzinfo=timezone.utc))
    behind = datetime(2024, 9, 21, 6, tzinfo=timezone.utc)
    monkeypatch.setattr(inventory, "_wall", lambda: behind)
    path.write_text(ENDED)
    [outcome] = run_inventory(config, now=behind)
    assert outcome.error is not None and outcome.error.exit_code == 3
    said = f"{outcome.error.where}: {outcome.error.message} — {outcome.error.hint}"
    assert "this machine's clock (2024-09-21T06:00:00Z)" in said and "usage reaches 2024-10-01T00:00:00Z" in said
    assert "this clock is behind" in said and "nothing was moved" in said and "date -u" in said
    assert f"move the folder {tmp_path / 'lake' / 'jobs' / 'source=trace'}/snapshot_date=2024-10-02 out" in said
    assert not (tmp_path / "lake" / SET_ASIDE).exists()
    assert jobs(tmp_path, "job_id, end_time") == [("7", None)]  # the right clock's record, kept


def test_a_snapshot_is_set_aside_when_the_clock_ahead_stamped_the_deliveries_too(tmp_path, monkeypatch):
    """A service 40 days ahead ingested and took inventory: its deliveries' stamps are ahead of
    the clock set right as much as the snapshot's, yet the bill's usage is not; the snapshot is
    the clock ahead's and goes aside, job 7's later record counts."""
    path, config = setup(tmp_path, billing=True)
    wall = datetime.now(timezone.utc)
    path.write_text(RUNNING)
    with monkeypatch.context() as clock:
        stamped(clock, wall + timedelta(days=40))
        assert not ingest(config).failed
        assert run_inventory(config, now=wall + timedelta(days=40))[0].error is None
    path.write_text(ENDED)
    [outcome] = run_inventory(config, now=wall)
    assert outcome.error is None, outcome.error
    assert list((tmp_path / "lake" / SET_ASIDE).rglob("*.parquet"))
    assert jobs(tmp_path, "job_id, CAST(end_time AS VARCHAR)") == [("7", "2024-09-20 11:00:00")]


def test_a_snapshot_stamped_within_the_clock_skew_is_no_clock_ahead(tmp_path, monkeypatch):
    """Another host's snapshot taken a minute past midnight by a clock a minute ahead of this
    one: dated tomorrow, stamped after now, it was set aside as a clock's run weeks ahead."""
    path, config = setup(tmp_path, billing=False)
    wall = datetime.now(timezone.utc)
    path.write_text(RUNNING)
    with monkeypatch.context() as other_host:
        stamped(other_host, wall + timedelta(minutes=1))
        assert run_inventory(config, now=wall + timedelta(days=1))[0].error is None
    [outcome] = run_inventory(config, now=wall)
    assert outcome.error is None, outcome.error
    assert not (tmp_path / "lake" / SET_ASIDE).exists()
    assert len({day for _, day in jobs(tmp_path, "job_id, snapshot_date")}) == 2


def test_a_clock_behind_by_under_a_day_sets_a_right_snapshot_aside_and_moving_it_back_restores_it(tmp_path, monkeypatch):
    """What README says of a clock behind by less than a day (not told: the lake's stamps after
    it are what a clock that ran ahead leaves, and the bill's daily lines reach a day past the
    real time): a right host's snapshot taken at 00:30 seeing job 7 running, read by a clock
    reading 23:00 the day before, is set aside with a warning; moved back once the clock is
    right, every read takes it again (unrecorded, as a snapshot from before records)."""
    right = datetime(2024, 10, 2, 0, 30, tzinfo=timezone.utc)
    path, config = written_by_a_right_clock(tmp_path, monkeypatch, right)
    behind = right - timedelta(hours=1, minutes=30)
    with monkeypatch.context() as clock:
        stamped(clock, behind)
        clock.setattr(inventory, "_wall", lambda: behind)
        assert run_inventory(config, now=behind)[0].error is None  # usage reaches 10-01 00:00: not a day past
    [aside] = (tmp_path / "lake" / SET_ASIDE).rglob("*.parquet")
    days = "job_id, CAST(snapshot_date AS VARCHAR)"
    assert jobs(tmp_path, days) == [("7", "2024-10-01")]
    shutil.move(aside, tmp_path / "lake" / "jobs" / "source=trace" / "snapshot_date=2024-10-02" / "data.parquet")
    assert sorted(jobs(tmp_path, days)) == [("7", "2024-10-01"), ("7", "2024-10-02")]  # read again, unrecorded
    assert all(check.ok for check in snapshot_ledger.snapshot_checks(Lake.of(config)))


def test_a_snapshot_set_aside_takes_its_kept_name_with_it(tmp_path, monkeypatch):
    """break51b: jobs/source=p4-jobs/snapshot_date=<tomorrow>/ kept a lone kept-<sha256>.parquet after its
    data.parquet was set aside: its other link, under _damaged/, kept sweep from ever taking it. Reads and verify
    read data.parquet and records only, so none counted it; it is removed with the set-aside now, the bytes kept
    once, under _damaged/, and the folder stays for a file moved back."""
    from service.core.snapshot_pins import KEPT

    path, config = setup(tmp_path, billing=False)
    wall = datetime.now(timezone.utc)
    path.write_text(RUNNING)
    ahead = wall + timedelta(days=2)
    with monkeypatch.context() as clock:
        stamped(clock, ahead)
        assert run_inventory(config, now=ahead)[0].error is None
    folder = tmp_path / "lake" / "jobs" / "source=trace" / f"snapshot_date={ahead:%Y-%m-%d}"
    assert [p.name for p in folder.iterdir() if p.name.startswith(KEPT)]  # the lake keeps a link of each snapshot
    path.write_text(ENDED)
    assert run_inventory(config, now=wall)[0].error is None
    [aside] = (tmp_path / "lake" / SET_ASIDE).rglob("*.parquet")
    assert folder.is_dir() and list(folder.iterdir()) == [] and aside.stat().st_nlink == 1


def test_a_clock_set_back_keeps_the_ended_jobs_only_the_window_snapshot_it_set_aside_held(tmp_path, slurmrestd,
                                                                                           monkeypatch, caplog):
    """break51b item 6: a clock set back a day takes the real day's jobs snapshot for one a clock ahead wrote and
    sets it aside; a window source (slurmrestd, lookback_hours 6) reading from the clock's day then holds none
    of the jobs that ended before its window, which were in no snapshot any more and, set aside, in no read.
    slurmrestd's 10 ended records read at 2026-12-02 06:00 by a right clock; then, by a clock reading a day
    earlier, an answer of none: the set-aside snapshot's ended records are kept in the new one, and the
    snapshot is still set aside."""
    url, server = slurmrestd
    server.plan += [(200, ANSWER), (200, b'{"jobs": []}')]
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "url": url, "api_version": "v0.0.38", "lookback_hours": 6}]})
    read = []
    for clock_reads in (NOW, NOW - timedelta(days=1)):
        with monkeypatch.context() as clock:
            stamped(clock, clock_reads)
            clock.setattr(inventory, "_wall", lambda: clock_reads)
            assert run_inventory(config, now=clock_reads)[0].error is None
        read = read or jobs(tmp_path, "record_id, state, end_time")
    assert len(read) == 10 and all(end is not None for *_, end in read)
    [aside] = (tmp_path / "lake" / SET_ASIDE).rglob("*.parquet")
    assert "jobs/source=slurm/snapshot_date=2026-12-02" in str(aside)
    assert jobs(tmp_path, "record_id, state, end_time") == read
    assert {day for (day,) in jobs(tmp_path, "DISTINCT CAST(snapshot_date AS VARCHAR)")} == {"2026-12-01"}
    assert "kept 10 ended job record(s) only the snapshots set aside held" in caplog.text
