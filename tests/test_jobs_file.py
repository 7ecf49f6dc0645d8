"""jobs-file: a CSV/Parquet job table from any scheduler → `jobs`; other schemas through
`columns:`; every bad input named (file, row, column) with exit 3, config errors exit 2."""

from __future__ import annotations

import gzip
import json
import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core import snapshot_ledger
from service.core.config import parse_config
from service.core.errors import ConfigError
from service.core.lake import Lake
from service.core.snapshot_ledger import SET_ASIDE
from service.ingest.inventory import run_inventory

NOW = datetime(2026, 12, 1, 6)

JOBS_CSV = """\ufeffJob_ID,START_TIME,end_time,GPUs,nodes,instance_ids,cluster,state,run_id,user,team,project,experiment,job_type,labels,cpu_num
101,2026-11-30T10:00:00Z,2026-11-30T12:30:00Z,16,"p5-[001-002]",,p5,COMPLETED,llama-70b,ana,pretrain,llama,70b-r1,pretrain,"{""wandb"": ""abc"", ""seed"": 7}",96
102,2026-11-30T11:00:00+01:00,,8,p5-010,i-0aaa,p5,,,bo,,,,eval,,12
103,2026-11-30 09:15:00,2026-11-30 09:45:00,0.5,,i-0bbb;i-0ccc,,cancelled by 0,,,,,,debug,,
"""


def run(tmp_path: Path, path: Path, **source):
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "trace", "kind": "jobs-file", "path": str(path), **source}]})
    [outcome] = run_inventory(config, now=NOW)
    return outcome


def jobs(tmp_path: Path, columns: str = "*") -> list[tuple]:
    con = Lake(tmp_path / "lake").query()
    try:
        return con.execute(f"SELECT {columns} FROM jobs ORDER BY record_id").fetchall()
    finally:
        con.close()


def cli_inventory(tmp_path: Path, path: Path, **source):
    (tmp_path / "spendlake.yaml").write_text(json.dumps({
        "lake": str(tmp_path / "lake"),
        "inventory": [{"name": "trace", "kind": "jobs-file", "path": str(path), **source}]}))
    return CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory"])


def test_a_csv_job_table_lands_in_jobs(tmp_path):
    (tmp_path / "jobs.csv").write_text(JOBS_CSV, encoding="utf-8")
    outcome = run(tmp_path, tmp_path / "jobs.csv", cluster="default-pool")
    assert outcome.error is None and outcome.rows == {"jobs snapshot_date=2026-12-01": 3}
    rows = jobs(tmp_path, "record_id, job_id, run_id, scheduler, cluster, state, start_time, end_time, gpus, nodes, "
                          "instance_ids, user, team, project, experiment, job_type, labels, source, snapshot_date")
    assert rows == [
        ("default-pool/103@2026-11-30T09:15:00", "103", "103", "file", "default-pool", "CANCELLED", datetime(2026, 11, 30, 9, 15),
         datetime(2026, 11, 30, 9, 45), 0.5, None, ["i-0bbb", "i-0ccc"], None, None, None, None, "debug", None,
         "trace", "2026-12-01"),
        ("p5/101@2026-11-30T10:00:00", "101", "llama-70b", "file", "p5", "COMPLETED", datetime(2026, 11, 30, 10),
         datetime(2026, 11, 30, 12, 30), 16.0, ["p5-001", "p5-002"], None, "ana", "pretrain", "llama", "70b-r1",
         "pretrain", {"wandb": "abc", "seed": "7"}, "trace", "2026-12-01"),
        # +01:00 becomes UTC; an empty end_time is a job still running
        ("p5/102@2026-11-30T10:00:00", "102", "102", "file", "p5", "RUNNING", datetime(2026, 11, 30, 10), None, 8.0, ["p5-010"],
         ["i-0aaa"], "bo", None, None, None, "eval", None, "trace", "2026-12-01"),
    ]


def test_times_without_an_offset_are_in_the_configured_zone_and_attempts_get_their_own_record(tmp_path):
    (tmp_path / "jobs.csv.gz").write_bytes(gzip.compress(
        b"job_id,start_time,end_time,gpus,state\n"
        b"7,2026-11-30T10:00:00,2026-11-30T11:00:00,8,REQUEUED\n"
        b"7,2026-11-30T11:05:00,2026-11-30T13:00:00,8,COMPLETED\n"))
    assert run(tmp_path, tmp_path / "jobs.csv.gz", timezone="Europe/Paris").error is None
    assert jobs(tmp_path, "record_id, start_time, end_time, state") == [
        ("/7@2026-11-30T09:00:00", datetime(2026, 11, 30, 9), datetime(2026, 11, 30, 10), "REQUEUED"),
        ("/7@2026-11-30T10:05:00", datetime(2026, 11, 30, 10, 5), datetime(2026, 11, 30, 12), "COMPLETED")]


def test_a_public_trace_schema_maps_through_columns(tmp_path):
    """Shaped like AcmeTrace (InternLM's LLM-cluster trace): gpu_num, type, naive times."""
    (tmp_path / "trace_seren.csv").write_text(
        "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration\n"
        "dlc1q9a,u17,2,16,128,Pretrain,COMPLETED,2023-07-01 00:00:01,2023-07-01 00:00:05,2023-07-01 02:00:05,7200\n"
        "dlc1q9b,u03,1,1,8,Evaluation,FAILED,2023-07-01 00:01:00,2023-07-01 00:02:00,2023-07-01 00:03:30,90\n")
    outcome = run(tmp_path, tmp_path / "trace_seren.csv", cluster="seren",
                  columns={"gpu_num": "gpus", "type": "job_type"})
    assert outcome.error is None
    assert jobs(tmp_path, "job_id, gpus, job_type, state, user, submit_time") == [
        ("dlc1q9a", 16.0, "Pretrain", "COMPLETED", "u17", datetime(2023, 7, 1, 0, 0, 1)),
        ("dlc1q9b", 1.0, "Evaluation", "FAILED", "u03", datetime(2023, 7, 1, 0, 1))]


