"""slurm-jobs from files captured from the real cluster of tests/slurm_cluster.py (see
tests/data/slurm/README.md): sacct --json, sacct --parsable2 and slurmrestd's answer give
the same rows; running jobs, requeues, arrays, steps and never-started jobs; bad input named."""

from __future__ import annotations

import gzip
import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA

from connectors.slurm_json import json_attempts
from connectors.slurm_records import alloc_tres_gpus, comment_labels, rows_of, slurm_duration
from service.cli.main import cli
from service.core.config import parse_config
from service.core.errors import ConfigError
from service.core.lake import Lake
from service.ingest.inventory import run_inventory

SLURM = DATA / "slurm"
NOW = datetime(2026, 12, 2, 6)
COLUMNS = "record_id, job_id, run_id, state, submit_time, start_time, end_time, gpus, nodes, restarts"


def t(second: int, minute: int = 19) -> datetime:
    return datetime(2026, 12, 2, 1, minute, second)


NODE = ["gpu-node-01"]
# What the workload of tests/slurm_cluster.py did, as sacct recorded it (tests/data/slurm/sacct.json).
SETTLED = [
    ("spendlake/1@1796174389", "1", "1", "TIMEOUT", t(49), t(50), t(17, 21), 1.0, NODE, 0),
    ("spendlake/2@1796174389", "2", "llama-70b-r1", "COMPLETED", t(49), t(50), t(54), 2.0, NODE, 0),
    ("spendlake/3@1796174389", "3", "sft-v2", "FAILED", t(49), t(50), t(52), 1.0, NODE, 0),
    ("spendlake/4@1796174389", "4", "4", "CANCELLED", t(49), t(50), t(51), 2.0, NODE, 0),
    ("spendlake/5@1796174389", "5", "5", "REQUEUED", t(49), t(50), t(51), 1.0, NODE, 0),  # first attempt
    ("spendlake/5@1796174391", "5", "5", "COMPLETED", t(51), t(54), t(56), 1.0, NODE, 1),  # the restart
    ("spendlake/6@1796174389", "6", "6", "COMPLETED", t(49), t(50), t(52), 1.0, NODE, 0),  # steps not counted
    ("spendlake/7@1796174389", "7_1", "7", "COMPLETED", t(49), t(50), t(52), 0.0, NODE, 0),  # array task 1
    ("spendlake/8@1796174389", "8", "8", "CANCELLED", t(49), t(49), t(49), 0.0, None, 0),  # never allocated
    ("spendlake/9@1796174389", "7_0", "7", "COMPLETED", t(49), t(50), t(52), 0.0, NODE, 0),  # array task 0
]


def run(tmp_path: Path, now: datetime = NOW, **source):
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "slurm", "kind": "slurm-jobs", **source}]})
    [outcome] = run_inventory(config, now=now)
    return outcome


def jobs(tmp_path: Path, columns: str = COLUMNS) -> list[tuple]:
    con = Lake(tmp_path / "lake").query()
    try:
        return con.execute(f"SELECT {columns} FROM jobs ORDER BY record_id").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("name", ["sacct.json", "sacct-parsable2.txt", "slurmrestd-jobs.json"])
def test_every_capture_gives_one_row_per_allocation_and_attempt(tmp_path, name):
    outcome = run(tmp_path, path=str(SLURM / name))
    assert outcome.error is None and outcome.rows == {"jobs snapshot_date=2026-12-02": 10}
    assert jobs(tmp_path) == SETTLED


def test_what_a_slurm_row_keeps(tmp_path):
    assert run(tmp_path, path=str(SLURM / "sacct.json")).error is None
    rows = {r[0]: r[1:] for r in jobs(tmp_path, "job_id, scheduler, cluster, user, account, partition, qos, name, "
                                                "labels, team, job_type, instance_ids")}
    assert rows["2"] == ("slurm", "spendlake", "root", "pretrain", "train", "normal", "pretrain-llama-r1",
                         {"run": "llama-70b-r1", "job_type": "pretrain", "wckey": "llama-70b",
                          "comment": '{"run": "llama-70b-r1", "job_type": "pretrain"}'}, None, None, None)
    assert rows["3"][7] == {"run": "sft-v2", "job_type": "sft", "wckey": "sft-v2", "comment": "run=sft-v2 job_type=sft"}
    assert rows["4"][7] is None  # no wckey (sacct's "*"), no comment
    assert rows["7_0"][2:4] == ("nobody", "eval")


@pytest.mark.parametrize("name", ["sacct-running.json", "sacct-running-parsable2.txt"])
def test_running_jobs_have_no_end(tmp_path, name):
    assert run(tmp_path, path=str(SLURM / name)).error is None
    rows = {r[0]: r for r in jobs(tmp_path)}
    assert rows["spendlake/1@1796174389"][3:] == ("RUNNING", t(49), t(50), None, 1.0, NODE, 0)
    assert rows["spendlake/3@1796174389"][3] == "FAILED"


def test_a_record_in_several_files_counts_once_and_the_ended_one_wins(tmp_path):
    folder = tmp_path / "sacct"
    folder.mkdir()
    shutil.copy(SLURM / "sacct.json", folder / "a-settled.json")
    (folder / "b-running.json.gz").write_bytes(gzip.compress((SLURM / "sacct-running.json").read_bytes()))
    shutil.copy(SLURM / "sacct-running-parsable2.txt", folder / "c-running.txt")
    assert run(tmp_path, path=str(folder)).error is None
    assert jobs(tmp_path) == SETTLED


def requeued_in_its_submit_second() -> dict:
    """slurmrestd's answer (tests/data/slurm/slurmrestd-jobs.json) with job 5 requeued in the
    second it was submitted: Slurm sets the restart's submit time to the requeue's, so both
    attempts are submitted at 01:19:49."""
    data = json.loads((SLURM / "slurmrestd-jobs.json").read_text())
    [restart] = [r for r in data["jobs"] if r["job_id"] == 5 and r["state"]["current"] == "COMPLETED"]
    restart["time"]["submission"] = 1796174389
    return data


