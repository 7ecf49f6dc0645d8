"""jobs-file fed public GPU cluster traces as published (tests/data/traces/README.md): a CSV
without a header row, times as numbers since an origin, GPUs in percent of one per instance, a
job id made of two columns; each unreadable shape fails naming file, row, column and the fix."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.test_jobs_file import cli_inventory, jobs, run

TRACES = Path(__file__).parent / "data" / "traces"
PAI_HEADER = (TRACES / "pai_task_table.header").read_text().strip().split(",")
PAI = {"header": PAI_HEADER, "time_format": "seconds", "time_origin": "2020-07-01T00:00:00+08:00",
       "gpu_unit": "percent", "cluster": "pai",
       "columns": {"job_name": "job_id", "task_name": "job_id", "inst_num": "instances", "status": "state",
                   "plan_gpu": "gpus", "gpu_type": "partition"},
       "states": {"Terminated": "COMPLETED", "Waiting": "PENDING"}}
ORIGIN = datetime(2020, 6, 30, 16)  # 2020-07-01T00:00:00+08:00 in UTC


def row_wise(monkeypatch) -> None:
    import connectors.jobs_file_columns as jobs_file_columns

    monkeypatch.setattr(jobs_file_columns, "column_rows", lambda *args: None)


def files_read_row_wise(monkeypatch) -> list[Path]:
    """The files the row reader reads from now on (the column-wise reader passed them on)."""
    import connectors.jobs_file as jobs_file

    read, row_wise_read = [], jobs_file.JobsFileConnector._row_wise
    monkeypatch.setattr(jobs_file.JobsFileConnector, "_row_wise",
                        lambda self, path, *args: read.append(path) or row_wise_read(self, path, *args))
    return read


@pytest.mark.parametrize("reader", ["column-wise", "row-wise"])
def test_the_alibaba_pai_task_table_reads_as_published(tmp_path, monkeypatch, caplog, reader):
    """No header row (`header:` names the columns), float seconds from an origin, plan_gpu in
    percent per instance times inst_num, a job's ps, worker and evaluator starting together as
    three records (job_name/task_name), the CPU-only ps without a plan_gpu holding no GPU (said),
    a task waiting with start 0.0 left out (said)."""
    if reader == "row-wise":
        row_wise(monkeypatch)
    else:  # without the two rows the row reader says something of
        (tmp_path / "pai").mkdir()
        (tmp_path / "pai" / "pai_task_table.csv").write_text("".join(
            line for line in (TRACES / "pai_task_table.csv").read_text().splitlines(True)
            if "Waiting" not in line and ",ps," not in line))
        read_row_wise = files_read_row_wise(monkeypatch)
    outcome = run(tmp_path, TRACES / "pai_task_table.csv" if reader == "row-wise" else tmp_path / "pai", **PAI)
    assert outcome.error is None, outcome.error
    assert reader == "row-wise" or read_row_wise == []
    at = lambda seconds: ORIGIN + timedelta(seconds=seconds)  # noqa: E731
    assert jobs(tmp_path, "job_id, state, gpus, start_time, end_time, partition") == [
        ("4f057009a5d481acec67b088/tensorflow", "COMPLETED", 0.5, at(1739162), at(1739200), "MISC"),
        ("af724763f4f5d0beef445849/evaluator", "COMPLETED", 0.5, at(2081336), at(2083889), "V100"),
        *([("af724763f4f5d0beef445849/ps", "COMPLETED", 0.0, at(2081336), at(2083889), None)]
          if reader == "row-wise" else []),
        ("af724763f4f5d0beef445849/worker", "COMPLETED", 8.0, at(2081336), at(2083889), "V100"),
        ("b3a8f1c2d4e5f60718293a4b/worker", "FAILED", 0.5, at(2090000), at(2090600), "T4"),
        ("c9d0e1f2a3b4c5d6e7f80912/worker", "RUNNING", 1.0, at(2095000), None, "P100")]
    if reader == "row-wise":
        said = " ".join(caplog.text.split())
        assert ("pai_task_table.csv: 1 row(s) with an empty gpus cell (a trace's CPU-only tasks, as Alibaba PAI's "
                "plan_gpu) are read as holding no GPU; the first, row 4 (line 4)") in said
        assert "pai_task_table.csv: 1 row(s) without a start_time, whose state says they never ran" in said


def test_a_csv_without_a_header_row_is_named_so_with_the_key_to_set(tmp_path):
    result = cli_inventory(tmp_path, TRACES / "pai_task_table.csv",
                           **{key: value for key, value in PAI.items() if key != "header"})
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    assert "pai_task_table.csv: missing column(s) job_id, start_time, end_time, gpus: the first line (" in result.output
    assert "looks like data, not a header" in result.output
    assert "list the columns' names in inventory[0].header" in result.output


@pytest.mark.parametrize("reader", ["column-wise", "row-wise"])
def test_epoch_millisecond_times_and_a_fractional_gpu_count(tmp_path, monkeypatch, reader):
    read_row_wise = files_read_row_wise(monkeypatch)
    if reader == "row-wise":
        row_wise(monkeypatch)
    outcome = run(tmp_path, TRACES / "epoch_ms_jobs.csv", time_format="milliseconds",
                  columns={"JobId": "job_id", "GpuCount": "gpus", "SubmitTimeMs": "submit_time",
                           "StartTimeMs": "start_time", "EndTimeMs": "end_time", "Status": "state"})
    assert outcome.error is None, outcome.error
    assert jobs(tmp_path, "job_id, user, state, gpus, submit_time, start_time, end_time") == [
        ("j-100", "ana", "COMPLETED", 8.0, datetime(2026, 11, 30, 9, 59), datetime(2026, 11, 30, 10),
         datetime(2026, 11, 30, 12)),
        ("j-101", "bo", "FAILED", 0.25, datetime(2026, 11, 30, 11), datetime(2026, 11, 30, 11, 0, 0, 500000),
         datetime(2026, 11, 30, 11, 30, 0, 250000)),
        ("j-102", "bo", "RUNNING", 4.0, datetime(2026, 11, 30, 11, 58, 20), datetime(2026, 11, 30, 12), None)]
    assert len(read_row_wise) == (reader == "row-wise")


def test_parquet_with_integer_epoch_seconds(tmp_path, monkeypatch):
    pq.write_table(pa.table({"job_id": ["a", "b"], "gpus": [8, 2],
                             "start_time": pa.array([1796032800, 1796036400], pa.int64()),
                             "end_time": pa.array([1796040000, None], pa.int64())}), tmp_path / "jobs.parquet")
    read_row_wise = files_read_row_wise(monkeypatch)
    assert run(tmp_path, tmp_path / "jobs.parquet", time_format="seconds").error is None
    assert read_row_wise == []
    assert jobs(tmp_path, "job_id, start_time, end_time, state") == [
        ("a", datetime(2026, 11, 30, 10), datetime(2026, 11, 30, 12), None),
        ("b", datetime(2026, 11, 30, 11), None, "RUNNING")]


# time_format → start cells: plain decimals, counted in SQL, and (last) spellings left to Python
COUNTS = {
    "seconds": (["1796032800", " 1796032800.5 ", "+1796032800.123456", "0001796032801"],
                ["1796032800.0000005", "1796032800.0000015", "1.7960328e9", "1796032802."]),
    "milliseconds": (["1796032800000", "1796032800000.5", "1796032800000.001"],
                     ["1796032800000.0005", "1796032800000.0015", "1.7960328e12"]),
    "microseconds": (["1796032800000000", "+1796032800000001"],
                     ["1796032800000000.5", "1796032800000001.5", "1796032800000002.5"]),
}


@pytest.mark.parametrize("time_format", COUNTS)
@pytest.mark.parametrize("origin", [None, "2020-07-01T00:00:00+08:00"], ids=["unix", "origin"])
def test_numeric_times_are_counted_in_sql_exactly_as_the_row_reader_counts_them(tmp_path, monkeypatch, time_format,
                                                                                origin):
    """Before, each distinct numeric time was parsed in Python (~6 CPU s per 1M rows more than
    ISO text, bench/README.md); the values SQL cannot count exactly (rounding half to even past a
    microsecond, exponents) are still Python's, and the answers are the row reader's to the
    microsecond."""
    import connectors.jobs_file as jobs_file

    plain, odd = COUNTS[time_format]
    submits = ["0", "0.0", "-0", "unknown", ""] + (["-3600.25", "-1"] if origin else [])
    (tmp_path / "jobs.csv").write_text("job_id,start_time,end_time,submit_time,gpus\n" + "".join(
        f"j{n},{start},,{submits[n % len(submits)]},8\n" for n, start in enumerate(plain + odd)))
    source = {"time_format": time_format} | ({"time_origin": origin} if origin else {})
    parsed: list = []
    count_time = jobs_file.parse_count_time
    monkeypatch.setattr(jobs_file, "parse_count_time", lambda value, *args: parsed.append(value) or count_time(
        value, *args))
    read_row_wise = files_read_row_wise(monkeypatch)
    assert run(tmp_path / "columns", tmp_path / "jobs.csv", **source).error is None
    python = odd + (["0.0"] if time_format == "microseconds" else [])  # no decimals counted: a 0.0 too
    assert read_row_wise == [] and sorted(parsed) == sorted(python)  # each once, the rest counted in SQL
    row_wise(monkeypatch)
    assert run(tmp_path / "rows", tmp_path / "jobs.csv", **source).error is None
    assert jobs(tmp_path / "columns") == jobs(tmp_path / "rows")


@pytest.mark.parametrize("source, says", [
    # fromisoformat reads 1796032800000 as 1796-03-28: a number is never read as an ISO time
    ({}, "row 1 (line 2), column StartTimeMs (read as start_time): '1796032800000' is a number, not an ISO 8601 time "
         "such as 2026-11-30T14:00:00Z; a number counts time from an origin: set the source's time_format (seconds, "
         "milliseconds or microseconds)"),
    ({"time_format": "seconds"}, "row 1 (line 2), column StartTimeMs (read as start_time): '1796032800000' "
                                 "seconds is past the year 9999: is the file in another unit?"),
    ({"time_format": "microseconds"}, "'1796032800000' microseconds since 1970 is 1970-01-21T18:53:52.800000, "
                                      "before 2000: another unit"),
])
def test_numeric_times_read_in_the_wrong_unit_fail_naming_row_column_and_the_setting(tmp_path, source, says):
    result = cli_inventory(tmp_path, TRACES / "epoch_ms_jobs.csv", **source, columns={
        "JobId": "job_id", "GpuCount": "gpus", "SubmitTimeMs": "submit_time", "StartTimeMs": "start_time",
        "EndTimeMs": "end_time", "Status": "state"})
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    assert "epoch_ms_jobs.csv: " in result.output and says in " ".join(result.output.split()), result.output


def test_trace_seconds_without_an_origin_say_to_set_time_origin(tmp_path):
    result = cli_inventory(tmp_path, TRACES / "pai_task_table.csv",
                           **{key: value for key, value in PAI.items() if key != "time_origin"})
    assert result.exit_code == 3, result.output
    assert ("row 1 (line 1), column start_time: '1739162.0' seconds since 1970 is 1970-01-21T03:06:02, before "
            "2000") in result.output and "set time_origin to that moment" in " ".join(result.output.split())


def test_a_job_of_several_tasks_starting_together_needs_both_columns_in_its_id(tmp_path):
    """Mapped from job_name alone, PAI's worker and evaluator are one job listed twice."""
    columns = {key: value for key, value in PAI["columns"].items() if key != "task_name"}
    result = cli_inventory(tmp_path, TRACES / "pai_task_table.csv", **(PAI | {"columns": columns}))
    assert result.exit_code == 3, result.output
    assert "job af724763f4f5d0beef445849 is listed twice" in result.output


