"""The real Slurm cluster of tests/slurm_cluster.py records the jobs as we submitted them
(state, GPUs, nodes, times, labels) in sacct --json, sacct --parsable2 and slurmrestd, and the
files captured from it under tests/data/slurm/ still have the shape it returns now, so a
Slurm upgrade that changes a format fails here before it reaches a connector."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

import pytest
from conftest import DATA
from slurm_cluster import (CLUSTER, NODE, REST_VERSION, SACCT_FORMAT, WORKLOAD, shape,  # noqa: F401 (fixture)
                           slurm_cluster)

CAPTURED = DATA / "slurm"
FAST = tuple(spec.key for spec in WORKLOAD if spec.key != "timeout")  # all but the job that needs a minute


def live(test):
    """Runs against the cluster: needs Debian's Slurm and takes more than a few seconds."""
    return pytest.mark.slow(pytest.mark.binary(test))


def gpus(tres: list[dict]) -> int:
    return sum(item["count"] for item in tres if (item["type"], item["name"]) == ("gres", "gpu"))


def parsable(text: str) -> list[dict]:
    header, *lines = text.splitlines()
    rows = [dict(zip(header.split("|"), line.split("|"), strict=True)) for line in lines]
    assert header == SACCT_FORMAT.replace(",", "|")
    return rows


def epoch(text: str) -> int:
    """sacct prints local time without a zone; the cluster's commands run with TZ=UTC."""
    return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp())


def essentials(record: dict) -> str:
    return json.dumps([record["state"], record["time"], gpus(record["tres"]["allocated"]), record["nodes"],
                       record["wckey"], record["comment"], record["steps"]], sort_keys=True)


def rest_since(cluster) -> dict:
    return json.loads(cluster.rest_jobs())


@live
@pytest.mark.parametrize("key", FAST)
def test_sacct_json_records_each_job_as_submitted(slurm_cluster, key):  # noqa: F811
    data = slurm_cluster.settled(FAST)
    job = slurm_cluster.jobs[key]
    spec, records = job.spec, slurm_cluster.records(data, job)
    assert tuple(r["state"]["current"] for r in records) == spec.states
    for record in records:
        assert (record["name"], record["account"], record["partition"], record["cluster"], record["user"]) == (
            spec.name, spec.account, spec.partition, CLUSTER, spec.user)
        assert record["wckey"]["wckey"] == spec.wckey  # "" with flags ["ASSIGNED_DEFAULT"] when none was given
        assert record["comment"]["job"] == (spec.comment or None)
        assert gpus(record["tres"]["requested"]) == spec.gpus
        times = record["time"]
        assert times["submission"] <= times["start"] <= times["end"] and times["elapsed"] == times["end"] - times["start"]
        if spec.action == "cancel-pending":  # never allocated: no GPUs, no node, start = end = the cancel
            assert (gpus(record["tres"]["allocated"]), record["nodes"], record["steps"]) == (0, "None assigned", [])
            assert times["elapsed"] == 0
            continue
        assert (gpus(record["tres"]["allocated"]), record["nodes"], record["allocation_nodes"]) == (spec.gpus, NODE, 1)
        assert {step["step"]["id"] for step in record["steps"]} >= {"batch", "extern"}
        for step in record["steps"]:
            assert step["nodes"] == {"list": [NODE], "count": 1, "range": NODE}
            assert gpus(step["tres"]["allocated"]) == spec.gpus
            # The extern step may end a second after its job.
            assert times["start"] <= step["time"]["start"] <= step["time"]["end"] <= times["end"] + 2
    first = records[0]["time"]["submission"]
    assert job.before <= first <= job.after, "submission time is when sbatch ran"


@live
def test_requeued_job_has_one_record_per_attempt(slurm_cluster):  # noqa: F811
    job = slurm_cluster.jobs["requeued"]
    first, second = slurm_cluster.records(slurm_cluster.settled(("requeued",)), job)
    assert first["state"]["current"] == "REQUEUED" and second["state"]["current"] == "COMPLETED"
    # The second attempt's submission is the requeue: both attempts' GPU time counts.
    assert first["time"]["start"] <= first["time"]["end"] <= second["time"]["submission"] <= second["time"]["start"]
    assert 2 <= second["time"]["elapsed"] <= 6  # `sleep 2` on the restart
    [batch] = [s for s in first["steps"] if s["step"]["id"] == "batch"]
    # the requeue's SIGTERM ends the batch step: CANCELLED by signal 15, or FAILED when the script's
    # own exit is recorded first (seen on a loaded machine, main unchanged); either way not COMPLETED
    assert (batch["state"] == "CANCELLED" and batch["exit_code"]["signal"]["signal_id"] == 15
            or batch["state"] == "FAILED"), batch