BOTH_ATTEMPTS = [("spendlake/5@1796174389", "COMPLETED", t(54), 1),  # the latest keeps the id
                 ("spendlake/5@1796174389~1796174390", "REQUEUED", t(50), 0)]  # the earlier: its start after it


def test_a_job_requeued_in_its_submit_second_keeps_both_attempts():
    rows = sorted((r["record_id"], r["state"], r["start_time"], r["restarts"])
                  for r in rows_of(json_attempts(requeued_in_its_submit_second(), None), ()) if r["job_id"] == "5")
    assert rows == BOTH_ATTEMPTS
    pending = requeued_in_its_submit_second()  # the restart not started yet
    [restart] = [r for r in pending["jobs"] if r["job_id"] == 5 and r["state"]["current"] == "COMPLETED"]
    restart["state"]["current"], restart["time"]["start"], restart["time"]["end"] = "PENDING", 0, 0
    assert sorted(r["record_id"] for r in rows_of(json_attempts(pending, None), ()) if r["job_id"] == "5") == [
        "spendlake/5@1796174389", "spendlake/5@1796174389~1796174390"]


def test_a_job_requeued_in_its_submit_second_keeps_both_attempts_from_sacct_text(tmp_path):
    text = (SLURM / "sacct-parsable2.txt").read_text().replace(
        "|COMPLETED|0:0|0:0|BeginTime|2026-12-02T01:19:51|", "|COMPLETED|0:0|0:0|BeginTime|2026-12-02T01:19:49|")
    (tmp_path / "sacct.txt").write_text(text)
    assert run(tmp_path, path=str(tmp_path / "sacct.txt")).error is None
    assert [row for row in jobs(tmp_path, "record_id, state, start_time, restarts, job_id") if row[4] == "5"] == [
        (*row, "5") for row in BOTH_ATTEMPTS]


def test_42_an_empty_or_missing_location_exits_3_naming_it(tmp_path):
    (tmp_path / "empty").mkdir()
    for path, says in ((tmp_path / "empty", "the directory holds no files"), (tmp_path / "nope", "no such file")):
        (tmp_path / "spendlake.yaml").write_text(json.dumps({
            "lake": str(tmp_path / "lake"), "inventory": [{"name": "slurm", "kind": "slurm-jobs", "path": str(path)}]}))
        result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory"])
        assert result.exit_code == 3 and f"{path}: {says}" in result.output


HEADER = "JobID|JobIDRaw|State|Submit|Start|End|NodeList|AllocTRES"
GOOD = "12|12|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|2026-12-01T11:00:05|p5-[001-002]|gres/gpu=16"


@pytest.mark.parametrize("text, says", [
    ("JobID|State|Start\n1|COMPLETED|2026-12-01T10:00:00\n",
     "line 1: not a sacct --parsable2 header with JobIDRaw, Submit, End, NodeList, AllocTRES"),
    (f"{HEADER}\n{GOOD}\n12|12|COMPLETED|x|y\n", "line 3: 5 fields where the header has 8"),
    (f"{HEADER}\n13|13|DREAMING|2026-12-01T10:00:00|Unknown|Unknown|None assigned|\n",
     "line 2 (job 13): State 'DREAMING' is not a Slurm job state"),
    (f"{HEADER}\n13|13|RUNNING|2026-12-01T10:00:00|12/01-10:00:05|Unknown|p5-001|gres/gpu=8\n",
     "line 2 (job 13): Start '12/01-10:00:05' is not a time such as 2026-12-01T20:47:05"),
    (f"{HEADER}\n13|13|RUNNING|2026-12-01T10:00:00|2026-12-01T10:00:05|Unknown|p5-[001-|gres/gpu=8\n",
     "line 2 (job 13): NodeList: '[' without ']'"),
    ("hello\n", "line 1: not a sacct --parsable2 header"),  # the file named as path is read, whatever it holds
    ("null", 'JSON null is not a sacct --json document ({"jobs": [...]})'),
    ("[]", 'a JSON list is not a sacct --json document'),
    ('{"meta": {}, "errors": []}', 'not a sacct --json document: no "jobs" list'),
    # review51b: a second "jobs" member, empty or after a null one, read as json.loads would not
    ('{"jobs": [], "jobs": []}', '"jobs" twice in one document'),
    ('{"jobs": null, "jobs": []}', '"jobs" twice in one document'),
    ('{"jobs": [', "not JSON"),
    ('{"jobs": [{"job_id": 4, "state": {"current": "SLEEPING"}}]}', "jobs[0] (job 4): BadRecord: state 'SLEEPING'"),
    # sacct --json when slurmdbd fails: its errors, and no jobs (stored as a day without jobs before)
    ('{"meta": {}, "errors": [{"error": "Unable to connect to database", "error_number": 7000}], "jobs": []}',
     "sacct wrote error(s) into this document: Unable to connect to database"),
])
def test_bad_files_exit_3_naming_file_line_and_reason(tmp_path, text, says):
    path = tmp_path / "sacct.out"
    path.write_text(text)
    (tmp_path / "spendlake.yaml").write_text(json.dumps({
        "lake": str(tmp_path / "lake"), "inventory": [{"name": "slurm", "kind": "slurm-jobs", "path": str(path)}]}))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory"])
    assert result.exit_code == 3 and f"{path}: {says}" in result.output, result.output
    assert "Traceback" not in result.output


def test_an_ended_job_without_an_end_time_ends_after_its_elapsed_time(tmp_path):
    path = tmp_path / "sacct.txt"
    path.write_text("JobID|JobIDRaw|State|Submit|Start|End|Elapsed|NodeList|AllocTRES|Cluster\n"
                    "12|12|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|Unknown|1-01:00:00|p5-[001-002]|"
                    "billing=16,gres/gpu=16,gres/gpu:h100=16|\n"
                    "13|13|RUNNING|2026-12-01T10:00:00|2026-12-01T10:00:05|Unknown|00:30|p5-003|gres/gpu:1g.10gb=7|\n")
    assert run(tmp_path, path=str(path), cluster="p5", timezone="America/New_York").error is None
    # 10:00:05 in New York is 15:00:05 UTC; a day and an hour later is 16:00:05 the next day
    assert jobs(tmp_path, "record_id, end_time, gpus, nodes") == [
        ("p5/12@1796137200", datetime(2026, 12, 2, 16, 0, 5), 16.0, ["p5-001", "p5-002"]),
        ("p5/13@1796137200", None, 1.0, ["p5-003"])]  # 7 × 1g.10gb = one GPU


