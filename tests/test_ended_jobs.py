"""A job a window source (slurm-jobs from slurmrestd, k8s-pods) saw running, that a newer
snapshot of the source does not hold, ended when it was last seen
(service/core/job_windows.py, allocation.SETTLED_JOBS); the hours since are idle.

By hand (p5.48xlarge: 8 GPUs, $80 an hour, $10 a GPU-hour): i-a billed 2026-11-02 10:00-14:00
and one hour on 2026-11-20, $400 in all. Job A (8 GPUs from 10:00) is running in the snapshot
taken 2026-11-02 10:30; job B (4 GPUs, 12:00-14:00) is in the source's next snapshot only.
- A ended at 10:30: A 8·0.5 h = $40, B 4·2 h = $80, idle $400 - $120 = $280.
- A running on: 10:00-12:00 its alone ($160); 12:00-14:00 over-booked 12 GPUs of 8, A 8/12 of
  $160 ($106.67), B 4/12 ($53.33); 11-20 its alone ($80): A $346.67, B $53.33, idle $0.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from decimal import Decimal

import pytest

from service.attribution import RunsQuery, materialise, runs
from service.core.job_windows import window_fields
from service.core.snapshot_ledger import record_file
from tests.attribution_helpers import add_jobs
from tests.test_clusters_allocation import assert_ties_out, by, gpu_line, job, setup

D = Decimal
SEEN = datetime(2026, 11, 2, 10, 30, tzinfo=timezone.utc)  # A's snapshot was taken
LINES = [*(gpu_line("i-a", start=f"2026-11-02T{hour}:00:00") for hour in (10, 11, 12, 13)),
         gpu_line("i-a", start="2026-11-20T10:00:00")]
A = job("A", 8, "2026-11-02T10:00:00", None, instance_ids=["i-a"], state="RUNNING", run_id="a")
B = job("B", 4, "2026-11-02T12:00:00", "2026-11-02T14:00:00", instance_ids=["i-a"], run_id="b")
ENDED = {"a": D(40), "b": D(80), "idle": D(280)}
RUNNING = {"a": D("346.666666666666"), "b": D("53.333333333334")}  # each hour's split, to 12 places


def lake_seen_running(tmp_path, taken: datetime = SEEN):
    lake, cfg = setup(tmp_path, LINES, [])
    add_jobs(lake, [A], snapshot="2026-11-02", facts=window_fields(taken, 48))
    return lake, cfg


def next_snapshot(lake, jobs, now: datetime = datetime(2026, 11, 5, 8, tzinfo=timezone.utc), hours: int = 48,
                  question: dict | None = None):
    add_jobs(lake, jobs, snapshot=now.strftime("%Y-%m-%d"), facts=window_fields(now, hours, question))


def test_a_job_absent_from_a_later_window_ended_when_last_seen(tmp_path):
    lake, cfg = lake_seen_running(tmp_path)
    next_snapshot(lake, [B])  # reads from 2026-11-03 08:00, after A was seen
    assert by(lake, cfg, ["run"]) == ENDED
    assert sum(ENDED.values()) == D(400)
    assert_ties_out(lake, cfg)


def test_before_the_change_it_held_the_gpus_for_ever(tmp_path):
    lake, cfg = setup(tmp_path, LINES, [])
    add_jobs(lake, [A], snapshot="2026-11-02")  # records without times (older snapshots, files)
    add_jobs(lake, [B], snapshot="2026-11-05")
    assert by(lake, cfg, ["run"]) == RUNNING


def test_a_later_window_reaching_back_before_it_was_seen_and_not_holding_it_ends_it_too(tmp_path):
    """A window reading from before A was seen ought to hold A; when it does not (its source lost
    A: a Prometheus that lost its data, slurmdbd purged), A ran on for ever and took B's and
    idle's hours ($346.67 of $400); it ended when last seen, and runs on if seen again."""
    lake, cfg = lake_seen_running(tmp_path)
    next_snapshot(lake, [B], hours=24 * 3)  # from 2026-11-02 08:00: it would have held A
    assert by(lake, cfg, ["run"]) == ENDED
    assert_ties_out(lake, cfg)
    next_snapshot(lake, [A, B], datetime(2026, 11, 8, 8, tzinfo=timezone.utc), hours=24 * 7)  # A again
    assert by(lake, cfg, ["run"]) == RUNNING