@pytest.mark.parametrize("source, says", [
    ({"time_origin": "2020-07-01T00:00:00Z"}, "inventory[0].time_origin: only numeric times count from an origin"),
    ({"time_format": "seconds", "time_origin": "July 1st"}, "inventory[0].time_origin: 'July 1st' is not an ISO 8601"),
    ({"time_format": "seconds", "time_origin": "2026-03-08T02:30:00", "timezone": "America/New_York"},
     "inventory[0].time_origin: 2026-03-08T02:30:00 does not exist in America/New_York"),
    ({"time_format": "hours"}, "inventory[0].time_format: must be one of iso, seconds, milliseconds or microseconds"),
    ({"gpu_unit": "fraction"}, "inventory[0].gpu_unit: must be one of gpus or percent, not 'fraction'"),
    ({"header": ["job_id", "JOB_ID"]}, "inventory[0].header: 'JOB_ID': every column needs a name of its own"),
    ({"columns": {"plan_gpu": "gpus", "gpu_num": "gpus"}}, "both become 'gpus' (only job_id may be made of several"),
])
def test_bad_trace_settings_are_exit_2_with_the_dotted_path(tmp_path, source, says):
    result = cli_inventory(tmp_path, TRACES / "epoch_ms_jobs.csv", **source)
    assert result.exit_code == 2, result.output
    assert says in result.output, result.output