def test_the_running_attempt_of_a_requeued_job_keeps_the_jobs_run(tmp_path):
    """Slurm 22.05 stores the comment when an attempt ends: the running attempt of a requeued
    job shows none. It is the same job (and run); another job of the same name is not."""
    path = tmp_path / "sacct.txt"
    path.write_text(
        "JobID|JobIDRaw|JobName|WCKey|Comment|State|Submit|Start|End|NodeList|AllocTRES\n"
        "41|41|llama-r1|llama|run=llama-r1 experiment=llama|REQUEUED|2026-12-01T00:00:00|2026-12-01T00:00:05|"
        "2026-12-01T05:00:00|p5-001|gres/gpu=8\n"
        "41|41|llama-r1|llama||RUNNING|2026-12-01T05:00:00|2026-12-01T05:01:00|Unknown|p5-002|gres/gpu=8\n"
        "42|42|llama-r1|llama||RUNNING|2026-12-01T06:00:00|2026-12-01T06:01:00|Unknown|p5-003|gres/gpu=8\n")
    assert run(tmp_path, path=str(path), cluster="p5").error is None
    labels = {"run": "llama-r1", "experiment": "llama", "wckey": "llama", "comment": "run=llama-r1 experiment=llama"}
    assert jobs(tmp_path, "job_id, state, run_id, restarts, labels") == [
        ("41", "REQUEUED", "llama-r1", 0, labels), ("41", "RUNNING", "llama-r1", 1, labels),
        ("42", "RUNNING", "42", 0, {"wckey": "llama"})]


@pytest.mark.parametrize("text, seconds", [
    ("00:01:27", 87), ("1-02:03:04", 93784), ("03:04", 184), ("12:00.250", 720.25), ("UNLIMITED", None),
    ("Partition_Limit", None), ("", None), ("INVALID", None)])
def test_slurm_durations(text, seconds):
    assert slurm_duration(text) == seconds


@pytest.mark.parametrize("tres, gpus", [
    ("billing=1,cpu=1,gres/gpu=2,node=1", 2), ("cpu=1,mem=0,node=1", 0), ("", 0),
    ("gres/gpu=8,gres/gpu:h100=8", 8), ("gres/gpu:h100=4,gres/gpu:a100=4", 8),
    ("gres/gpu=2,gres/gpu:3g.40gb=1,gres/gpu:1g.10gb=1", 4 / 7), ("gres/gpumem=80G,gres/gpu=1", 1)])
def test_gpus_from_alloc_tres(tres, gpus):
    assert alloc_tres_gpus(tres) == pytest.approx(gpus)


@pytest.mark.parametrize("comment, labels", [
    ('{"run": "r1", "seed": 3}', {"run": "r1", "seed": "3"}), ("run=sft-v2 job_type=sft", {"run": "sft-v2", "job_type": "sft"}),
    ('team=nlp, project="big model";', {"team": "nlp", "project": "big model"}), ("resubmitted after OOM", {}),
    ("run=x but also words", {"run": "x"}), ("{not json", {}), ("", {}), (None, {})])
def test_labels_a_comment_carries(comment, labels):
    assert comment_labels(comment) == labels


def newer_shape(record: dict) -> dict:
    """A v0.0.38 record as Slurm 23.02+ writes it: numbers as {set, infinite, number}, state a list."""
    record = json.loads(json.dumps(record))

    def wrap(value):
        return {"set": value is not None, "infinite": False, "number": value or 0}

    record["time"] = {k: wrap(v) if k in ("start", "end", "submission") else v for k, v in record["time"].items()}
    record["state"]["current"] = [record["state"]["current"]]
    record["array"]["task_id"], record["het"]["job_offset"] = wrap(record["array"]["task_id"]), wrap(None)
    for item in record["tres"]["allocated"]:
        item["count"] = wrap(item["count"])
    return record


def test_slurm_23_shapes_and_heterogeneous_jobs_read_alike():
    data = json.loads((SLURM / "sacct.json").read_text())
    newer = {"jobs": [newer_shape(r) for r in data["jobs"]]}
    assert list(rows_of(json_attempts(newer, None), ())) == list(rows_of(json_attempts(data, None), ()))
    [component] = [r for r in data["jobs"] if r["job_id"] == 2]
    component = json.loads(json.dumps(component)) | {"job_id": 21, "het": {"job_id": 20, "job_offset": 1}}
    [row] = rows_of(json_attempts({"jobs": [component]}, None), ("run",))
    assert (row["job_id"], row["run_id"], row["gpus"]) == ("20+1", "llama-70b-r1", 2.0)
    component["comment"]["job"] = None
    [row] = rows_of(json_attempts({"jobs": [component]}, None), ("run",))
    assert row["run_id"] == "20"  # the heterogeneous job as submitted


@pytest.mark.parametrize("source, says", [
    ({}, "set exactly one of path (sacct output files) or url (slurmrestd)"),
    ({"path": "/x", "url": "http://slurm:6820"}, "set exactly one of path"),
    ({"path": "/x", "token_env": "SLURM_JWT"}, "token_env, user_name and api_version apply to url only"),
    ({"url": "http://slurm:6820", "api_version": "0.0.38"}, "inventory[0].api_version: must be an API version such as v0.0.40, not '0.0.38'"),
    ({"url": "http://slurm:6820", "token_env": "SLURM JWT"}, "inventory[0].token_env: must be an environment variable's name"),
    ({"url": "slurm:6820"}, "inventory[0].url: must be a URL starting with http:// or https://"),
    ({"path": "/x", "regions": ["us-east-1"]}, "inventory[0].regions: kind slurm-jobs takes no such key"),
])
def test_bad_config_is_exit_2_with_the_dotted_path(source, says):
    with pytest.raises(ConfigError) as error:
        parse_config({"inventory": [{"name": "slurm", "kind": "slurm-jobs", **source}]})
    assert error.value.exit_code == 2 and says in str(error.value)