def test_a_snapshot_taken_again_the_same_day_keeps_the_later_time(tmp_path):
    lake, cfg = lake_seen_running(tmp_path, datetime(2026, 11, 2, 10, 15, tzinfo=timezone.utc))
    next_snapshot(lake, [B])
    assert by(lake, cfg, ["run"])["a"] == D(20)  # 8 GPUs for 15 minutes
    assert materialise(lake, cfg).built == 1
    add_jobs(lake, [A], snapshot="2026-11-02", facts=window_fields(SEEN, 48))  # the same records, later
    record = json.loads(record_file(lake.root, lake.partition_file(
        "jobs", [("source", "slurm"), ("snapshot_date", "2026-11-02")])).read_text())
    assert record["taken_at"] == "2026-11-02T10:30:00+00:00"
    assert record["window_start"] == "2026-10-31T10:30:00+00:00"
    assert by(lake, cfg, ["run"]) == ENDED
    assert materialise(lake, cfg).built == 1  # the stored rollups were of the earlier time


def test_a_window_starts_at_the_whole_second_the_sources_are_asked_from():
    # slurmrestd is asked from `uts<whole seconds>`, Prometheus from a `now` without microseconds
    fields = window_fields(datetime(2026, 11, 5, 8, 0, 0, 999_999, tzinfo=timezone.utc), 48)
    assert fields == {"taken_at": "2026-11-05T08:00:00.999999+00:00", "window_start": "2026-11-03T08:00:00+00:00"}


def test_an_empty_later_snapshot_ends_it_too(tmp_path):
    lake, cfg = lake_seen_running(tmp_path)
    next_snapshot(lake, [])
    assert by(lake, cfg, ["run"]) == {"a": D(40), "idle": D(360)}


def test_runs_shows_it_ended_when_last_seen(tmp_path):
    lake, cfg = lake_seen_running(tmp_path)
    query = RunsQuery.parse(since="2026-11-02", until="2026-11-03")
    [running] = [r for r in runs(lake, cfg, query).rows if r.run == "a"]
    assert running.end is None
    next_snapshot(lake, [B])
    [ended] = [r for r in runs(lake, cfg, query).rows if r.run == "a"]
    assert (ended.end, ended.gpu_hours, ended.cost, ended.state) == (SEEN, D(4), D(40), "RUNNING")  # state as stored


def test_a_new_window_snapshot_re_attributes_the_stored_rollups(tmp_path):
    lake, cfg = lake_seen_running(tmp_path)
    assert materialise(lake, cfg).built == 1
    assert by(lake, cfg, ["run"]) == {"a": D(400)}
    next_snapshot(lake, [B])
    assert by(lake, cfg, ["run"]) == ENDED
    assert materialise(lake, cfg).built == 1


def test_each_job_snapshot_record_is_read_once_and_the_warning_opens_no_query_connection(tmp_path, monkeypatch,
                                                                                         caplog):
    """A query connection read every job snapshot's record twice (to check the file, then
    for its times), and inventory's ended-jobs warning opened a query connection of its own
    (every cost partition and inventory table checked first) for the two job views."""
    from service.core import snapshot_ledger
    from service.core.lake import Lake
    from service.ingest import inventory

    lake, cfg = lake_seen_running(tmp_path)
    next_snapshot(lake, [B])
    read, reads = snapshot_ledger._read_record, []
    monkeypatch.setattr(snapshot_ledger, "_read_record", lambda path: reads.append(path.name) or read(path))
    lake.query().close()
    assert sorted(name for name in reads if name.startswith("snapshot_date=")) == [
        "snapshot_date=2026-11-02.json", "snapshot_date=2026-11-05.json"]
    del reads[:]
    monkeypatch.setattr(Lake, "query", lambda *args, **kwargs: pytest.fail("a query connection"))
    con = lake.writer()
    try:
        inventory._warn_ended(lake, con, "slurm", "2026-11-05", windowed=True)
    finally:
        con.close()
    assert sorted(reads) == ["snapshot_date=2026-11-02.json", "snapshot_date=2026-11-05.json"]
    assert "inventory source slurm: 1 job record(s) running when an earlier snapshot was taken" in caplog.text