def test_parquet_with_timestamps_and_a_labels_map(tmp_path):
    table = pa.table({
        "job_id": pa.array([1, 2], pa.int64()),
        "start_time": pa.array([datetime(2026, 11, 30, 1), datetime(2026, 11, 30, 2)], pa.timestamp("ms", "UTC")),
        "end_time": pa.array([datetime(2026, 11, 30, 3), None], pa.timestamp("ms", "UTC")),
        "gpus": pa.array([8, 4], pa.int32()),
        "labels": pa.array([[("team", "rl")], None], pa.map_(pa.string(), pa.string())),
        "restarts": pa.array([2, None], pa.int16()),
    })
    pq.write_table(table, tmp_path / "jobs.parquet")
    assert run(tmp_path, tmp_path / "jobs.parquet").error is None
    assert jobs(tmp_path, "job_id, start_time, end_time, gpus, labels, restarts, state") == [
        ("1", datetime(2026, 11, 30, 1), datetime(2026, 11, 30, 3), 8.0, {"team": "rl"}, 2, None),
        ("2", datetime(2026, 11, 30, 2), None, 4.0, None, None, "RUNNING")]


def test_a_directory_reads_every_csv_and_parquet_file(tmp_path):
    folder = tmp_path / "exports"
    (folder / "2026-11").mkdir(parents=True)
    (folder / "2026-11" / "a.csv").write_text("job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,,1\n")
    (folder / "b.csv").write_text("job_id,start_time,end_time,gpus\n2,2026-11-30T00:00:00Z,,2\n")
    (folder / "README.txt").write_text("not a job table")
    assert run(tmp_path, folder).error is None
    assert jobs(tmp_path, "job_id, gpus") == [("1", 1.0), ("2", 2.0)]


def test_a_header_only_file_stores_zero_rows(tmp_path):
    (tmp_path / "jobs.csv").write_text("job_id,start_time,end_time,gpus\n")
    outcome = run(tmp_path, tmp_path / "jobs.csv")
    assert outcome.error is None and outcome.rows == {"jobs snapshot_date=2026-12-01": 0}


def test_42_an_empty_or_missing_location_exits_3_naming_it(tmp_path):
    (tmp_path / "empty").mkdir()
    result = cli_inventory(tmp_path, tmp_path / "empty")
    assert result.exit_code == 3 and f"{tmp_path / 'empty'}: the directory holds no files" in result.output
    (tmp_path / "empty" / "notes.txt").write_text("x")
    result = cli_inventory(tmp_path, tmp_path / "empty")
    assert result.exit_code == 3 and "no .csv, .csv.gz or .parquet files found" in result.output
    result = cli_inventory(tmp_path, tmp_path / "nowhere")
    assert result.exit_code == 3 and f"{tmp_path / 'nowhere'}: no such file or directory" in result.output


@pytest.mark.parametrize("content, says", [
    ("job_id,start,end_time,gpus\n1,2026-11-30T00:00:00Z,,1\n",
     "missing column(s) start_time (the file has: job_id, start, end_time, gpus)"),
    ("job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,,1\n2,30/11/2026 01:00,,1\n",
     "row 2 (line 3), column start_time: '30/11/2026 01:00' is not an ISO 8601 time"),
    ("job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,yesterday,1\n",
     "row 1 (line 2), column end_time: 'yesterday' is not an ISO 8601 time"),
    ("job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,,eight\n", "row 1 (line 2), column gpus: 'eight' is not a number"),
    ("job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,,-1\n", "column gpus: '-1' is not a number >= 0"),
    ("job_id,start_time,end_time,gpus\n,2026-11-30T00:00:00Z,,1\n", "column job_id: empty; every job needs an id"),
    # allocation marks a job's record after a control character: an id holding one was cut there
    ("job_id,start_time,end_time,gpus\n7\x1f1,2026-11-30T00:00:00Z,,1\n",
     "row 1 (line 2), column job_id: '7\\x1f1' holds a control character, which no job id may"),
    (pa.table, "row 2, column job_id: 'a\\x1fb' holds a control character, which no job id may"),
    ("job_id,start_time,end_time,gpus\n1,,,1\n", "column start_time: '': a job without a start cannot hold GPUs"),
    ("job_id,start_time,end_time,gpus\n1,Unknown,Unknown,1\n",
     "column start_time: 'Unknown': a job without a start cannot hold GPUs (one whose state says it never ran, "
     "such as CANCELLED, is left out)"),
    ("job_id,start_time,end_time,gpus,state\n1,,2026-11-30T01:00:00Z,1,COMPLETED\n",
     "column start_time: '': a job without a start cannot hold GPUs"),
    ("job_id,start_time,end_time,gpus\n1,2026-11-30T02:00:00Z,2026-11-30T01:00:00Z,1\n",
     "column end_time: 2026-11-30T01:00:00 is before start_time 2026-11-30T02:00:00"),
    ("job_id,start_time,end_time,gpus,nodes\n1,2026-11-30T00:00:00Z,,1,p5-[001-\n", "column nodes: '[' without ']'"),
    ("job_id,start_time,end_time,gpus,state\n1,2026-11-30T00:00:00Z,,1,sleepy\n",
     "column state: 'sleepy' (1 row) is not a job state (one of BOOT_FAIL, CANCELLED"),
    ("job_id,start_time,end_time,gpus,labels\n1,2026-11-30T00:00:00Z,,1,team=nlp\n",
     "column labels: 'team=nlp' is not JSON"),
    ('job_id,start_time,end_time,gpus,labels\n1,2026-11-30T00:00:00Z,,1,"[1, 2]"\n',
     "column labels: not a JSON object"),
    # a labels cell nested thousands deep: Python's JSON parser gives up (a traceback and exit 1 before)
    ('job_id,start_time,end_time,gpus,labels\n1,2026-11-30T00:00:00Z,,1,"{""team"": '
     + "[" * 5000 + "]" * 5000 + '}"\n',
     "row 1 (line 2), column labels: JSON nested too deep for labels"),
    ("job_id,start_time,end_time,gpus,restarts\n1,2026-11-30T00:00:00Z,,1,1.5\n",
     "column restarts: '1.5' is not a whole number >= 0"),
    ("job_id,start_time,end_time,gpus,GPU_NUM\n1,2026-11-30T00:00:00Z,,1,2\n",
     "columns 'gpus' and 'GPU_NUM' both give 'gpus'"),
    ("job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,,1\n1,2026-11-30T00:00:00Z,,2\n",
     "job 1 is listed twice with start_time 2026-11-30T00:00:00"),
    # a file cut short while being written
    (pa.BufferOutputStream, "not a whole Parquet file"),
    (gzip.compress(b"job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,,1\n", mtime=0)[:-6], "not a whole gzip file"),
    (b"job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,,1\xff\n", "not UTF-8: byte 0xff on line 2"),
    # the decoder's position counts from its chunk: the line is found in the bytes
    (b"job_id,start_time,end_time,gpus\r\n" + b"1,2026-11-30T00:00:00Z,,1\r\n" * 3999 + b"2,caf\xe9,,1\r\n"
     + b"3,2026-11-30T00:00:00Z,,1\r\n" * 999, "not UTF-8: byte 0xe9 on line 4001"),
    (b"job_id,start_time,end_time,gpus\r1,2026-11-30T00:00:00Z,,1\r2,caf\xe9,,1\r", "not UTF-8: byte 0xe9 on line 3"),
    # blank lines before the header are skipped (and counted)
    ("\r\n\r\njob_id,start_time,end_time,gpus\r\n1,2026-11-30T00:00:00Z,,1\r\n2,x,,1\r\n",
     "row 2 (line 5), column start_time: 'x' is not an ISO 8601 time"),
    ("job_id;start_time;end_time;gpus\n1;2026-11-30T00:00:00Z;;1\n",
     "the header is one column, 'job_id;start_time;end_time;gpus': the file is separated by semicolons"),
    ("job_id\tstart_time\tend_time\tgpus\n", "the file is separated by tabs"),
    # a quote left open makes the rest of the file one cell: shown cut short
    ('job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,,"1\n' + "2,2026-11-30T00:00:00Z,,1\n" * 50,
     "row 1 (line 2), column gpus: '1\\n2,2026-11-30T00:00:00Z,,1\\n2,2026-11-30T00:00:00Z,,1\\n2,2026'... "
     "(1,302 characters) is not a number (the cell spans lines: a quote left open?)"),
])
def test_bad_rows_and_values_exit_3_naming_file_row_and_column(tmp_path, content, says):
    path = tmp_path / "jobs.csv"
    if content is pa.BufferOutputStream:
        path = tmp_path / "jobs.parquet"
        pq.write_table(pa.table({"job_id": ["1"], "start_time": ["2026-11-30T00:00:00Z"], "gpus": [1]}), path)
        content = path.read_bytes()[:-20]
    elif content is pa.table:  # read column-wise: the id checked there too
        path = tmp_path / "jobs.parquet"
        pq.write_table(pa.table({"job_id": ["1", "a\x1fb"], "start_time": ["2026-11-30T00:00:00Z"] * 2,
                                 "end_time": pa.array([None, None], pa.string()), "gpus": [1, 1]}), path)
        content = path.read_bytes()
    elif isinstance(content, bytes) and content[:2] == b"\x1f\x8b":
        path = tmp_path / "jobs.csv.gz"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    result = cli_inventory(tmp_path, path, columns={"gpu_num": "gpus"})
    assert result.exit_code == 3, result.output
    assert f"{path}" in result.output and says in result.output
    assert "Traceback" not in result.output and not (tmp_path / "lake" / "jobs").exists()