@pytest.mark.parametrize("name", ["eval\u2028nightly", "eval\x0cnightly", "eval\x1dnightly", "eval\x85nightly"])
def test_a_parsable2_line_breaks_only_at_its_newline(tmp_path, name):
    # str.splitlines() also splits at U+2028, form feed, group separators and NEL: a job name
    # holding one made a line of too few fields; CRLF line ends (a copy through Windows) read too
    path = tmp_path / "sacct.txt"
    header = "JobID|JobIDRaw|JobName|State|Submit|Start|End|NodeList|AllocTRES"
    row = f"12|12|{name}|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|2026-12-01T11:00:05|p5-001|gres/gpu=8"
    path.write_text(f"\ufeff{header}\r\n{row}\r\n", encoding="utf-8", newline="")  # with a BOM, as Windows saves
    assert run(tmp_path, path=str(path)).error is None
    assert jobs(tmp_path, "name, nodes, gpus") == [(name, ["p5-001"], 8.0)]


def cli_inventory(tmp_path: Path, path: Path):
    (tmp_path / "spendlake.yaml").write_text(json.dumps({
        "lake": str(tmp_path / "lake"), "inventory": [{"name": "slurm", "kind": "slurm-jobs", "path": str(path)}]}))
    return CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory"])


@pytest.mark.parametrize("name, content, says", [
    ("sacct.json", b"", "0 bytes: counted as no jobs"),  # `sacct --json > sacct.json` not yet written
    ("sacct.txt", b"\n\n", "only blank lines: counted as no jobs"),
    ("sacct.json.gz", gzip.compress(b"", mtime=0), "0 bytes: counted as no jobs"),
    ("sacct.txt", f"{HEADER}\n".encode(), None),  # a day without jobs, as sacct writes it
    ("sacct.json", b'{"jobs": [], "meta": {}, "errors": []}', None),
])
def test_56_an_empty_file_counts_as_no_jobs_and_says_so_in_one_line(tmp_path, caplog, name, content, says):
    folder = tmp_path / "sacct"
    folder.mkdir()
    (folder / name).write_bytes(content)
    (folder / "z-good.txt").write_text(f"{HEADER}\n{GOOD}\n")
    with caplog.at_level("INFO"):
        assert run(tmp_path, path=str(folder)).error is None
    assert jobs(tmp_path, "job_id") == [("12",)]
    lines = [r.getMessage() for r in caplog.records if str(folder / name) in r.getMessage()]
    assert len(lines) == 1 and (says is None or says in lines[0]), lines
    alone = run(tmp_path / "alone", path=str(folder / name))
    assert alone.error is None and alone.rows == {"jobs snapshot_date=2026-12-02": 0}


@pytest.mark.parametrize("content, says", [
    (SLURM.joinpath("sacct.json").read_bytes()[:5000], "the file ends mid-document (cut short while being written?)"),
    (f"{HEADER}\n{GOOD}\n{GOOD[:-1]}".encode(),  # gres/gpu=16 cut to gres/gpu=1: one line, one GPU, silently
     "line 3, the last, has no line end: the file was cut short"),
    (gzip.compress(f"{HEADER}\n{GOOD}\n".encode(), mtime=0)[:-6], "not a whole gzip file"),
])
def test_5_a_file_cut_short_fails_naming_it_and_what_next(tmp_path, content, says):
    path = tmp_path / "sacct.out"
    path.write_bytes(content)
    result = cli_inventory(tmp_path, path)
    assert result.exit_code == 3 and f"{path}: " in result.output and says in result.output, result.output
    assert "re-run when the job writing it has finished" in result.output


def test_41_a_directory_skips_files_that_are_not_sacct_output_one_line_each(tmp_path, caplog):
    folder = tmp_path / "sacct"
    folder.mkdir()
    (folder / "2026-12-01.txt").write_text(f"{HEADER}\n{GOOD}\n")
    (folder / "README.txt").write_text("sacct exports, written by cron at 01:00\n")
    (folder / "2026-12-01.txt~").write_bytes(b"x")  # an editor's backup
    (folder / ".2026-12-01.txt.swp").write_bytes(b"b0VIM 9.0\x00\x00")  # hidden: never read
    with caplog.at_level("WARNING"):
        assert run(tmp_path, path=str(folder)).error is None
    assert jobs(tmp_path, "job_id") == [("12",)]
    assert sorted(r.getMessage() for r in caplog.records) == [
        f"{folder / name}: not sacct output (neither JSON nor a header of sacct's column names): skipped"
        for name in ("2026-12-01.txt~", "README.txt")]
    (folder / "2026-12-01.txt").unlink()
    result = cli_inventory(tmp_path, folder)
    assert result.exit_code == 3 and f"{folder}: none of its 2 file(s) is sacct output" in result.output


def test_a_record_ending_before_it_starts_holds_no_gpu_time_and_is_said(tmp_path, caplog):
    path = tmp_path / "sacct.txt"
    path.write_text(f"{HEADER}\n{GOOD}\n"
                    "15|15|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|2026-12-01T09:59:00|p5-001|gres/gpu=8\n")
    with caplog.at_level("WARNING"):
        assert run(tmp_path, path=str(path)).error is None
    assert jobs(tmp_path, "job_id, start_time, end_time") == [
        ("12", datetime(2026, 12, 1, 10, 0, 5), datetime(2026, 12, 1, 11, 0, 5)),
        ("15", datetime(2026, 12, 1, 10, 0, 5), datetime(2026, 12, 1, 10, 0, 5))]
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: 1 record(s) end before they start (clock skew?), counted as holding no GPU time; the first, "
        "job 15: End 2026-12-01T09:59:00, Start 2026-12-01T10:00:05"]


