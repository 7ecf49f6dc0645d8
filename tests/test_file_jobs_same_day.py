"""A file job source (sacct files, jobs-file) read again the same day keeps the jobs only the
day's earlier snapshot held, as a window source does (job_windows.kept_earlier): an hourly
`sacct -S now-1h > jobs.txt`, or an export moved out once read, loses none of the day's jobs.
The later read wins for a job both hold; a running one it does not hold stays as it was (a
snapshot of files ends none of its own records)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from service.core.config import parse_config
from service.ingest.inventory import run_inventory
from tests.test_slurm_exports import HEADER, allocation
from tests.test_slurm_jobs import jobs

NOW = datetime(2026, 12, 2, 6)
RUNNING = "3|3|RUNNING|2026-12-01T10:00:00|2026-12-01T10:00:05|Unknown|p5-002|billing=96,gres/gpu=8|eval\n"


def read_at(tmp_path, text: str, now: datetime):
    (tmp_path / "sacct.txt").write_text(HEADER + "\n" + text)
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "path": str(tmp_path / "sacct.txt")}]})
    [outcome] = run_inventory(config, now=now)
    assert outcome.error is None
    return outcome


def test_an_hourly_sacct_file_read_twice_the_same_day_keeps_the_earlier_files_jobs(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    read_at(tmp_path, allocation(1) + RUNNING, NOW)
    ended = allocation(2).replace("COMPLETED", "FAILED")
    outcome = read_at(tmp_path, ended + allocation(1, "train-again"), NOW + timedelta(hours=1))
    assert outcome.rows == {"jobs snapshot_date=2026-12-02": 3}
    assert jobs(tmp_path, "job_id, state, end_time, name") == [
        ("1", "COMPLETED", datetime(2026, 12, 1, 11, 0, 5), "train-again"),  # the later read's record
        ("2", "FAILED", datetime(2026, 12, 1, 11, 0, 5), "train"),
        ("3", "RUNNING", None, "eval")]  # files end none of their own records
    assert "inventory source slurm: kept 1 job record(s) only the day's earlier snapshot held" in caplog.text
    assert "taken to have ended" not in caplog.text


def test_the_same_file_read_again_the_same_day_gives_the_same_snapshot_bytes(tmp_path):
    """Nothing kept, nothing merged: the relation read is written as it is (a union of it made
    its columns nullable, so the same records gave other bytes and a new rollup version)."""
    read_at(tmp_path, allocation(1) + RUNNING, NOW)
    [snapshot] = (tmp_path / "lake/jobs/source=slurm").glob("snapshot_date=*/data.parquet")
    first = snapshot.read_bytes()
    read_at(tmp_path, allocation(1) + RUNNING, NOW + timedelta(hours=1))
    assert snapshot.read_bytes() == first


def test_a_jobs_file_read_twice_the_same_day_keeps_the_earlier_files_jobs(tmp_path):
    from tests.test_jobs_file import jobs as file_jobs
    from tests.test_jobs_file import run as run_file

    path = tmp_path / "jobs.csv"
    path.write_text("job_id,start_time,end_time,gpus,nodes\n101,2026-11-30T01:00:00Z,2026-11-30T02:00:00Z,8,p5-001\n")
    assert run_file(tmp_path, path, cluster="p5").error is None
    path.write_text("job_id,start_time,end_time,gpus,nodes\n102,2026-11-30T04:00:00Z,2026-11-30T05:00:00Z,8,p5-001\n")
    assert run_file(tmp_path, path, cluster="p5").error is None
    assert file_jobs(tmp_path, "record_id") == [("p5/101@2026-11-30T01:00:00",), ("p5/102@2026-11-30T04:00:00",)]