BAD_THIRD_ROW = (b'job_id,start_time,end_time,gpus,name\n1,2026-11-30T00:00:00Z,,1,"two\rlines?"\n'
                 b'2,2026-11-30T00:00:00Z,,1,"a\nb"\n3,30/11/2026,,1,c\n')


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["", "bom"])
def test_55_a_bad_row_names_the_line_its_record_starts_on_as_an_editor_counts_them(tmp_path, ending, bom):
    # a bare CR inside a quoted cell is not a line break (grep -n, vim and less show ^M), a line
    # break inside one is (LF or CRLF); a file whose lines end in CR alone counts CRs: row 3
    # starts on line 5 (header 1, row 1 on 2, row 2 on 3-4)
    content = BAD_THIRD_ROW.replace(b"\n", ending.encode())
    if ending == "\r":  # a CR file: its quoted CR is a line break, as it is the file's own
        content = content.replace(b"two\rlines?", b"one line")
    path = tmp_path / "jobs.csv"
    path.write_bytes(bom + content)
    result = cli_inventory(tmp_path, path)
    assert result.exit_code == 3, result.output
    assert "row 3 (line 5), column start_time: '30/11/2026'" in result.output, result.output
    fixed = content.replace(b"30/11/2026", b"2026-11-30") + b"1,2026-11-30T00:00:00Z,,1,again" + ending.encode()
    path.unlink()
    (tmp_path / "jobs.csv.gz").write_bytes(gzip.compress(bom + fixed))
    twice = cli_inventory(tmp_path, tmp_path / "jobs.csv.gz")
    assert twice.exit_code == 3, twice.output
    assert ("jobs.csv.gz: job 1 is listed twice with start_time 2026-11-30T00:00:00 (row 1 (line 2) and row 4 "
            "(line 6))") in twice.output, twice.output


@pytest.mark.parametrize("source, says", [
    ({"path": "/x", "columns": {"gpu_num": "gpu"}}, "inventory[0].columns.gpu_num: 'gpu' is not a jobs-file column"),
    ({"path": "/x", "columns": {"a": "gpus", "b": "GPUS"}}, "inventory[0].columns.b: 'b' and 'a' both become 'GPUS'"),
    ({"path": "/x", "columns": {"job_id": "Id", "gpus": "gpu_num"}},  # written the other way round
     "inventory[0].columns.job_id: 'Id' is not a jobs-file column, 'job_id' is: the file's name comes first, ours "
     "second (Id: job_id)"),
    ({}, "inventory[0].path: is required but missing"),
    ({"path": "/x", "regions": ["us-east-1"]}, "inventory[0].regions: kind jobs-file takes no such key"),
    ({"path": "/x", "timezone": "Mars/Olympus"}, "inventory[0].timezone: 'Mars/Olympus' is not an IANA"),
    ({"path": "/x", "states": {"Pass": "PASSED"}}, "inventory[0].states.Pass: 'PASSED' is not a job state; known: "
                                                   "BOOT_FAIL, CANCELLED"),
    ({"path": "/x", "states": {"COMPLETED": "Pass"}}, "inventory[0].states.COMPLETED: 'Pass' is not a job state"),
    ({"path": "/x", "states": {"Pass": "COMPLETED", "PASS": "FAILED"}},
     "inventory[0].states.PASS: 'PASS' and 'Pass' are one value (compared case-insensitively)"),
    ({"path": "/x", "states": {" ": "FAILED"}}, "inventory[0].states: an empty state value"),
    ({"path": "/x", "states": {"Killed": "CANCELLED by 0"}}, "inventory[0].states.Killed: 'CANCELLED by 0' is not"),
])
def test_bad_config_is_exit_2_with_the_dotted_path(source, says):
    with pytest.raises(ConfigError) as error:
        parse_config({"inventory": [{"name": "trace", "kind": "jobs-file", **source}]})
    assert error.value.exit_code == 2 and says in str(error.value)