def test_times_as_sacct_writes_them_with_and_without_a_zone(tmp_path):
    path = tmp_path / "sacct.txt"
    path.write_text(f"{HEADER}\n"
                    "16|16|COMPLETED|None|2026-12-01T10:00:05+01:00|2026-12-01T10:30:00Z|p5-001|gres/gpu=8\n"
                    "17|17|PENDING|2026-12-01T10:00:00|Unknown|Unknown|None assigned|\n"
                    "18|18|PENDING|2026-12-01T10:00:00|0|0|None assigned|billing=1\n"
                    "19|19|RUNNING|2026-12-01T10:00:00|2026-12-01T10:00:00|Unknown|gpu[1-3]-ib|gres/gpu:h100=8\n")
    assert run(tmp_path, path=str(path), timezone="Europe/Paris").error is None
    assert jobs(tmp_path, "job_id, submit_time, start_time, end_time, nodes, gpus") == [
        ("16", None, datetime(2026, 12, 1, 9, 0, 5), datetime(2026, 12, 1, 10, 30), ["p5-001"], 8.0),
        ("17", datetime(2026, 12, 1, 9), None, None, None, 0.0),
        ("18", datetime(2026, 12, 1, 9), None, None, None, 0.0),
        ("19", datetime(2026, 12, 1, 9), datetime(2026, 12, 1, 9), None, ["gpu1-ib", "gpu2-ib", "gpu3-ib"], 8.0)]


def test_bytes_that_are_not_utf8_in_a_job_name_are_read_and_said(tmp_path, caplog):
    path = tmp_path / "sacct.txt"
    path.write_bytes(f"{HEADER}|JobName\n{GOOD}|caf".encode() + b"\xe9\n")
    with caplog.at_level("WARNING"):
        assert run(tmp_path, path=str(path)).error is None
    assert jobs(tmp_path, "name") == [("caf\ufffd",)]
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: line 2: byte 0xe9 is not UTF-8: read as U+FFFD, as any later (a job name or comment?)"]


def test_a_job_running_in_an_old_file_that_later_files_never_list_is_said(tmp_path, caplog):
    """Daily exports: the job is running on the 1st; the 3rd's export (window from the 2nd)
    does not list it, so it ended unseen. It stays running (no guessed end), said in one line."""
    folder = tmp_path / "sacct"
    folder.mkdir()
    (folder / "2026-12-01.txt").write_text(
        f"{HEADER}\n"
        "30|30|RUNNING|2026-12-01T08:00:00|2026-12-01T08:00:05|Unknown|p5-001|gres/gpu=8\n"
        "31|31|RUNNING|2026-12-01T08:00:00|2026-12-01T08:00:05|Unknown|p5-002|gres/gpu=8\n"
        "32|32|RUNNING|2026-12-01T08:00:00|2026-12-01T08:00:05|Unknown|p5-003|gres/gpu=8\n")
    (folder / "2026-12-03.txt").write_text(
        f"{HEADER}\n"
        "31|31|COMPLETED|2026-12-01T08:00:00|2026-12-01T08:00:05|2026-12-02T09:00:00|p5-002|gres/gpu=8\n"
        "32|32|RUNNING|2026-12-01T08:00:00|2026-12-01T08:00:05|Unknown|p5-003|gres/gpu=8\n"
        "33|33|COMPLETED|2026-12-03T00:00:00|2026-12-03T00:00:05|2026-12-03T06:00:00|p5-001|gres/gpu=8\n")
    with caplog.at_level("WARNING"):  # taken after the 3rd's export (an earlier snapshot's jobs cannot start later)
        assert run(tmp_path, datetime(2026, 12, 3, 7), path=str(folder)).error is None
    assert jobs(tmp_path, "job_id, state, end_time") == [
        ("30", "RUNNING", None), ("31", "COMPLETED", datetime(2026, 12, 2, 9)), ("32", "RUNNING", None),
        ("33", "COMPLETED", datetime(2026, 12, 3, 6))]
    assert [r.getMessage() for r in caplog.records] == [
        "1 job(s) running in a file and absent from files whose records reach 24 hours or more later (their end is "
        "unknown, so they hold their GPUs until a file shows it); the first, job 30 in "
        f"{folder / '2026-12-01.txt'}: export with a --starttime reaching back to their start"]


MIXED_PARSABLE2 = (
    "JobID|JobIDRaw|JobName|Cluster|Partition|Account|User|QOS|WCKey|Comment|State|Submit|Start|End|Elapsed|NodeList|"
    "AllocTRES\n"
    "50|50| train\u00a0| |gpu|proj|ana|normal|*run-x| run=r1 job_type=sft |REQUEUED|2026-12-01T00:00:00|"
    "2026-12-01T00:00:05|2026-12-01T01:00:00|01:00:00|p5-[001-002]|billing=16,gres/gpu:h100=16,gres/gpu=16\n"
    "50.batch|50.batch|batch||||||||COMPLETED|2026-12-01T00:00:05|2026-12-01T00:00:05|2026-12-01T01:00:00|"
    "01:00:00|p5-001|cpu=1\n"
    "50|50|train|c2|gpu|proj|ana|normal|run-x||RUNNING|2026-12-01T01:00:01|2026-12-01T01:01:00|Unknown|00:10:00|"
    "p5-003|gres/gpu:1g.10gb=7\n"
    "7_3|9|sweep|c2|gpu||bo|normal|||COMPLETED|2026-12-01T02:00:00|2026-12-01T02:00:00|Unknown|1-00:00:00|"
    "None assigned|gres/gpu=1\n"
    "60+1|61|het|c2|gpu||bo|normal||{\"run\": \"h\"}|CANCELLED by 0|2026-12-01T03:00:00.5|2026-12-01T03:00:01|"
    "2026-12-01T02:59:00|00:00:00|p5-004|gres/gpu=2\n")


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_the_column_wise_reader_gives_the_rows_of_the_line_reader(tmp_path, monkeypatch, zone):
    """sacct --parsable2 files are read column-wise (connectors/sacct_columns.py), and line by
    line only when that reader cannot take a file: both give the same rows."""
    import connectors.sacct_files as sacct_files

    path = tmp_path / "sacct.txt"
    path.write_text(MIXED_PARSABLE2, encoding="utf-8")
    line_reads = []
    line_reader = sacct_files.parsable_attempts
    monkeypatch.setattr(sacct_files, "parsable_attempts", lambda *args: line_reads.append(1) or line_reader(*args))
    assert run(tmp_path, path=str(path), cluster="p5", timezone=zone).error is None
    column_wise = jobs(tmp_path, "* EXCLUDE (snapshot_date)")
    assert line_reads == [] and len(column_wise) == 4
    import connectors.sacct_columns as sacct_columns  # imported by sacct_files when it reads

    monkeypatch.setattr(sacct_columns, "parsable_table", lambda *args: None)
    assert run(tmp_path / "again", path=str(path), cluster="p5", timezone=zone).error is None
    assert jobs(tmp_path / "again", "* EXCLUDE (snapshot_date)") == column_wise and line_reads == [1]


