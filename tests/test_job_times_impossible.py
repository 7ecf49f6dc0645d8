"""Job times that cannot be (break48 #2): a job starting after the snapshot was taken is said per
file with the source's `timezone` key (a file written in Asia/Tokyo read as UTC starts every job
9 hours late), for jobs-file and slurm-jobs files alike; an ISO time before 2000 fails the source
as a numeric one from 1970 does (connectors/jobs_file_values.py `not_before_2000`)."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.inventory import run_inventory

NOW = datetime(2026, 12, 1, 6)  # 15:00 in Tokyo
# written in Tokyo: a job started at 10:00 there (01:00 UTC) and one at 14:00 (05:00 UTC), both before NOW
TOKYO_CSV = ("job_id,gpus,start_time,end_time,nodes\n"
             "t1,8,2026-12-01 10:00:00,2026-12-01 12:00:00,p5-011\n"
             "t2,8,2026-12-01 14:00:00,,p5-012\n"
             "t3,8,2026-11-30 09:00:00,2026-11-30 11:00:00,p5-013\n")
SACCT = ("JobID|JobIDRaw|State|Submit|Start|End|NodeList|AllocTRES\n"
         "7|7|RUNNING|2026-12-01T13:50:00|2026-12-01T14:00:00|Unknown|p5-001|gres/gpu=8\n"
         "8|8|COMPLETED|2026-11-30T09:00:00|2026-11-30T10:00:00|2026-11-30T12:00:00|p5-002|gres/gpu=8\n")


def run(tmp_path, kind: str, path, **source):
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "trace", "kind": kind, "path": str(path), **source}]})
    [outcome] = run_inventory(config, now=NOW)
    return outcome


def starts(tmp_path) -> list[tuple]:
    con = Lake(tmp_path / "lake").query()
    try:
        return con.execute("SELECT job_id, start_time FROM jobs ORDER BY job_id").fetchall()
    finally:
        con.close()


def said(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "after this snapshot" in r.getMessage()]


@pytest.mark.parametrize("kind, name, text, jobs", [
    ("jobs-file", "tokyo.csv", TOKYO_CSV, "2 job(s)"), ("slurm-jobs", "sacct.txt", SACCT, "1 job(s)")])
def test_jobs_starting_after_the_snapshot_name_the_file_and_its_timezone_key(tmp_path, caplog, kind, name, text,
                                                                            jobs):
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / name).write_text(text)
    with caplog.at_level("WARNING"):
        assert run(tmp_path, kind, folder).error is None
    first = "t1 at 2026-12-01T10:00:00" if kind == "jobs-file" else "7 at 2026-12-01T14:00:00"
    assert said(caplog) == [  # 10:00 and 14:00 read as UTC are after 06:00 UTC; 2026-11-30 is not
        f"{folder / name}: {jobs} start after this snapshot was taken (2026-12-01T06:00:00 UTC), which no job can; "
        f"the first, job {first} UTC: its times are read in UTC (inventory[0].timezone): written in another zone? "
        "(set inventory[0].timezone to theirs; else the clock that wrote them runs ahead)"]
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert run(tmp_path / "tokyo", kind, folder, timezone="Asia/Tokyo").error is None
    assert said(caplog) == []
    assert starts(tmp_path / "tokyo")[0][1] == (datetime(2026, 12, 1, 1) if kind == "jobs-file"
                                                else datetime(2026, 12, 1, 5))


def test_a_start_within_the_clock_skew_of_the_snapshot_is_not_said(tmp_path, caplog):
    (tmp_path / "jobs.csv").write_text("job_id,gpus,start_time,end_time\nj,8,2026-12-01T06:04:00Z,\n")
    with caplog.at_level("WARNING"):
        assert run(tmp_path, "jobs-file", tmp_path / "jobs.csv").error is None
    assert said(caplog) == []


@pytest.mark.parametrize("cell", ["1999-12-07 01:00:00", "1999-12-07T01:00:00Z", "0999-12-07T01:00:00"])
def test_an_iso_time_before_2000_fails_the_source_as_a_numeric_one_does(tmp_path, cell):
    (tmp_path / "jobs.csv").write_text(f"job_id,gpus,start_time,end_time\nok,8,2026-11-30T01:00:00Z,\n"
                                       f"old1,8,{cell},2026-11-30T03:00:00Z\n")
    outcome = run(tmp_path, "jobs-file", tmp_path / "jobs.csv")
    assert f"row 2 (line 3), column start_time: '{cell}' is " in str(outcome.error)
    assert "UTC, before 2000: no GPU job ran then" in str(outcome.error)
    numeric = tmp_path / "numeric"
    numeric.mkdir()
    (numeric / "jobs.csv").write_text("job_id,gpus,start_time,end_time\nold1,8,944528400,944535600\n")
    assert "before 2000" in str(run(numeric, "jobs-file", numeric / "jobs.csv", time_format="seconds").error)


def test_a_parquet_timestamp_before_2000_fails_too_and_an_origin_counts_from_its_own_start(tmp_path):
    pq.write_table(pa.table({"job_id": ["old1"], "gpus": [8], "start_time": [datetime(1999, 12, 7, 1)],
                             "end_time": [datetime(1999, 12, 7, 3)]}), tmp_path / "jobs.parquet")
    assert "column start_time" in str(run(tmp_path, "jobs-file", tmp_path / "jobs.parquet").error)
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "jobs.csv").write_text("job_id,gpus,start_time,end_time\nt,8,60,120\n")
    assert run(trace, "jobs-file", trace / "jobs.csv", time_format="seconds",
               time_origin="2026-11-01T00:00:00Z").error is None
    assert starts(trace) == [("t", datetime(2026, 11, 1, 0, 1))]



@pytest.mark.parametrize("submit, start, instants", [
    ("1796133000", "1796133600", "seconds since 1970"),
    ("2026-12-01T13:50:00+0000", "2026-12-01T14:00:00+0000", "written with their UTC offset")])
def test_jobs_starting_after_the_snapshot_in_a_parsable2_file_of_instants_are_said_as_a_clock_not_a_zone(
        tmp_path, caplog, submit, start, instants):
    """sacct --parsable2 written with SLURM_TIME_FORMAT=%s (seconds since 1970) or %FT%T%z: its times
    are instants, which the source's timezone does not read, yet the line said to set
    inventory[0].timezone. Job 7 starts at 14:00 UTC, after the snapshot at 06:00 in any zone."""
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "sacct.txt").write_text("JobID|JobIDRaw|State|Submit|Start|End|NodeList|AllocTRES\n"
                                      f"7|7|RUNNING|{submit}|{start}|Unknown|p5-001|gres/gpu=8\n"
                                      "8|8|COMPLETED|1796029200|1796032800|1796040000|p5-002|gres/gpu=8\n")
    with caplog.at_level("WARNING"):
        assert run(tmp_path, "slurm-jobs", folder, timezone="Asia/Tokyo").error is None
    assert said(caplog) == [
        f"{folder / 'sacct.txt'}: 1 job(s) start after this snapshot was taken (2026-12-01T06:00:00 UTC), which no "
        f"job can; the first, job 7 at 2026-12-01T14:00:00 UTC: its times are {instants}, the same in every "
        "zone: the clock that wrote them runs ahead of this machine's, or this machine's runs behind (compare both "
        "with NTP)"]
    assert starts(tmp_path)[0] == ("7", datetime(2026, 12, 1, 14))


@pytest.mark.parametrize("name, text, source, first, words", [
    ("z.csv", "job_id,gpus,start_time,end_time\nj,8,2026-12-01T10:00:00Z,\n", {}, "2026-12-01T10:00:00",
     "written with their UTC offset"),
    ("paris.csv", "job_id,gpus,start_time,end_time\nj,8,2026-12-01T10:00:00+02:00,\n", {}, "2026-12-01T08:00:00",
     "written with their UTC offset"),
    ("epoch.csv", "job_id,gpus,start_time,end_time\nj,8,1796112000,\n", {"time_format": "seconds"},
     "2026-12-01T08:00:00", "seconds since 1970"),
    ("zoned.parquet", None, {}, "2026-12-01T10:00:00", "timestamps with their zone")])
def test_jobs_file_times_that_carry_their_zone_starting_after_the_snapshot_are_said_as_a_clock_not_a_zone(
        tmp_path, caplog, name, text, source, first, words):
    """small50: a jobs-file whose times are instants (an offset, epoch seconds, a Parquet timestamp with its
    zone) and start after the snapshot named the source's timezone key, which reads none of them; a clock is
    wrong (jobs50 did the same for sacct files)."""
    path = tmp_path / name
    if text is None:
        start = pa.array([datetime(2026, 12, 1, 10)], pa.timestamp("us", tz="UTC"))
        pq.write_table(pa.table({"job_id": ["j"], "gpus": [8], "start_time": start,
                                 "end_time": pa.nulls(1, pa.timestamp("us", tz="UTC"))}), path)
    else:
        path.write_text(text)
    with caplog.at_level("WARNING"):
        assert run(tmp_path, "jobs-file", path, **source).error is None
    assert said(caplog) == [
        f"{path}: 1 job(s) start after this snapshot was taken (2026-12-01T06:00:00 UTC), which no job can; the "
        f"first, job j at {first} UTC: its times are {words}, the same in every zone: the clock that wrote them runs "
        "ahead of this machine's, or this machine's runs behind (compare both with NTP)"]


@pytest.mark.parametrize("name", ["pending_first.csv", "pending_first.parquet"])
def test_a_pending_jobs_empty_start_first_does_not_make_a_file_of_instants_zone_dependent(tmp_path, caplog, name):
    """review50b: the first row alone told whether the file's times are instants: a pending job's empty
    start_time first (or a Parquet file's first row group of pending jobs) named the timezone key."""
    path = tmp_path / name
    if name.endswith(".csv"):
        path.write_text("job_id,gpus,state,start_time,end_time\n"
                        "waiting,8,PENDING,,\nj,8,RUNNING,2026-12-01T10:00:00Z,\n")
    else:
        stamp = pa.timestamp("us", tz="UTC")
        groups = [pa.table({"job_id": [job], "gpus": [8], "state": [state],
                            "start_time": pa.array([start], stamp), "end_time": pa.nulls(1, stamp)})
                  for job, state, start in (("waiting", "PENDING", None), ("j", "RUNNING", datetime(2026, 12, 1, 10)))]
        with pq.ParquetWriter(path, groups[0].schema) as writer:
            for group in groups:
                writer.write_table(group)
        assert pq.ParquetFile(path).num_row_groups == 2
    with caplog.at_level("WARNING"):
        assert run(tmp_path, "jobs-file", path).error is None
    [line] = said(caplog)
    assert "its times are written with their UTC offset" in line or "timestamps with their zone" in line, line
    assert "timezone" not in line, line