def test_a_job_source_has_a_freshness_like_every_inventory_source(tmp_path):
    """status, the report and /readyz read every inventory source's freshness_hours (issue 15.5):
    a job source is one, its data reaching as far as its last snapshot."""
    from datetime import timedelta, timezone

    from service.ingest.freshness import source_freshness

    (tmp_path / "jobs.csv").write_text(JOBS_CSV, encoding="utf-8")
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "trace", "kind": "jobs-file", "path": str(tmp_path / "jobs.csv"), "freshness_hours": 12}]})
    [outcome] = run_inventory(config, now=NOW.replace(tzinfo=timezone.utc))
    assert outcome.error is None
    lake = Lake.of(config)
    [fresh] = source_freshness(config, lake, NOW.replace(tzinfo=timezone.utc) + timedelta(hours=6))
    assert (fresh.source, fresh.freshness_hours, fresh.state) == ("trace", 12, "ok")
    [late] = source_freshness(config, lake, NOW.replace(tzinfo=timezone.utc) + timedelta(hours=13))
    assert late.state == "stale" and late.hours_behind == 13


def test_a_bad_value_in_a_renamed_column_names_the_files_column_and_ours(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("JobId,Begin,Finish,gpu_num\nj1,yesterday,,8\n")
    result = cli_inventory(tmp_path, path, columns={"JobId": "job_id", "Begin": "start_time", "Finish": "end_time",
                                                    "gpu_num": "gpus"})
    assert result.exit_code == 3, result.output
    assert "row 1 (line 2), column Begin (read as start_time): 'yesterday' is not an ISO 8601 time" in result.output


def test_a_columns_mapping_from_a_name_the_file_lacks_says_so(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("job_id,start_time,end_time,gpu_num\nj1,2026-11-30T00:00:00Z,,8\n")
    result = cli_inventory(tmp_path, path, columns={"gpu_nm": "gpus"})
    assert result.exit_code == 3, result.output
    assert "missing column(s) gpus (inventory[0].columns maps 'gpu_nm' to it: the file has no such column;" \
        in result.output, result.output


@pytest.mark.parametrize("name, content, says", [
    ("jobs.csv", b"", "0 bytes: counted as no jobs"),  # `export > jobs.csv` not yet written
    ("jobs.csv", b"\r\n\r\n", "only blank lines: counted as no jobs"),
    ("jobs.csv.gz", b"", "0 bytes: counted as no jobs"),
    ("jobs.parquet", b"", "0 bytes: counted as no jobs"),
])
def test_56_an_empty_file_counts_as_no_jobs_and_says_so_in_one_line(tmp_path, caplog, name, content, says):
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / name).write_bytes(content)
    (folder / "z-good.csv").write_text("job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,,8\n")
    with caplog.at_level("WARNING"):
        assert run(tmp_path, folder).error is None
    assert jobs(tmp_path, "job_id") == [("1",)]
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [f"{folder / name}: {says}"]
    alone = run(tmp_path / "alone", folder / name)
    assert alone.error is None and alone.rows == {"jobs snapshot_date=2026-12-01": 0}


def test_a_job_in_two_exports_whose_windows_overlap_counts_once_the_ended_row_winning(tmp_path):
    folder = tmp_path / "jobs"
    folder.mkdir()
    header = "job_id,start_time,end_time,gpus\n"
    (folder / "2026-11-30.csv").write_text(header + "1,2026-11-30T00:00:00Z,,8\n2,2026-11-30T01:00:00Z,2026-11-30T02:00:00Z,8\n")
    (folder / "2026-12-01.csv").write_text(header + "1,2026-11-30T00:00:00Z,2026-11-30T05:00:00Z,8\n"
                                           "2,2026-11-30T01:00:00Z,2026-11-30T02:00:00Z,8\n1,2026-11-30T06:00:00Z,,8\n")
    (folder / "2026-12-02.csv").write_text(header + "1,2026-11-30T06:00:00Z,,8\n")  # still running: kept once
    assert run(tmp_path, folder).error is None
    assert jobs(tmp_path, "record_id, end_time") == [
        ("/1@2026-11-30T00:00:00", datetime(2026, 11, 30, 5)), ("/1@2026-11-30T06:00:00", None),
        ("/2@2026-11-30T01:00:00", datetime(2026, 11, 30, 2))]


def test_a_row_ending_minutes_before_it_starts_is_clock_skew_held_no_gpu_time(tmp_path, caplog):
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,2026-11-30T01:00:00Z,8\n"
                    "2,2026-11-30T00:00:00Z,2026-11-29T23:58:00Z,8\n")
    with caplog.at_level("WARNING"):
        assert run(tmp_path, path).error is None
    assert jobs(tmp_path, "job_id, end_time") == [("1", datetime(2026, 11, 30, 1)), ("2", datetime(2026, 11, 30))]
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: 1 row(s) end less than 5 minutes before they start (clock skew?), counted as holding no GPU time; "
        "the first, row 2 (line 3) (job 2)"]


def test_a_windows_csv_with_bom_crlf_and_an_extra_column_reads_and_a_near_name_is_said(tmp_path, caplog):
    path = tmp_path / "jobs.csv"
    path.write_bytes(b"\xef\xbb\xbfjob_id,start_time,end_time,gpus,cpu_num,node\r\n"
                     b"1,2026-11-30T00:00:00Z,2026-11-30T01:00:00Z,8,96,p5-001\r\n")
    with caplog.at_level("WARNING"):
        assert run(tmp_path, path).error is None
    assert jobs(tmp_path, "job_id, gpus, nodes") == [("1", 8.0, None)]
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: column 'node' is not read: is it nodes? (else ignore this; to read it, set "
        "inventory[0].columns: {node: nodes})"]


def test_a_columns_mapping_to_an_optional_column_the_file_lacks_fails_naming_it(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("job_id,start_time,end_time,gpus\nj1,2026-11-30T00:00:00Z,,8\n")
    result = cli_inventory(tmp_path, path, columns={"nodelist": "nodes"})
    assert result.exit_code == 3, result.output
    assert (f"{path}: inventory[0].columns maps 'nodelist' to 'nodes', and the file has no column 'nodelist' "
            "(it has: job_id, start_time, end_time, gpus)") in result.output


def test_an_end_time_as_schedulers_write_not_yet_is_a_running_job(tmp_path):
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,start_time,end_time,gpus\n" + "".join(
        f"{n},2026-11-30T00:00:00+01:00,{end},8\n" for n, end in enumerate(["Unknown", "None", "0", "null", "NaT", ""])))
    assert run(tmp_path, path).error is None
    assert jobs(tmp_path, "DISTINCT start_time, end_time, state") == [(datetime(2026, 11, 29, 23), None, "RUNNING")]