def test_a_job_across_the_hour_the_clocks_turn_back_ends_in_its_second_pass_for_both_readers(tmp_path, monkeypatch):
    """New York's clocks go 01:59 EDT → 01:00 EST on 2026-11-01: a job from 01:50 (EDT) to 01:10
    (EST, twenty minutes later) is not a record ending before it starts."""
    import connectors.sacct_columns as sacct_columns

    path = tmp_path / "sacct.txt"
    path.write_text(f"{HEADER}\n21|21|COMPLETED|2026-11-01T01:49:00|2026-11-01T01:50:00|2026-11-01T01:10:00|p5-001|"
                    "gres/gpu=8\n")
    assert run(tmp_path, path=str(path), timezone="America/New_York").error is None
    expected = [("21", datetime(2026, 11, 1, 5, 50), datetime(2026, 11, 1, 6, 10))]
    assert jobs(tmp_path, "job_id, start_time, end_time") == expected
    monkeypatch.setattr(sacct_columns, "parsable_table", lambda *args: None)  # the line reader
    assert run(tmp_path / "again", path=str(path), timezone="America/New_York").error is None
    assert jobs(tmp_path / "again", "job_id, start_time, end_time") == expected


@pytest.mark.parametrize("reader", ["column-wise", "line"])
def test_a_time_the_clocks_skip_fails_naming_its_line_for_both_readers(tmp_path, monkeypatch, reader):
    """New York's clocks go 01:59 EST → 03:00 EDT on 2026-03-08: sacct in that zone never prints
    02:30, so the file was written in another zone; read as 03:30 it moved the job by an hour."""
    import connectors.sacct_columns as sacct_columns

    if reader == "line":
        monkeypatch.setattr(sacct_columns, "parsable_table", lambda *args: None)
    path = tmp_path / "sacct.txt"
    path.write_text(f"{HEADER}\n20|20|COMPLETED|2026-03-08T01:00:00|2026-03-08T01:00:00|2026-03-08T01:30:00|p5-001|"
                    "gres/gpu=8\n21|21|RUNNING|2026-03-08T01:49:00|2026-03-08T02:30:00|Unknown|p5-001|gres/gpu=8\n")
    (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "slurm", "kind": "slurm-jobs", "path": str(path), "timezone": "America/New_York"}]}))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory"])
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    assert (f"{path}: line 3 (job 21): Start 2026-03-08T02:30:00 does not exist in America/New_York"
            in result.output), result.output


@pytest.mark.parametrize("reader", ["column-wise", "line"])
def test_a_pipe_in_a_job_name_or_comment_listed_last_is_read_not_a_failed_source(tmp_path, monkeypatch, caplog,
                                                                                  reader):
    """sacct does not escape `|` in free text: `--job-name='eval|sweep a'` made the line 19 fields
    where the header has 17, and one job name failed every job of the file. With JobName and
    Comment last (README's --format list) every other field is found from the line's two ends."""
    import connectors.sacct_columns as sacct_columns
    from connectors.slurm_records import SACCT_FORMAT

    if reader == "line":
        monkeypatch.setattr(sacct_columns, "parsable_table", lambda *args: None)
    path = tmp_path / "sacct.txt"
    path.write_text(SACCT_FORMAT.replace(",", "|") + "\n"
                    "1|1|p5|eval|eval|ana|normal|*|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|"
                    "2026-12-01T11:00:05|01:00:00|p5-001|billing=1,gres/gpu=2,node=1|eval|sweep a|run=x|y\n"
                    "2|2|p5|train|pretrain|bo|normal|*|RUNNING|2026-12-01T10:00:00|2026-12-01T10:00:05|Unknown|"
                    "01:00:00|p5-002|gres/gpu=8|pretrain|\n")
    assert run(tmp_path, path=str(path)).error is None
    assert jobs(tmp_path, "job_id, state, gpus, nodes, end_time, name, \"user\", account") == [
        ("1", "COMPLETED", 2.0, ["p5-001"], datetime(2026, 12, 1, 11, 0, 5), "eval|sweep a|run=x", "ana", "eval"),
        ("2", "RUNNING", 8.0, ["p5-002"], None, "pretrain", "bo", "pretrain")]
    assert f"{path}: 1 line(s) with a '|' inside JobName or Comment, which sit side by side: read as part of " \
        "JobName (first: line 2, job 1)" in caplog.text


def test_a_pipe_in_free_text_between_other_columns_fails_saying_to_list_it_last(tmp_path):
    path = tmp_path / "sacct.txt"
    path.write_text("JobID|JobIDRaw|JobName|State|Submit|Start|End|NodeList|AllocTRES|Comment\n"
                    "1|1|eval|sweep|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|2026-12-01T11:00:05|p5-001|"
                    "gres/gpu=2|\n")
    outcome = run(tmp_path, path=str(path))
    assert "line 2: 11 fields where the header has 10 (a '|' inside Comment or JobName? sacct does not escape it: " \
           "list them last in --format, as README does" in str(outcome.error)