def test_the_helios_cluster_log_reads_through_columns_in_its_zone(tmp_path):
    """Helios: Slurm states, wall-clock times (Asia/Shanghai) without an offset; the job
    cancelled while queued has no start and is left out; the running one holds its GPUs."""
    shutil.copy(TRACES / "helios_cluster_log.csv", tmp_path / "cluster_log.csv")
    assert run(tmp_path, tmp_path / "cluster_log.csv", cluster="venus", timezone="Asia/Shanghai",
               columns={"gpu_num": "gpus", "vc": "team"}).error is None
    assert jobs(tmp_path, "job_id, user, team, state, gpus, start_time, end_time") == [
        ("2a8f3c", "u3e1f", "vc6YE", "COMPLETED", 16.0, datetime(2020, 9, 1, 0, 0, 7), datetime(2020, 9, 1, 2, 0, 7)),
        ("2a8f3d", "u3e1f", "vc6YE", "FAILED", 8.0, datetime(2020, 9, 1, 0, 12), datetime(2020, 9, 1, 0, 42)),
        ("2a8f3f", "u9b2c", "vcLJZ", "RUNNING", 4.0, datetime(2020, 9, 1, 1, 31), None),
        ("2a8f40", "u9b2c", "vcLJZ", "TIMEOUT", 2.0, datetime(2020, 8, 31, 22, 0, 10), datetime(2020, 9, 1, 2, 0, 10))]