def test_inventory_run_twice_with_a_naive_now_takes_it_as_utc(tmp_path):
    """The second run compared the stored (aware) data-through time with a naive `now`: TypeError."""
    (tmp_path / "jobs.csv").write_text(JOBS_CSV, encoding="utf-8")
    assert run(tmp_path, tmp_path / "jobs.csv").error is None
    again = run(tmp_path, tmp_path / "jobs.csv")
    assert again.error is None and again.data_through == NOW.replace(tzinfo=timezone.utc)


@pytest.mark.parametrize("day_one, day_two", [(("a", "b"), ("b",)), (("b",), ("a", "b"))],
                         ids=["an-old-export-deleted", "an-export-with-an-earlier-attempt-added"])
def test_an_attempt_keeps_its_record_id_when_the_files_read_change_between_days(tmp_path, day_one, day_two):
    """Readers keep each record from the newest snapshot holding it (service/attribution): an id
    numbering a job's attempts among the files read that day moved the 10:05 attempt from #1
    to #0, and it counted twice (the 09:00 attempt not at all)."""
    from service.attribution import RunsQuery, runs

    folder = tmp_path / "jobs"
    folder.mkdir()
    exports = {"a": "7,2026-11-30T09:00:00Z,2026-11-30T10:00:00Z,8,r\n",  # the first attempt, requeued
               "b": "7,2026-11-30T10:05:00Z,2026-11-30T12:00:00Z,8,r\n"}
    data = {"lake": str(tmp_path / "lake"), "inventory": [{"name": "trace", "kind": "jobs-file", "path": str(folder)}],
            "attribution": {"clusters": {}}}
    for day, names in ((NOW, day_one), (NOW + timedelta(days=1), day_two)):
        for path in folder.iterdir():
            path.unlink()
        for name in names:
            (folder / f"{name}.csv").write_text("job_id,start_time,end_time,gpus,run_id\n" + exports[name])
        assert run_inventory(parse_config(data), now=day)[0].error is None
    [row] = runs(Lake(tmp_path / "lake"), parse_config(data),
                 RunsQuery.parse(since="2026-11-30", until="2026-12-01")).rows
    assert (row.run, row.jobs, row.gpu_hours) == ("r", 2, Decimal("23.333333"))  # 8 GPUs, 1 h + 1 h 55 min


MIXED_CSV = (
    "job_id,start_time,end_time,gpus,nodes,instance_ids,cluster,state,run_id,user,labels,restarts,submit_time\n"
    " 201 ,2026-11-30T10:00:00.250Z, 2026-11-30T13:00:00+02:00 ,8, p5-[001-002] , i-1 ; i-2 ,\u00a0p5\u3000,"
    "timeout,run-a,\u2028ana ,\"{\"\"k\"\": 1}\",2,2026-11-30\n"
    "202,2026-11-30 09:00,Unknown,0.5,,,,,,,,,\n"
    "203,2026-11-30T08:00:00,2026-11-30T09:00:00,1e0,p5-003,,p5,Succeeded,,bo,,0,2026-11-30T07:59:59.999999\n"
    "201,2026-11-30T12:00:00Z,NaT,8,p5-001,,p5,,,,,,\n")


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
def test_the_column_wise_reader_gives_the_rows_of_the_row_reader(tmp_path, monkeypatch, zone):
    """Files are read column-wise (connectors/jobs_file_columns.py), and row by row only when
    that reader cannot take a file: both give the same rows, to the microsecond and character."""
    import connectors.jobs_file as jobs_file

    path = tmp_path / "jobs.csv"
    path.write_text(MIXED_CSV, encoding="utf-8")
    read_row_wise = []
    row_wise = jobs_file.JobsFileConnector._row_wise
    monkeypatch.setattr(jobs_file.JobsFileConnector, "_row_wise",
                        lambda self, path, *args: read_row_wise.append(path) or row_wise(self, path, *args))
    assert run(tmp_path, path, timezone=zone).error is None
    column_wise = jobs(tmp_path, "* EXCLUDE (snapshot_date)")
    assert read_row_wise == [] and len(column_wise) == 4
    import connectors.jobs_file_columns as jobs_file_columns  # imported by jobs_file when it reads

    monkeypatch.setattr(jobs_file_columns, "column_rows", lambda *args: None)
    assert run(tmp_path / "again", path, timezone=zone).error is None
    assert jobs(tmp_path / "again", "* EXCLUDE (snapshot_date)") == column_wise and read_row_wise == [path]


def test_sql_trims_the_whitespace_python_strips():
    from connectors.jobs_file_columns import WHITESPACE

    assert WHITESPACE == "".join(c for c in map(chr, range(0x110000)) if c.isspace())


def test_snapshots_with_the_old_record_ids_are_told_to_count_twice(tmp_path, caplog):
    """A lake whose jobs-file snapshots were written with `<cluster>/<job_id>#<n>` ids: readers
    key history on the id, so the same attempt under its new id counts twice: inventory says so."""
    (tmp_path / "jobs.csv").write_text("job_id,start_time,end_time,gpus\n7,2026-11-30T09:00:00Z,2026-11-30T10:00:00Z,8\n")
    assert run(tmp_path, tmp_path / "jobs.csv").error is None
    [old] = (tmp_path / "lake" / "jobs" / "source=trace").glob("snapshot_date=*/data.parquet")
    table = pq.read_table(old)
    table = table.set_column(table.schema.get_field_index("record_id"), "record_id", pa.array(["/7#0"]))
    earlier = old.parent.parent / "snapshot_date=2026-11-30" / "data.parquet"
    earlier.parent.mkdir()
    pq.write_table(table, earlier)
    caplog.clear()
    assert run(tmp_path, tmp_path / "jobs.csv").error is None
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "1 job record(s)" in warned[0] and "count twice" in warned[0]
    earlier.unlink()
    caplog.clear()
    assert run(tmp_path, tmp_path / "jobs.csv").error is None
    assert not [r for r in caplog.records if r.levelname == "WARNING"]