@pytest.mark.parametrize("fields, header, expected", [
    (["1", "a", "b", "x"], ["JobID", "JobName", "State"], (["1", "a|b", "x"], False)),  # one free column
    (["1", "x", "a", "b", "c"], ["JobID", "State", "Comment"], (["1", "x", "a|b|c"], False)),  # last
    (["1", "x", "a", "b", "c"], ["JobID", "State", "JobName", "Comment"], (["1", "x", "a|b", "c"], True)),
    (["1", "a", "b", "x", "c"], ["JobID", "JobName", "State", "Comment"], None),  # apart: cannot be told
    (["1", "a", "b"], ["JobID", "State", "End"], None),  # no free text
])
def test_split_line(fields, header, expected):
    from connectors.sacct_fields import split_line

    assert split_line(fields, header) == expected


@pytest.mark.parametrize("reader", ["column-wise", "line"])
def test_state_flags_sacct_prints_instead_of_the_base_state_are_read_not_a_failed_source(tmp_path, monkeypatch,
                                                                                          reader):
    """sacct prints a set state flag in place of the base state (job_state_string): a job put on
    hold by `scontrol requeuehold State=SpecialExit` shows SPECIAL_EXIT, one requeued and held
    REQUEUE_HOLD. One such line failed every job of the file; an attempt that ended without an
    End ends its Elapsed after its Start, as any ended one."""
    import connectors.sacct_columns as sacct_columns

    if reader == "line":
        monkeypatch.setattr(sacct_columns, "parsable_table", lambda *args: None)
    path = tmp_path / "sacct.txt"
    path.write_text("JobID|JobIDRaw|State|Submit|Start|End|Elapsed|NodeList|AllocTRES\n" + "".join(
        f"{job}|{job}|{state}|2026-12-01T10:00:00|2026-12-01T10:00:05|{end}|00:10:00|p5-001|gres/gpu=8\n"
        for job, state, end in ((1, "SPECIAL_EXIT", "Unknown"), (2, "REQUEUE_HOLD", "2026-12-01T10:05:05"),
                                (3, "COMPLETING", "2026-12-01T10:05:05"), (4, "STOPPED", "Unknown"),
                                (5, "RESV_DEL_HOLD", "Unknown"), (6, "REQUEUE_FED", "2026-12-01T10:05:05"),
                                (7, "CONFIGURING", "Unknown"), (8, "SIGNALING", "Unknown"),
                                (9, "STAGE_OUT", "2026-12-01T10:05:05"))))
    assert run(tmp_path, path=str(path)).error is None
    five, ten = datetime(2026, 12, 1, 10, 5, 5), datetime(2026, 12, 1, 10, 10, 5)
    assert jobs(tmp_path, "job_id, state, end_time, gpus") == [
        ("1", "SPECIAL_EXIT", ten, 8.0), ("2", "REQUEUE_HOLD", five, 8.0), ("3", "COMPLETING", five, 8.0),
        ("4", "STOPPED", None, 8.0), ("5", "RESV_DEL_HOLD", None, 8.0), ("6", "REQUEUE_FED", five, 8.0),
        ("7", "CONFIGURING", None, 8.0), ("8", "SIGNALING", None, 8.0), ("9", "STAGE_OUT", five, 8.0)]


@pytest.mark.parametrize("reader", ["column-wise", "line", "json"])
def test_an_ended_job_without_an_end_or_elapsed_time_holds_no_gpu_time_and_is_said(tmp_path, monkeypatch, caplog,
                                                                                   reader):
    """break50b: a finished record with a Start and neither End nor Elapsed (a file exported
    without the Elapsed column) read as running held its GPUs to the data's end. It ends at its
    Start, said in one line with the count; a RUNNING one still runs, a REQUEUED one is left as
    sacct wrote it."""
    import connectors.sacct_columns as sacct_columns

    if reader == "line":
        monkeypatch.setattr(sacct_columns, "parsable_table", lambda *args: None)
    records = ((1, "CANCELLED"), (2, "RUNNING"), (3, "TIMEOUT"), (4, "REQUEUED"))
    path = tmp_path / "sacct.txt"
    if reader == "json":
        path.write_text(json.dumps({"jobs": [
            {"job_id": job, "state": {"current": state}, "time": {"submission": 1796119200, "start": 1796119205,
                                                                   "end": 0},
             "nodes": "p5-001", "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 8}]}}
            for job, state in records]}))
    else:
        path.write_text("JobID|JobIDRaw|State|Submit|Start|End|NodeList|AllocTRES\n" + "".join(
            f"{job}|{job}|{state}|2026-12-01T10:00:00|2026-12-01T10:00:05|Unknown|p5-001|gres/gpu=8\n"
            for job, state in records))
    with caplog.at_level("WARNING"):
        assert run(tmp_path, path=str(path)).error is None
    start = datetime(2026, 12, 1, 10, 0, 5)
    assert jobs(tmp_path, "job_id, state, start_time, end_time") == [
        ("1", "CANCELLED", start, start), ("2", "RUNNING", start, None), ("3", "TIMEOUT", start, start),
        ("4", "REQUEUED", start, None)]
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: 2 job record(s) in a state a job ends in (COMPLETED, FAILED, CANCELLED, ...) have a start and no "
        "end: each is counted as ending at its start, holding no GPU time, not as running to the data's end; the "
        "first, job 1 (CANCELLED): write the end its scheduler recorded"]