def test_a_query_with_clusters_reads_each_job_snapshot_record_for_its_digest_and_times_at_once(tmp_path,
                                                                                                monkeypatch):
    """The rollups' version (jobs_basis) read every job snapshot's record for its digest (then
    again to see no commit passed by) and once more for its times: 4 reads a query with the
    check; then 3, the times from the record the digest was taken from; now 1: the reader holds
    the job snapshots with its costs (service/core/snapshot_pins.py), each by the record its
    check read, and the version, the views and `job_snapshots` are of those."""
    from service.core import snapshot_ledger

    lake, cfg = lake_seen_running(tmp_path)
    next_snapshot(lake, [B])
    read, reads = snapshot_ledger._read_record, []
    monkeypatch.setattr(snapshot_ledger, "_read_record", lambda path: reads.append(path.name) or read(path))
    assert by(lake, cfg, ["run"]) == ENDED
    assert Counter(reads) == {"snapshot_date=2026-11-02.json": 1, "snapshot_date=2026-11-05.json": 1}


# What each snapshot asked (service/core/job_windows.py: a hash of the settings that decide
# which jobs a read returns); A's namespace is no longer read in NARROWER.
WIDER, NARROWER = {"namespaces": ["a", "b"]}, {"namespaces": ["b"]}


def lake_asked_otherwise(tmp_path, hours: int = 48):
    """A seen running (asked WIDER), then a snapshot asking NARROWER over the last `hours`
    (48: from 2026-11-03 08:00, after A was seen; 72: reaching back before it)."""
    lake, cfg = setup(tmp_path, LINES, [])
    add_jobs(lake, [A], snapshot="2026-11-02", facts=window_fields(SEEN, 48, WIDER))
    next_snapshot(lake, [B], hours=hours, question=NARROWER)
    return lake, cfg


@pytest.mark.parametrize("hours", [48, 24 * 3])
def test_a_later_window_asking_otherwise_ends_it_when_last_seen(tmp_path, hours):
    """No read asks about A any more (its namespace dropped; or it ended while inventory did
    not run and the settings changed then): running on, it took B's GPUs over-booked and the
    hour of 2026-11-20 ($346.67 = RUNNING, B $53.33, idle $0) though last seen at 10:30."""
    lake, cfg = lake_asked_otherwise(tmp_path, hours)
    assert by(lake, cfg, ["run"]) == ENDED
    assert_ties_out(lake, cfg)
    next_snapshot(lake, [], datetime(2026, 11, 8, 8, tzinfo=timezone.utc), question=WIDER)  # asked again: gone
    assert by(lake, cfg, ["run"]) == ENDED


def test_a_later_window_asking_the_same_ends_it(tmp_path):
    lake, cfg = setup(tmp_path, LINES, [])
    add_jobs(lake, [A], snapshot="2026-11-02", facts=window_fields(SEEN, 48, WIDER))
    next_snapshot(lake, [B], question={"namespaces": ["a", "b"]})
    assert by(lake, cfg, ["run"]) == ENDED


def test_a_snapshot_recorded_before_fingerprints_is_ended_as_before(tmp_path):
    lake, cfg = lake_seen_running(tmp_path)  # its record holds no fingerprint
    next_snapshot(lake, [B], question=NARROWER)
    assert by(lake, cfg, ["run"]) == ENDED


def test_the_fingerprint_is_a_hash_of_the_question_in_any_key_order():
    asked = {"url": "https://slurm.example/?token=s3cret", "user_name": "svc"}
    fields = window_fields(SEEN, 48, asked)
    assert fields["fingerprint"] == window_fields(SEEN, 48, dict(reversed(asked.items())))["fingerprint"]
    assert len(fields["fingerprint"]) == 64 and "s3cret" not in json.dumps(fields)


def test_what_a_snapshot_asked_does_not_change_what_it_ends(tmp_path):
    lake, cfg = setup(tmp_path, LINES, [])
    add_jobs(lake, [A], snapshot="2026-11-02", facts=window_fields(SEEN, 48, WIDER))
    next_snapshot(lake, [B], hours=24 * 3, question=WIDER)  # reaching back, asking the same
    assert by(lake, cfg, ["run"]) == ENDED
    assert materialise(lake, cfg).built == 1
    next_snapshot(lake, [B], hours=24 * 3, question=NARROWER)  # the same records, the same times
    assert by(lake, cfg, ["run"]) == ENDED
    assert materialise(lake, cfg).built == 0  # the stored rollups stand