def test_snapshots_dated_after_the_id_change_are_not_looked_at(tmp_path, caplog, monkeypatch):
    """The look for old ids reads only snapshots dated up to the change: a lake started later
    pays nothing for it on each inventory run, however long its history (here the change is
    moved before an earlier snapshot holding such an id: it is not read, nothing is said)."""
    import service.ingest.inventory as inventory

    (tmp_path / "jobs.csv").write_text("job_id,start_time,end_time,gpus\n7,2026-11-30T09:00:00Z,2026-11-30T10:00:00Z,8\n")
    assert run(tmp_path, tmp_path / "jobs.csv").error is None
    [current] = (tmp_path / "lake" / "jobs" / "source=trace").glob("snapshot_date=*/data.parquet")
    table = pq.read_table(current)
    earlier = current.parent.parent / "snapshot_date=2026-11-30" / "data.parquet"
    earlier.parent.mkdir()
    pq.write_table(table.set_column(table.schema.get_field_index("record_id"), "record_id", pa.array(["/7#0"])), earlier)
    monkeypatch.setattr(inventory, "OLD_JOBS_FILE_IDS_UNTIL", "2026-11-29")
    caplog.clear()
    assert run(tmp_path, tmp_path / "jobs.csv").error is None
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_a_job_across_the_hour_the_clocks_turn_back_ends_in_its_second_pass(tmp_path):
    """New York's clocks go 01:59 EDT → 01:00 EST on 2026-11-01: a job from 01:50 (EDT) to 01:10
    (EST) ran twenty minutes; it is not an end before its start (which failed the source)."""
    (tmp_path / "jobs.csv").write_text("job_id,start_time,end_time,gpus\n1,2026-11-01T01:50:00,2026-11-01T01:10:00,8\n")
    assert run(tmp_path, tmp_path / "jobs.csv", timezone="America/New_York").error is None
    assert jobs(tmp_path, "job_id, start_time, end_time") == [
        ("1", datetime(2026, 11, 1, 5, 50), datetime(2026, 11, 1, 6, 10))]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_time_the_clocks_skip_fails_naming_row_and_column_rather_than_shifting_an_hour(tmp_path, fmt):
    """New York's clocks go 01:59 EST → 03:00 EDT on 2026-03-08: no clock there shows 02:30, so a
    file holding it is not in that zone; read as 03:30 (Python's default) it moved the job by an hour."""
    path = tmp_path / f"jobs.{fmt}"
    starts = ["2026-03-08T01:00:00", "2026-03-08T02:30:00"]
    if fmt == "csv":
        path.write_text("job_id,start_time,end_time,gpus\n" + "".join(f"{n},{s},,8\n" for n, s in enumerate(starts)))
    else:
        pq.write_table(pa.table({"job_id": ["0", "1"], "start_time": [datetime.fromisoformat(s) for s in starts],
                                 "end_time": pa.array([None, None], pa.timestamp("us")), "gpus": [8, 8]}), path)
    result = cli_inventory(tmp_path, path, timezone="America/New_York")
    assert result.exit_code == 3, result.output
    assert ("row 2 (line 3), column start_time: 2026-03-08T02:30:00 does not exist in America/New_York" if fmt == "csv"
            else "row 2, column start_time: 2026-03-08T02:30:00 does not exist in America/New_York") in result.output
    assert "Traceback" not in result.output
    # the hour after the gap, and the same wall time with an offset, are read
    path.unlink()
    (tmp_path / "jobs.csv").write_text("job_id,start_time,end_time,gpus\n1,2026-03-08T03:00:00,,8\n"
                                       "2,2026-03-08T02:30:00-05:00,,8\n")
    assert run(tmp_path, tmp_path / "jobs.csv", timezone="America/New_York").error is None
    assert jobs(tmp_path, "job_id, start_time") == [("1", datetime(2026, 3, 8, 7)), ("2", datetime(2026, 3, 8, 7, 30))]


# Microsoft Philly's trace as published (cluster_job_log, flattened): its own column names and states
PHILLY_CSV = """jobid,status,vc,user,submitted_time,start_time,end_time,gpu_num
application_1,Pass,6214e9,ana,2026-11-30 09:00:00,2026-11-30 10:00:00,2026-11-30 11:00:00,8
application_2,Failed,6214e9,bo,2026-11-30 09:00:00,2026-11-30 10:00:00,2026-11-30 10:05:00,4
application_3,Killed,b436b2,ana,2026-11-30 09:00:00,2026-11-30 10:00:00,2026-11-30 10:30:00,1
application_4,Running,b436b2,cy,2026-11-30 09:00:00,2026-11-30 10:00:00,,2
application_5,killed ,b436b2,cy,2026-11-30 09:00:00,2026-11-30 10:00:00,2026-11-30 10:01:00,2
"""
NEVER_STARTED = """application_6,Killed,b436b2,cy,2026-11-30 09:00:00,None,None,8
application_7,Failed,b436b2,cy,2026-11-30 09:00:00,,,4
"""
PHILLY = {"columns": {"jobid": "job_id", "status": "state", "vc": "project", "submitted_time": "submit_time",
                      "gpu_num": "gpus"},
          "states": {"Pass": "COMPLETED", "Failed": "FAILED", "Killed": "cancelled", "Running": "RUNNING"}}


@pytest.mark.parametrize("reader", ["column-wise", "row-wise"])
def test_a_public_traces_own_states_are_read_through_states(tmp_path, monkeypatch, reader):
    """A trace's `Pass`/`Killed` are no Slurm states: `states:` maps them (case and padding
    ignored, as cells are read); `Failed` and `Running` would be read without it, the map comes first."""
    if reader == "row-wise":
        import connectors.jobs_file_columns as jobs_file_columns

        monkeypatch.setattr(jobs_file_columns, "column_rows", lambda *args: None)
    (tmp_path / "philly.csv").write_text(PHILLY_CSV)
    assert run(tmp_path, tmp_path / "philly.csv", cluster="philly", **PHILLY).error is None
    assert jobs(tmp_path, "job_id, state, project, gpus, end_time IS NULL") == [
        ("application_1", "COMPLETED", "6214e9", 8.0, False), ("application_2", "FAILED", "6214e9", 4.0, False),
        ("application_3", "CANCELLED", "b436b2", 1.0, False), ("application_4", "RUNNING", "b436b2", 2.0, True),
        ("application_5", "CANCELLED", "b436b2", 2.0, False)]