def test_the_reports_unfinished_jobs_count_attempts_sacct_shows_by_a_state_flag():
    """A held requeue (REQUEUE_HOLD) or special exit (SPECIAL_EXIT) bought no finished work, as a
    REQUEUED attempt; a job still COMPLETING is not unfinished."""
    from decimal import Decimal
    from types import SimpleNamespace

    from service.report.sections.clusters import unfinished_jobs

    usage = SimpleNamespace(jobs=[SimpleNamespace(values={"job_state": state}, cost=Decimal(cost), currency="USD",
                                                  records=())  # each a job of no record: one attempt
                                  for state, cost in (("SPECIAL_EXIT", "3"), ("REQUEUE_HOLD", "2"),
                                                      ("COMPLETING", "4"), ("REQUEUED", "1"))])
    assert [(r["state"], r["jobs"], r["cost"]) for r in unfinished_jobs(usage).rows] == [
        ("SPECIAL_EXIT", 1, Decimal(3)), ("REQUEUE_HOLD", 1, Decimal(2)), ("REQUEUED", 1, Decimal(1))]


def test_a_pending_array_and_heterogeneous_job_read_alike_from_json_and_parsable2(tmp_path):
    """Captured from the real cluster (tests/data/slurm/README.md): a heterogeneous job and an
    array `--array=0-5%1` still pending, two jobs requeued and held. Slurm 22.05's JSON writes the
    pending tasks as a hex bitmap (`"task": "0x3F"`): the array's row was job `5` from JSON and
    `5_[0-5%1]` from --parsable2."""
    expected = [("spendlake/1@1796319713", "1", "1", "REQUEUED", 1.0, ["gpu-node-01"]),
                ("spendlake/2@1796319713", "2", "2", "REQUEUED", 1.0, ["gpu-node-01"]),
                ("spendlake/3@1796319713", "3+0", "3", "PENDING", 0.0, None),
                ("spendlake/4@1796319713", "3+1", "3", "PENDING", 0.0, None),
                ("spendlake/5@1796319713", "5_[0-5%1]", "5", "PENDING", 0.0, None)]
    for name in ("sacct-pending-het-array.json", "sacct-pending-het-array-parsable2.txt"):
        assert run(tmp_path / name, path=str(SLURM / name)).error is None
        assert jobs(tmp_path / name, "record_id, job_id, run_id, state, gpus, nodes") == expected, name


@pytest.mark.parametrize("tres, said", [("billing=8,cpu=96,mem=1000G,node=1", True),
                                        ("billing=8,cpu=96,gres/gpu=8,mem=1000G,node=1", False)])
def test_a_file_whose_allocations_carry_no_gpu_says_to_track_gres_gpu(tmp_path, caplog, tres, said):
    """Slurm records gres/gpu in AllocTRES only with AccountingStorageTRES=gres/gpu (not in its
    default list): without it every job of a GPU cluster read as 0 GPUs, and nothing said why."""
    path = tmp_path / "sacct.txt"
    path.write_text(f"{HEADER}\n{GOOD.rsplit('|', 1)[0]}|{tres}\n"
                    "13|13|PENDING|2026-12-01T10:00:00|Unknown|Unknown|None assigned|\n")
    assert run(tmp_path, path=str(path)).error is None
    warning = (f"{path}: none of the 1 allocated record(s) carries gres/gpu in AllocTRES (tres.allocated): each "
               "counts 0 GPUs; on a GPU cluster set AccountingStorageTRES=gres/gpu in slurm.conf")
    assert (warning in caplog.text) is said, caplog.text


def test_a_heterogeneous_jobs_components_share_the_run_its_first_components_comment_names(tmp_path):
    """`#SBATCH --comment=run=het-1` before `#SBATCH hetjob` sets the first component's comment
    only: its GPU component and CPU component went to runs `het-1` and `200`."""
    from connectors.slurm_records import SACCT_FORMAT

    path = tmp_path / "sacct.txt"
    line = "|c1|gpu|acct|bo|normal|*|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|2026-12-01T12:00:05|02:00:00|"
    path.write_text(SACCT_FORMAT.replace(",", "|") + "\n"
                    f"200+0|200{line}p5-[002-003]|gres/gpu=16,node=2|het|run=het-1\n"
                    f"200+1|201{line}c-001|cpu=4,node=1|het|\n"
                    f"202|202{line}p5-004|gres/gpu=8,node=1|solo|\n")
    assert run(tmp_path, path=str(path)).error is None
    assert jobs(tmp_path, "job_id, run_id, gpus") == [("200+0", "het-1", 16.0), ("200+1", "het-1", 0.0),
                                                      ("202", "202", 8.0)]


@pytest.mark.parametrize("name", ["sacct-array-running.json", "sacct-array-running-parsable2.txt"])
def test_a_running_array_task_takes_the_run_its_ended_siblings_comment_names(tmp_path, name):
    """Captured from the real cluster while `--array=0-3%1 --comment=run=sweep-1` ran its second
    task: Slurm 22.05 stores a comment when a job ends, so task 1_1 showed none and its GPU time
    went to run `1` until a later snapshot; one submission, one comment."""
    assert run(tmp_path, path=str(SLURM / name)).error is None
    assert jobs(tmp_path, "job_id, run_id, state, gpus") == [("1_0", "sweep-1", "COMPLETED", 1.0),
                                                            ("1_1", "sweep-1", "RUNNING", 1.0)]


def test_a_job_requeued_in_its_submit_second_read_from_several_files_keeps_both_attempts(tmp_path):
    """A file written before the restart was listed holds the first attempt alone, the id both
    share: in the later file's name order it would win over the running restart (it has ended)."""
    both = requeued_in_its_submit_second()
    [restart] = [r for r in both["jobs"] if r["job_id"] == 5 and r["state"]["current"] == "COMPLETED"]
    restart["state"]["current"], restart["time"]["end"] = "RUNNING", 0
    first = {"jobs": [r for r in both["jobs"] if r is not restart]}
    folder = tmp_path / "sacct"
    folder.mkdir()
    (folder / "a-both.json").write_text(json.dumps(both))
    (folder / "b-first-only.json").write_text(json.dumps(first))
    assert run(tmp_path, path=str(folder)).error is None
    assert [row[:4] for row in jobs(tmp_path, "record_id, state, start_time, restarts, job_id") if row[4] == "5"] == [
        ("spendlake/5@1796174389", "RUNNING", t(54), 1), ("spendlake/5@1796174389~1796174390", "REQUEUED", t(50), 0)]