@live
def test_steps_of_a_job_with_srun(slurm_cluster):  # noqa: F811
    job = slurm_cluster.jobs["steps"]
    [record] = slurm_cluster.records(slurm_cluster.settled(("steps",)), job)
    steps = {step["step"]["id"]: step for step in record["steps"]}
    assert set(steps) == {"batch", "extern", 0, 1}  # srun steps are numbers, the others names
    assert (steps[0]["step"]["name"], steps[1]["step"]["name"]) == ("sleep", "true")
    assert all(step["state"] == "COMPLETED" for step in steps.values())


@live
def test_array_tasks_are_jobs_of_their_own(slurm_cluster):  # noqa: F811
    job = slurm_cluster.jobs["array"]
    records = slurm_cluster.records(slurm_cluster.settled(("array",)), job)
    assert sorted(r["array"]["task_id"] for r in records) == [0, 1]
    assert {r["array"]["job_id"] for r in records} == {job.job_id}
    assert job.job_id in {r["job_id"] for r in records}  # the last task keeps the array's id


@live
def test_sacct_parsable2_agrees_with_the_json(slurm_cluster):  # noqa: F811
    data = slurm_cluster.settled(FAST)
    rows = parsable(slurm_cluster.sacct_parsable())
    by_id: dict[str, list[dict]] = {}
    for row in rows:
        by_id.setdefault(row["JobIDRaw"], []).append(row)  # steps under "5.batch" etc.
    for key in FAST:
        job = slurm_cluster.jobs[key]
        for record in slurm_cluster.records(data, job):
            row = next(r for r in by_id[str(record["job_id"])] if epoch(r["Submit"]) == record["time"]["submission"])
            state = record["state"]["current"]
            assert row["State"] == (f"{state} by 0" if state == "CANCELLED" else state)  # by uid 0
            assert (epoch(row["Start"]), epoch(row["End"]), int(row["ElapsedRaw"])) == (
                record["time"]["start"], record["time"]["end"], record["time"]["elapsed"])
            tres = dict(item.split("=") for item in row["AllocTRES"].split(",") if item)
            assert int(tres.get("gres/gpu", 0)) == gpus(record["tres"]["allocated"])
            assert row["NodeList"] == record["nodes"]
            assert row["WCKey"] == (job.spec.wckey or "*")  # "*" where the JSON has "" (the default wckey)
            assert (row["Account"], row["Partition"], row["JobName"], row["Comment"]) == (
                job.spec.account, job.spec.partition, job.spec.name, job.spec.comment)
            # The JSON's exit_code says SUCCESS/0 for this job and its batch step in 22.05.
            assert row["ExitCode"] == ("3:0" if key == "failed" else "0:0")
        for job_id in {r["job_id"] for r in slurm_cluster.records(data, job)}:
            steps = {raw.split(".", 1)[1] for raw in by_id if raw.startswith(f"{job_id}.")}
            assert steps == {str(step["step"]["id"]) for r in data["jobs"] if r["job_id"] == job_id for step in r["steps"]}


@live
def test_slurmrestd_returns_what_sacct_does(slurm_cluster):  # noqa: F811
    data, rest = slurm_cluster.settled(FAST), rest_since(slurm_cluster)
    assert rest["errors"] == [] and rest["meta"]["plugin"]["type"] == f"openapi/db{REST_VERSION}"
    for key in FAST:
        job = slurm_cluster.jobs[key]
        ours, theirs = slurm_cluster.records(data, job), slurm_cluster.records(rest, job)
        assert sorted(map(essentials, theirs)) == sorted(map(essentials, ours))


@live
def test_slurmrestd_lists_every_attempt_only_with_a_time_bound(slurm_cluster):  # noqa: F811
    job = slurm_cluster.jobs["requeued"]
    slurm_cluster.settled(("requeued",))
    bounded = [r["state"]["current"] for r in slurm_cluster.records(rest_since(slurm_cluster), job)]
    unbounded = [r["state"]["current"] for r in slurm_cluster.records(json.loads(slurm_cluster.rest_jobs(bounded=False)), job)]
    assert (bounded, unbounded) == (["REQUEUED", "COMPLETED"], ["COMPLETED"])