def test_a_state_neither_slurm_nor_mapped_fails_naming_row_column_and_the_config_key(tmp_path):
    (tmp_path / "philly.csv").write_text(PHILLY_CSV.replace("application_2,Failed", "application_2,Waiting"))
    result = cli_inventory(tmp_path, tmp_path / "philly.csv", **PHILLY)
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    assert ("philly.csv: row 2 (line 3), column status (read as state): 'Waiting' (1 row) is not a job state (one "
            "of BOOT_FAIL") in result.output, result.output
    assert ("STOPPED, SUSPENDED, TIMEOUT, UNKNOWN); map a trace's own states with inventory[0].states: "
            "{Waiting: <the one of those it means>}") in " ".join(result.output.split()), result.output
    # break48: the hint was {Waiting: COMPLETED}, which, copied as it stood, marked waiting jobs completed;
    # copied now, the config refuses it until a state is filled in
    copied = yaml.safe_load(re.search(r"states: (\{.*?\})", " ".join(result.output.split()))[1])
    refused = cli_inventory(tmp_path, tmp_path / "philly.csv", **{**PHILLY, "states": {**PHILLY["states"], **copied}})
    assert refused.exit_code == 2, refused.output
    assert "inventory[0].states.Waiting: '<the one of those it means>' is not a job state" in refused.output


@pytest.mark.parametrize("reader", ["column-wise", "row-wise"])
def test_a_traces_states_neither_slurm_nor_mapped_are_each_named_with_their_rows(tmp_path, monkeypatch, reader):
    """break50b: the error named the first unknown state alone, so a trace with five took five
    runs to map. It names each, most rows first, with its rows (the first SHOWN_STATES, the rest
    counted; `Queued` and `queued` are one, as `states:` compares them), and the `states:` entry
    mapping those it names."""
    if reader == "row-wise":
        import connectors.jobs_file_columns as jobs_file_columns

        monkeypatch.setattr(jobs_file_columns, "column_rows", lambda *args: None)
    row = "application_{},{},b436b2,cy,2026-11-30 09:00:00,2026-11-30 10:00:00,2026-11-30 10:30:00,1\n"
    states = ["Waiting", "Queued ", "Waiting", "Running", "queued", " Waiting"] + [f"s{n}" for n in range(23)]
    (tmp_path / "philly.csv").write_text(PHILLY_CSV + "".join(row.format(10 + n, state)
                                                              for n, state in enumerate(states)))
    result = cli_inventory(tmp_path, tmp_path / "philly.csv", **PHILLY)
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    said = " ".join(result.output.split())
    assert ("philly.csv: row 6 (line 7), column status (read as state): 'Waiting' (3 rows), 'Queued' (2 rows), "
            "'s0' (1 row), 's1' (1 row), ") in said, result.output
    assert "'s17' (1 row) and 5 more value(s) (5 rows) are not job states (one of BOOT_FAIL" in said, result.output
    copied = yaml.safe_load(re.search(r"states: (\{.*?\})", said)[1])
    assert list(copied) == ["Waiting", "Queued", *(f"s{n}" for n in range(18))]


@pytest.mark.parametrize("state, key", [("Not Started", "Not Started"), ("No", '"No"'), ("Killed: OOM", '"Killed: OOM"')])
def test_a_multi_word_states_hint_names_the_whole_value_as_yaml_reads_it_back(tmp_path, state, key):
    """`states` looks a cell up whole (stripped, any case): the hint named a multi-word state by
    its first word (`{Not: …}`), which, filled in and copied, mapped nothing and the source failed
    again; a value YAML would read as another (No: false) or not at all (a `: `) is quoted."""
    (tmp_path / "philly.csv").write_text(PHILLY_CSV.replace("application_2,Failed", f"application_2,{state}"))
    result = cli_inventory(tmp_path, tmp_path / "philly.csv", **PHILLY)
    assert result.exit_code == 3, result.output
    said = " ".join(result.output.split())
    assert f"states: {{{key}: <the one of those it means>}}" in said, result.output
    copied = yaml.safe_load(re.search(r"states: (\{.*?\})", said)[1].replace("<the one of those it means>", "PENDING"))
    assert copied == {state: "PENDING"}
    assert run(tmp_path, tmp_path / "philly.csv", **{**PHILLY, "states": {**PHILLY["states"], **copied}}).error is None
    assert jobs(tmp_path, "job_id, state")[1] == ("application_2", "PENDING")


@pytest.mark.parametrize("reader", ["column-wise", "row-wise"])
def test_a_trace_job_that_never_started_is_left_out_and_said(tmp_path, monkeypatch, caplog, reader):
    """Public traces list jobs killed or failed while queued, without a start: each failed the
    whole trace as "a job without a start cannot hold GPUs". Their state says they never ran,
    so they are left out (they held no GPUs), said in one line."""
    if reader == "row-wise":
        import connectors.jobs_file_columns as jobs_file_columns

        monkeypatch.setattr(jobs_file_columns, "column_rows", lambda *args: None)
    (tmp_path / "philly.csv").write_text(PHILLY_CSV + NEVER_STARTED)
    assert run(tmp_path, tmp_path / "philly.csv", **PHILLY).error is None
    assert [job for (job,) in jobs(tmp_path, "job_id")] == [f"application_{n}" for n in range(1, 6)]
    assert (f"{tmp_path / 'philly.csv'}: 2 row(s) without a start_time, whose state says they never ran (cancelled, "
            "failed or pending before they started), are left out: they held no GPUs; the first, row 6 (line 7)"
            ) in caplog.text


KILLED_UNENDED = """application_8,Killed,b436b2,cy,2026-11-30 09:00:00,2026-11-30 10:10:00,None,4
application_8,Killed,b436b2,cy,2026-11-30 09:00:00,2026-11-30 10:20:00,2026-11-30 10:40:00,4
application_9,Failed,b436b2,cy,2026-11-30 09:00:00,2026-11-30 10:00:00,,8
"""