@pytest.mark.parametrize("reader", ["column-wise", "row-wise"])
def test_epoch_milliseconds_are_never_read_as_a_compact_iso_date(tmp_path, monkeypatch, reader):
    """datetime.fromisoformat takes '1796032800000' as 1796-03-28T00:00 (ISO 8601's basic
    format): a file of epoch milliseconds whose digits happen to form dates loaded in 1796."""
    if reader == "row-wise":
        row_wise(monkeypatch)
    (tmp_path / "jobs.csv").write_text("job_id,start_time,end_time,gpus\nx,1796032800000,1796032900000,8\n")
    result = cli_inventory(tmp_path, tmp_path / "jobs.csv")
    assert result.exit_code == 3, result.output
    assert "row 1 (line 2), column start_time: '1796032800000' is a number, not an ISO 8601 time" in result.output


def test_an_empty_gpus_cell_is_a_job_without_gpus_said_once(tmp_path, caplog):
    (tmp_path / "jobs.csv").write_text("job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,,\n"
                                       "2,2026-11-30T00:00:00Z,,8\n3,2026-11-30T01:00:00Z,,\n")
    assert run(tmp_path, tmp_path / "jobs.csv").error is None
    assert jobs(tmp_path, "job_id, gpus") == [("1", 0.0), ("2", 8.0), ("3", 0.0)]
    assert "jobs.csv: 2 row(s) with an empty gpus cell" in caplog.text and "the first, row 1 (line 2)" in caplog.text


PHILLY = {"columns": {"jobid": "job_id", "status": "state", "vc": "project", "submitted_time": "submit_time"},
          "states": {"Pass": "COMPLETED", "Killed": "CANCELLED"}}


def test_the_philly_json_log_is_named_as_json_not_a_table(tmp_path):
    result = cli_inventory(tmp_path, TRACES / "philly_cluster_job_log.json", **PHILLY)
    assert result.exit_code == 3, result.output
    assert ("philly_cluster_job_log.json is JSON, not a job table (Microsoft Philly's cluster_job_log?)"
            in result.output and "README: jobs-file shows philly_to_csv.py" in result.output)


def test_the_readmes_philly_flattening_reads_through_columns(tmp_path):
    """The README's philly_to_csv.py, run as written, then read with the README's columns:
    an attempt a row (its GPUs over its machines), the job killed before it ran none."""
    import subprocess
    import sys

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    script = readme.split("```python\n# philly_to_csv.py")[1].split("```")[0]
    (tmp_path / "philly_to_csv.py").write_text("# philly_to_csv.py" + script)
    subprocess.run([sys.executable, str(tmp_path / "philly_to_csv.py"), str(TRACES / "philly_cluster_job_log.json"),
                    str(tmp_path / "philly.csv")], check=True, timeout=60)
    assert run(tmp_path, tmp_path / "philly.csv", cluster="philly", **PHILLY).error is None
    assert jobs(tmp_path, "job_id, state, project, gpus, nodes, start_time, end_time") == [
        ("application_1506638472019_10238", "COMPLETED", "6214e9", 2.0, ["m8"], datetime(2017, 10, 7, 4, 42, 2),
         datetime(2017, 10, 7, 4, 42, 33)),
        ("application_1506638472019_10240", "FAILED", "b436b2", 16.0, ["m412", "m413"], datetime(2017, 10, 7, 5),
         datetime(2017, 10, 7, 5, 10)),
        ("application_1506638472019_10240", "FAILED", "b436b2", 16.0, ["m412", "m413"], datetime(2017, 10, 7, 5, 12),
         datetime(2017, 10, 7, 5, 20)),
        ("application_1506638472019_10242", "RUNNING", "6214e9", 1.0, ["m9"], datetime(2017, 10, 7, 7), None)]