@live
def test_slurmrestd_answers_a_bad_token_with_200_and_an_error(slurm_cluster):  # noqa: F811
    body = json.loads(slurm_cluster.rest_get(f"/slurmdb/{REST_VERSION}/jobs", token="not-a-token"))
    assert body["jobs"] == [] and [e["error"] for e in body["errors"]] == ["Protocol authentication error"]


@live
def test_the_timeout_job_ends_after_its_one_minute_limit(slurm_cluster):  # noqa: F811
    job = slurm_cluster.jobs["timeout"]
    [record] = slurm_cluster.records(slurm_cluster.settled(("timeout",), timeout=150), job)
    assert record["state"]["current"] == "TIMEOUT" and record["time"]["limit"] == 1  # minutes
    assert 60 <= record["time"]["elapsed"] <= 100  # slurmctld checks limits every 30 s
    assert (gpus(record["tres"]["allocated"]), record["nodes"]) == (1, NODE)


# -- the captured files ---------------------------------------------------------------------
KINDS = (("int", r"\d+"), ("time", r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"), ("duration", r"(\d+-)?\d\d:\d\d:\d\d"),
         ("exit", r"\d+:\d+"), ("tres", r"[a-z/]+=[^,\s]+(,[a-z/]+=[^,\s]+)*"), ("text", r".+"))


def columns(text: str) -> dict[str, set[str]]:
    """Per column of a parsable2 file, the kinds of values it holds besides empty ones (which
    come and go: the extern step of a requeued job's second run is sometimes CANCELLED
    without an exit code)."""
    kinds: dict[str, set[str]] = {}
    for row in parsable(text):
        for column, value in row.items():
            kinds.setdefault(column, set()).update([next(k for k, p in KINDS if re.fullmatch(p, value))] if value else [])
    return kinds


def test_captured_files_are_documented_and_parse():
    readme = (CAPTURED / "README.md").read_text()
    assert f"--format={SACCT_FORMAT}" in readme
    assert json.loads((CAPTURED / "sacct.json").read_text())["jobs"]
    assert json.loads((CAPTURED / "slurmrestd-jobs.json").read_text())["jobs"]
    assert {row["State"] for row in parsable((CAPTURED / "sacct-parsable2.txt").read_text())} >= {
        "COMPLETED", "FAILED", "CANCELLED by 0", "TIMEOUT", "REQUEUED"}


@live
@pytest.mark.parametrize("name", ["sacct.json", "slurmrestd-jobs.json", "sacct-parsable2.txt"])
def test_captured_files_have_the_shape_the_live_cluster_returns(slurm_cluster, name):  # noqa: F811
    slurm_cluster.settled(timeout=150)
    captured = (CAPTURED / name).read_text()
    if name == "sacct-parsable2.txt":
        live_text = slurm_cluster.sacct_parsable()
        assert columns(captured) == columns(live_text)
        return
    now = slurm_cluster.sacct_json() if name == "sacct.json" else rest_since(
        slurm_cluster)
    was = json.loads(captured)
    assert shape(was) == shape(now), (f"captured with Slurm {was['meta']['Slurm']['release']}, live is "
                                      f"{now['meta']['Slurm']['release']}: re-capture (tests/data/slurm/README.md)")



@live
@pytest.mark.parametrize("delimiter", [";", "\t"])
def test_sacct_with_another_delimiter_is_read_as_with_the_default(slurm_cluster, tmp_path, delimiter):  # noqa: F811
    """`sacct --parsable2 --delimiter=X` writes its header line with X too: the connector reads
    the file as it reads the `|` one."""
    from connectors.slurm_records import SACCT_FORMAT as README_FORMAT
    from tests.test_slurm_jobs import jobs, run

    slurm_cluster.settled(FAST)
    for name, options in (("default", ()), ("other", (f"--delimiter={delimiter}",))):
        (tmp_path / f"{name}.txt").write_text(slurm_cluster.sacct("--parsable2", *options, f"--format={README_FORMAT}"))
        assert run(tmp_path / name, path=str(tmp_path / f"{name}.txt")).error is None
    assert (tmp_path / "other.txt").read_text().splitlines()[0] == README_FORMAT.replace(",", delimiter)
    read = jobs(tmp_path / "other", "* EXCLUDE (snapshot_date)")
    assert len(read) >= len(FAST) and read == jobs(tmp_path / "default", "* EXCLUDE (snapshot_date)")