@pytest.mark.parametrize("reader", ["column-wise", "row-wise"])
def test_a_trace_job_that_ended_without_an_end_time_holds_no_gpu_time_and_is_said(tmp_path, monkeypatch, caplog,
                                                                                  reader):
    """break50b: a trace's attempt killed or failed (Philly writes `None` for its end) read as
    running held its 4 GPUs to the data's end, 1,251 GPU-hours of a 30-minute job. A state a job
    ends in with a start and no end ends at its start (no GPU time), said in one line with the
    count; a RUNNING one without an end still runs."""
    import connectors.jobs_file as jobs_file
    import connectors.jobs_file_columns as jobs_file_columns

    read_row_wise = []
    row_wise = jobs_file.JobsFileConnector._row_wise
    monkeypatch.setattr(jobs_file.JobsFileConnector, "_row_wise",
                        lambda self, path, *args: read_row_wise.append(path) or row_wise(self, path, *args))
    if reader == "row-wise":
        monkeypatch.setattr(jobs_file_columns, "column_rows", lambda *args: None)
    path = tmp_path / "philly.csv"
    path.write_text(PHILLY_CSV + KILLED_UNENDED)
    with caplog.at_level("WARNING"):
        assert run(tmp_path, path, **PHILLY).error is None
    assert read_row_wise == ([path] if reader == "row-wise" else [])
    assert jobs(tmp_path, "job_id, state, start_time, end_time")[3:] == [
        ("application_4", "RUNNING", datetime(2026, 11, 30, 10), None),
        ("application_5", "CANCELLED", datetime(2026, 11, 30, 10), datetime(2026, 11, 30, 10, 1)),
        ("application_8", "CANCELLED", datetime(2026, 11, 30, 10, 10), datetime(2026, 11, 30, 10, 10)),
        ("application_8", "CANCELLED", datetime(2026, 11, 30, 10, 20), datetime(2026, 11, 30, 10, 40)),
        ("application_9", "FAILED", datetime(2026, 11, 30, 10), datetime(2026, 11, 30, 10))]
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: 2 job record(s) in a state a job ends in (COMPLETED, FAILED, CANCELLED, ...) have a start and no "
        "end: each is counted as ending at its start, holding no GPU time, not as running to the data's end; the "
        "first, job application_8 (CANCELLED): write the end its scheduler recorded"]


def test_a_clock_ahead_leaves_each_days_job_history_where_it_was_taken(tmp_path):
    """Tags and other states take the clock-ahead snapshot's date so the one read last is the
    state (test_inventory_tags_logs); job records are history: filed under that date too, each
    day's run replaced the day before's, and every job only it held was lost (its GPU hours
    idle), one a day for as long as the clock had run ahead."""
    path = tmp_path / "jobs.csv"
    header = "job_id,start_time,end_time,gpus\n"
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "trace", "kind": "jobs-file", "path": str(path)}]})
    for job, day in (("ahead", NOW + timedelta(days=40)), ("x", NOW + timedelta(days=1)), ("y", NOW + timedelta(days=2))):
        path.write_text(header + f"{job},2026-11-30T10:00:00Z,2026-11-30T11:00:00Z,8\n")
        [outcome] = run_inventory(config, now=day)
        assert outcome.error is None, outcome.error
    assert sorted(jobs(tmp_path, "job_id, CAST(snapshot_date AS VARCHAR)")) == [
        ("ahead", "2027-01-10"), ("x", "2026-12-02"), ("y", "2026-12-03")]


def test_a_jobs_snapshot_a_clock_ahead_wrote_is_set_aside_so_later_records_of_its_jobs_count(tmp_path, monkeypatch,
                                                                                             caplog):
    """A run 40 days ahead saw job 7 running; the clock set right, the next run reads it ended at
    11:00, but the ahead snapshot's record was the newest and kept 7 running until the calendar
    passed its date (then for good to that date)."""
    path = tmp_path / "jobs.csv"
    header = "job_id,start_time,end_time,gpus\n"
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "trace", "kind": "jobs-file", "path": str(path)}]})
    path.write_text(header + "7,2026-11-30T10:00:00Z,,8\n")
    with monkeypatch.context() as clock_ahead:  # the record stamped by the same clock
        clock_ahead.setattr(snapshot_ledger, "utc_now_iso", lambda: "2099-01-01T00:00:00Z")
        run_inventory(config, now=NOW + timedelta(days=40))
    path.write_text(header + "7,2026-11-30T10:00:00Z,2026-11-30T11:00:00Z,8\n")
    [outcome] = run_inventory(config, now=NOW + timedelta(days=1))
    assert outcome.error is None, outcome.error
    assert jobs(tmp_path, "job_id, CAST(end_time AS VARCHAR), CAST(snapshot_date AS VARCHAR)") == [
        ("7", "2026-11-30 11:00:00", "2026-12-02")]
    assert "written by a clock that ran ahead" in caplog.text and "snapshot_date=2027-01-10" in caplog.text
    assert list((tmp_path / "lake" / SET_ASIDE).rglob("*.parquet"))


@pytest.mark.parametrize("row, says", [
    # an unquoted hostlist: its second node was a seventh field, read as nothing before
    ("3,r3,2026-12-01T00:00:00Z,2026-12-01T01:00:00Z,8,p5-016,p5-015",
     "row 1 (line 2): 7 fields where the header has 6 (a list of nodes written unquoted? quote it: "
     "\"p5-016,p5-015\")"),
    # a row cut short: its missing nodes were read as a pool job
    ("3,r3,2026-12-01T00:00:00Z,2026-12-01T01:00:00Z,8", "row 1 (line 2): 5 fields where the header has 6"),
])
def test_a_csv_row_with_more_or_fewer_fields_than_the_header_fails_naming_its_line_and_counts(tmp_path, row, says):
    path = tmp_path / "jobs.csv"
    path.write_text(f"job_id,run_id,start_time,end_time,gpus,nodes\n{row}\n")
    result = cli_inventory(tmp_path, path)
    assert result.exit_code == 3, result.output
    assert f"{path}" in result.output and says in result.output, result.output
    assert not (tmp_path / "lake" / "jobs").exists()


@pytest.mark.parametrize("header, says", [
    ("job_id,start_time,finish,gpus", "add it, or map the file's own name to it with inventory[0].columns, "
                                      "e.g. {finish: end_time}"),
    ("job_id,start_time,end,gpus", "e.g. {end: end_time}"),
])
def test_a_missing_column_hints_at_mapping_the_files_own_name_to_it_not_gpu_num(tmp_path, header, says):
    # the hint was "e.g. {gpu_num: gpus}" whichever column was missing
    path = tmp_path / "jobs.csv"
    path.write_text(f"{header}\n1,2026-11-30T00:00:00Z,2026-11-30T01:00:00Z,8\n")
    result = cli_inventory(tmp_path, path)
    assert result.exit_code == 3 and "missing column(s) end_time" in result.output, result.output
    assert says in " ".join(result.output.split()) and "gpu_num" not in result.output, result.output
