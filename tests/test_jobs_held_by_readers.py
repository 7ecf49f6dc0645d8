"""A reader reads the job records of the lake state it read its costs in (RELIABILITY 43: reads
never see half a change), however a job source is read again meanwhile: the job snapshots are
taken with the cost partitions (service/core/snapshot_pins.py) and the files they were read
from stay until no reader may hold them.

p5's instance i-a bills $80 for 10:00-11:00 on 2026-11-02. Jobs version A: run r1 holds its 8
GPUs for half the hour ($40 to r1, $40 idle). Version B, the same day's snapshot read again:
run r2 holds them the whole hour ($80 to r2)."""

from __future__ import annotations

import threading
from datetime import timedelta

from service.attribution import materialise
from service.attribution import sessions as sessions_module
from service.attribution.jobs import jobs_basis
from service.attribution.rollup_versions import HELD_TABLES, inventory_latest
from service.core import snapshot_pins
from service.core.snapshot_pins import KEPT, sweep
from tests.attribution_helpers import add_jobs
from tests.test_clusters_allocation import by, gpu_line, job, setup

A = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1")]
B = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r2")]


def test_a_reader_pinned_before_a_jobs_re_ingest_answers_the_jobs_it_pinned(tmp_path, monkeypatch):
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], A)
    old = by(lake, cfg, ["run"])
    assert old == {"r1": 40, "idle": 40}
    answer_on, ingested = sessions_module.answer_on, []

    def jobs_read_again_first(*args, **kwargs):  # the reader has its snapshot; then the jobs change
        if not ingested:
            add_jobs(lake, B)
            ingested.append(True)
        return answer_on(*args, **kwargs)

    monkeypatch.setattr(sessions_module, "answer_on", jobs_read_again_first)
    assert by(lake, cfg, ["run"]) == old  # r1's half hour, not r2's hour: the jobs of its snapshot
    assert ingested and by(lake, cfg, ["run"]) == {"r2": 80}  # the next read: the new jobs


def test_a_snapshot_replaced_between_its_check_and_its_pin_is_held_by_the_record_checked(tmp_path, monkeypatch):
    """The jobs read again after the reader checked the snapshot's record and before it looked
    at the file: data.parquet is the new file, the record the old one's; the reader holds the
    old file by its kept name (its record's digest), not the new file beside the old record."""
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], A)
    checked, ingested = snapshot_pins.sound_checks, []

    def jobs_read_again_after_the_check(*args, **kwargs):
        checks = list(checked(*args, **kwargs))  # the records read and checked now
        if not ingested and any("/jobs/" in str(c.path) for c in checks):
            add_jobs(lake, B)
            ingested.append(True)
        return checks

    monkeypatch.setattr(snapshot_pins, "sound_checks", jobs_read_again_after_the_check)
    [pin] = lake.snapshot(HELD_TABLES).tables["jobs"]
    assert ingested and pin.path.endswith(f"{KEPT}{pin.record['sha256']}.parquet")
    assert by(lake, cfg, ["run"]) == {"r2": 80}  # the next reader: the new jobs, by their own record


def test_the_replaced_snapshots_file_stays_for_the_grace_and_then_goes(tmp_path):
    lake, _ = setup(tmp_path, [gpu_line("i-a")], A)
    folder = lake.table_dir("jobs") / "source=slurm"
    [first] = folder.glob(f"*/{KEPT}*")
    add_jobs(lake, B)
    kept = sorted(folder.glob(f"*/{KEPT}*"))
    assert first in kept and len(kept) == 2 and first.stat().st_nlink == 1  # replaced: its kept name alone
    assert sweep(folder) == 0  # within the grace
    assert sweep(folder, timedelta(0)) == 1
    [current] = folder.glob(f"*/{KEPT}*")
    assert current.samefile(folder / "snapshot_date=2026-11-03" / "data.parquet")
    add_jobs(lake, B)  # the same bytes again: one kept file, the new one
    assert [p.name for p in folder.glob(f"*/{KEPT}*")] == [current.name]


def test_the_snapshots_a_reader_holds_name_the_rollups_version_the_lake_names(tmp_path):
    """A held snapshot's digest is its kept name's; the version it gives is the one the build
    stores (so a reader holding its jobs still reads the stored rollups)."""
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], A)
    add_jobs(lake, B, snapshot="2026-11-04")
    held = lake.snapshot(HELD_TABLES).tables
    assert [pin.digest is not None for pin in held["jobs"]] == [True, True]
    assert jobs_basis(lake, held) == jobs_basis(lake)
    assert inventory_latest(lake, cfg.attribution, held) == inventory_latest(lake, cfg.attribution)


def test_43_attribute_by_run_in_loops_while_the_jobs_are_read_again_answers_one_version(tmp_path):
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], A)
    versions = {"A": by(lake, cfg, ["run"])}
    add_jobs(lake, B)
    versions["B"] = by(lake, cfg, ["run"])
    assert versions == {"A": {"r1": 40, "idle": 40}, "B": {"r2": 80}}
    stop, answers, errors = threading.Event(), [], []

    def reader() -> None:
        while not stop.is_set():
            try:
                answers.append(by(lake, cfg, ["run"]))
            except Exception as exc:  # noqa: BLE001 - every failure is a finding of this test
                errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for thread in readers:
        thread.start()
    try:
        for turn in range(12):
            add_jobs(lake, A if turn % 2 == 0 else B)
            if turn % 3 == 0:
                with lake.lock():
                    materialise(lake, cfg)  # stored rollups for some versions, in memory for the others
    finally:
        stop.set()
        for thread in readers:
            thread.join(timeout=120)
    assert not errors, errors[:3]
    assert len(answers) >= 4, len(answers)
    assert all(answer in versions.values() for answer in answers), [a for a in answers if a not in versions.values()]