def test_a_snapshot_of_files_after_a_window_ends_its_running_jobs_the_files_do_not_hold(tmp_path):
    """slurm-jobs switched from slurmrestd (`url`) to sacct files (`path`): the files' snapshots
    hold no window times, so A, running in the last window, ran on for ever unless a file held
    it ($346.67 of $400). A snapshot without times is newer all the same: A ended when last
    seen; a file holding A gives its end."""
    lake, cfg = lake_seen_running(tmp_path)
    add_jobs(lake, [B], snapshot="2026-11-05")  # read from files: no times in its record
    assert by(lake, cfg, ["run"]) == ENDED
    assert_ties_out(lake, cfg)
    done = job("A", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="a")
    add_jobs(lake, [done, B], snapshot="2026-11-06")
    assert by(lake, cfg, ["run"]) == {"a": D(80), "b": D(80), "idle": D(240)}


def test_a_renamed_window_sources_snapshots_count_nowhere_and_forget_removes_them(tmp_path):
    """slurm renamed slurm-p5, whose window does not hold A: the old name's snapshots are orphans
    like its cost partitions, so A is placed nowhere (its half hour idle: README says so) rather
    than running on from the old name's last snapshot (A $346.67 where every source counts)."""
    from service.core.lake import Lake

    lake, cfg = lake_seen_running(tmp_path)
    add_jobs(lake, [B], source="slurm-p5", snapshot="2026-11-05",
             facts=window_fields(datetime(2026, 11, 5, 8, tzinfo=timezone.utc), 48))
    assert by(lake, cfg, ["run"]) == RUNNING  # no config: every source the lake holds counts
    renamed = Lake(lake.root, sources=["cur", "slurm-p5"])
    assert by(renamed, cfg, ["run"]) == {"b": D(80), "idle": D(320)}
    assert [r.run for r in runs(renamed, cfg, RunsQuery.parse(since="2026-11-02", until="2026-11-21")).rows] == ["b"]
    assert_ties_out(renamed, cfg)
    assert renamed.orphans() == {"slurm": ["jobs"]}
    assert renamed.forget("slurm") == ["jobs"]
    assert by(Lake(lake.root), cfg, ["run"]) == {"b": D(80), "idle": D(320)}


def test_a_newer_record_without_the_end_an_older_one_holds_does_not_run_the_job_on(tmp_path):
    """Two sources of one cluster: slurmrestd saw A end at 11:00; a sacct dump taken while A ran,
    read again each day as a source of its own, is always the newest snapshot holding A, and ran
    it on for ever ($346.67 of $400). An attempt that ended does not run again: the record that
    holds its end wins, a newer one without it is stale (its own window-ended end does not count)."""
    lake, cfg = setup(tmp_path, LINES, [])
    done = job("A", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="a")
    add_jobs(lake, [done, B], snapshot="2026-11-03", facts=window_fields(datetime(2026, 11, 3, 8, tzinfo=timezone.utc), 48))
    add_jobs(lake, [A], source="slurm-dump", snapshot="2026-11-05")
    assert by(lake, cfg, ["run"]) == {"a": D(80), "b": D(80), "idle": D(240)}
    assert_ties_out(lake, cfg)
    query = RunsQuery.parse(since="2026-11-02", until="2026-11-21")
    [a] = [r for r in runs(lake, cfg, query).rows if r.run == "a"]
    assert (a.end, a.cost, a.state) == (datetime(2026, 11, 2, 11, tzinfo=timezone.utc), D(80), "COMPLETED")


def test_within_a_source_its_newest_record_wins_over_an_older_end(tmp_path):
    """Only another source's end outranks a newer record: a day's snapshot taken again keeps a
    job it no longer reads with the end it was last seen at (inventory's kept_earlier); seen
    running again in a later snapshot of its source, it runs on, as it did."""
    lake, cfg = setup(tmp_path, LINES, [])
    kept = job("A", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], state="RUNNING",
               run_id="a")
    add_jobs(lake, [kept], snapshot="2026-11-02", facts=window_fields(SEEN, 1))
    next_snapshot(lake, [A, B])
    assert by(lake, cfg, ["run"]) == RUNNING
