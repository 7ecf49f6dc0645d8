"""`spendlake runs` and /api/v1/runs: one row per run of the shared GPU clusters. Figures by hand
(p5.48xlarge: 8 GPUs, $80 an hour, i.e. $10 a GPU-hour):

- run r1: job 1 (8 GPUs of i-a, 10:00-10:30, FAILED) and its restart job 2 (8 GPUs of i-a,
  10:30-11:00, COMPLETED): $40 + $40 = $80, 4 + 4 = 8 GPU-hours, $10 a GPU-hour, i-a never idle;
- run r2: job 3 (4 GPUs of i-b, 10:00-10:30, CANCELLED): 4·30/(8·60) of $80 = $20, 2 GPU-hours;
  i-b is idle for the other $60 of its $80: idle share 0.75;
- run r3: job 4 (2 GPUs of i-z, which is not billed, RUNNING since 10:00): $0, no currency; in the
  window 2026-11-02 (a day) it held 2 GPUs for 14 hours: 28 GPU-hours.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from urllib.parse import parse_qs

import pytest
import yaml
from click.testing import CliRunner

from service.attribution import RunsQuery, runs
from service.cli.main import cli
from service.core.config import load_config, parse_config
from service.core.errors import UsageError
from service.core.timewindow import parse_window
from service.report.sections.clusters import NO_IDLE_SHARE, top_runs
from tests.attribution_helpers import declared_sources
from tests.test_clusters_allocation import by, gpu_line, job, setup
from tests.test_service_http import api_for

D = Decimal
DAY = {"since": "2026-11-02", "until": "2026-11-03"}


def lake_with_runs(tmp_path):
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1",
                state="FAILED", team="nlp", project="llm", job_type="pretrain"),
            job("2", 8, "2026-11-02T10:30:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1",
                team="nlp", project="llm", job_type="pretrain"),
            job("3", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r2",
                state="CANCELLED", team="nlp", project="evals", job_type="eval"),
            job("4", 2, "2026-11-02T10:00:00", None, instance_ids=["i-z"], run_id="r3", state="RUNNING")]
    return setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")], jobs)


def query(**kwargs) -> RunsQuery:
    return RunsQuery.parse(**{**DAY, **kwargs})


def test_one_row_per_run_with_its_jobs_gpu_hours_cost_and_idle_share(tmp_path):
    lake, cfg = lake_with_runs(tmp_path)
    result = runs(lake, cfg, query())
    got = {r.run: (r.jobs, r.restarts, r.gpus, r.gpu_hours, r.cost, r.currency, r.state, r.cost_per_gpu_hour,
                   r.idle_share) for r in result.rows}
    assert got == {
        "r1": (2, 1, D(8), D(8), D(80), "USD", "COMPLETED", D(10), D(0)),
        "r2": (1, 0, D(4), D(2), D(20), "USD", "CANCELLED", D(10), D("0.75")),
        "r3": (1, 0, D(2), D(28), D(0), None, "RUNNING", None, None),  # nothing billed: no $ per GPU-hour
    }
    r1 = result.rows[0]
    assert (r1.run, r1.values["team"], r1.values["project"], r1.values["job_type"], r1.values["cluster"]) == (
        "r1", "nlp", "llm", "pretrain", "p5")
    assert (r1.start, r1.end) == (datetime(2026, 11, 2, 10, tzinfo=timezone.utc),
                                  datetime(2026, 11, 2, 11, tzinfo=timezone.utc))
    assert [r.end for r in result.rows if r.run == "r3"] == [None]  # still running
    assert {(t.currency, t.runs, t.jobs, t.gpu_hours, t.cost) for t in result.totals} == {
        ("USD", 2, 3, D(10), D(100)), (None, 1, 1, D(28), D(0))}


def test_state_filters_on_the_last_jobs_state_and_top_folds_the_rest(tmp_path):
    lake, cfg = lake_with_runs(tmp_path)
    assert [r.run for r in runs(lake, cfg, query(state="failed")).rows] == []  # r1's last job completed
    assert [r.run for r in runs(lake, cfg, query(state="cancelled,completed")).rows] == ["r1", "r2"]
    top = runs(lake, cfg, query(top="1")).rows
    assert [(r.run, r.cost, r.jobs) for r in top] == [("r1", D(80), 2), ("other", D(20), 1), ("r3", D(0), 1)]


def test_by_project_groups_rows_and_totals(tmp_path):
    lake, cfg = lake_with_runs(tmp_path)
    result = runs(lake, cfg, query(by="project"))
    assert [(r.values["project"], r.run) for r in result.rows] == [("llm", "r1"), ("evals", "r2"), ("unallocated", "r3")]
    assert {(t.group, t.currency, t.cost) for t in result.totals} == {
        (("evals",), "USD", D(20)), (("llm",), "USD", D(80)), (("unallocated",), None, D(0))}


def test_restarts_are_jobs_started_after_one_of_the_run_did_not_complete(tmp_path):
    # a sweep of two jobs side by side (no restart), one that fails at 10:40, one started at 10:45
    # after it (a restart): 4 jobs, 1 restart; a and b held 2 GPUs at once, whole GPUs shown as whole numbers
    jobs = [job(name, 1, start, end, instance_ids=["i-a"], run_id="sweep", state=state) for name, start, end, state in (
        ("a", "2026-11-02T10:00:00", "2026-11-02T10:30:00", "COMPLETED"),
        ("b", "2026-11-02T10:00:00", "2026-11-02T10:30:00", "COMPLETED"),
        ("c", "2026-11-02T10:30:00", "2026-11-02T10:40:00", "FAILED"),
        ("d", "2026-11-02T10:45:00", "2026-11-02T11:00:00", "COMPLETED"))]
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], jobs)
    [row] = runs(lake, cfg, query()).rows
    assert (row.jobs, row.restarts, row.state, row.to_json()["gpus"]) == (4, 1, "COMPLETED", "2")


def test_a_job_after_one_that_ended_in_no_known_state_is_no_restart(tmp_path):
    # a jobs file without a `state` column: ended jobs have none, and none is no failure
    jobs = [job(name, 1, start, end, instance_ids=["i-a"], run_id="plain", state=state) for name, start, end, state in (
        ("a", "2026-11-02T10:00:00", "2026-11-02T10:20:00", None),
        ("b", "2026-11-02T10:20:00", "2026-11-02T10:40:00", "UNKNOWN"),
        ("c", "2026-11-02T10:40:00", "2026-11-02T11:00:00", None))]
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], jobs)
    [row] = runs(lake, cfg, query()).rows
    assert (row.jobs, row.restarts, row.state) == (3, 0, None)


def test_a_runs_state_is_that_of_the_job_that_ended_last_and_every_answer_agrees(tmp_path):
    # "ev": a long job that completes at 11:30 and one started later that fails at 10:40: the run
    # ended COMPLETED (its latest start failed); "rn": a running job is last whatever ended later
    jobs = [job("1", 4, "2026-11-02T10:00:00", "2026-11-02T11:30:00", instance_ids=["i-a"], run_id="ev"),
            job("2", 4, "2026-11-02T10:20:00", "2026-11-02T10:40:00", instance_ids=["i-a"], run_id="ev",
                state="FAILED"),
            job("3", 2, "2026-11-02T10:00:00", None, instance_ids=["i-b"], run_id="rn", state="RUNNING"),
            job("4", 2, "2026-11-02T10:10:00", "2026-11-02T11:00:00", instance_ids=["i-b"], run_id="rn",
                state="CANCELLED")]
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")], jobs)
    assert {r.run: r.state for r in runs(lake, cfg, query()).rows} == {"ev": "COMPLETED", "rn": "RUNNING"}
    assert [r.run for r in runs(lake, cfg, query(state="completed")).rows] == ["ev"]
    assert runs(lake, cfg, query(state="failed,cancelled")).rows == ()
    assert [r.state for r in runs(lake, cfg, RunsQuery.parse(since=None, run="ev")).rows] == ["COMPLETED"]
    api = api_for(parse_config(whole_config(tmp_path, lake)))
    data = json.loads(api.handle("/api/v1/runs", parse_qs("since=2026-11-02&until=2026-11-03"), None).body)
    assert {r["run"]: r["state"] for r in data["rows"]} == {"ev": "COMPLETED", "rn": "RUNNING"}


@pytest.mark.parametrize("kwargs, says", [
    ({"by": "account"}, "runs cannot be grouped by 'account'"),
    ({"top": "²"}, "--top must be a whole number"),
    ({"top": "0"}, "--top must be at least 1"),
    ({"top": "-1"}, "--top must be a whole number of at least 1, not '-1'"),
    ({"since": "2026-11-03"}, "the window is empty"),
])
def test_bad_parameters_name_the_option(kwargs, says):
    with pytest.raises(UsageError, match=says):
        query(**kwargs)


def whole_config(tmp_path, lake) -> dict:
    """A config declaring the lake's sources, the job source included (only declared ones count)."""
    return {"lake": str(lake.root), "sources": declared_sources(lake),
            "inventory": [{"name": "slurm", "kind": "jobs-file", "path": str(tmp_path / "jobs")}],
            "attribution": {"clusters": {}}}


def write_config(tmp_path, lake) -> str:
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(whole_config(tmp_path, lake)))
    return str(path)


def test_the_cli_keeps_the_json_contract_and_writes_csv_and_tables(tmp_path):
    lake, _ = lake_with_runs(tmp_path)
    path = write_config(tmp_path, lake)
    runner = CliRunner()
    shown = runner.invoke(cli, ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03",
                                "--format", "json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert (data["since"], data["until"]) == ("2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z")
    contract = {"run", "team", "project", "experiment", "job_type", "jobs", "gpu_hours", "cost", "currency", "state",
                "start", "end"}
    assert all(contract <= set(row) for row in data["rows"])
    assert {k: data["rows"][0][k] for k in contract} == {
        "run": "r1", "team": "nlp", "project": "llm", "experiment": "unallocated", "job_type": "pretrain", "jobs": 2,
        "gpu_hours": "8.000000", "cost": "80.000000000000", "currency": "USD", "state": "COMPLETED",
        "start": "2026-11-02T10:00:00Z", "end": "2026-11-02T11:00:00Z"}
    assert [t["cost"] for t in data["totals"] if t["currency"] == "USD"] == ["100.000000000000"]
    failed = runner.invoke(cli, ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03",
                                 "--state", "cancelled", "--format", "csv"])
    assert failed.exit_code == 0, failed.output
    lines = failed.stdout.splitlines()
    assert lines[0].startswith("run,team,project,experiment,job_type") and len(lines) == 2 and lines[1].startswith("r2,")
    table = runner.invoke(cli, ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03",
                                "--by", "project", "--top", "1", "--format", "table"], env={"COLUMNS": "220"})
    assert table.exit_code == 0 and "r1" in table.stdout and "$/GPU-h" in table.stdout, table.output
    bad = runner.invoke(cli, ["--config", path, "runs", "--since", "2026-11-02", "--by", "account"])
    assert bad.exit_code == 2 and "--by" in bad.output


def test_the_http_api_answers_as_the_cli_does(tmp_path):
    lake, _ = lake_with_runs(tmp_path)
    api = api_for(parse_config(whole_config(tmp_path, lake)))
    response = api.handle("/api/v1/runs", parse_qs("since=2026-11-02&until=2026-11-03&state=cancelled"), None)
    assert response.status == 200, response.body
    data = json.loads(response.body)
    assert [(r["run"], r["cost"], r["idle_share"]) for r in data["rows"]] == [("r2", "20.000000000000", "0.7500")]
    bad = api.handle("/api/v1/runs", parse_qs("since=2026-11-02&top=0"), None)
    assert bad.status == 400 and json.loads(bad.body)["error"]["where"] == "top"


def lake_with_unbilled_runs(tmp_path):
    """Runs whose jobs reach no billed instance: r3 on an instance the bill lacks, r5 in a
    cluster with no pool (no `cluster_tag`), r6 stating nothing; r1 is billed as above."""
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1",
                team="nlp", project="llm", job_type="pretrain"),
            job("4", 2, "2026-11-02T10:00:00", "2026-11-02T12:00:00", instance_ids=["i-z"], run_id="r3",
                team="cv", project="vision", experiment="e1", job_type="debug", user="ana"),
            job("5", 1, "2026-11-02T10:00:00", "2026-11-02T11:00:00", run_id="r5", cluster="gpu2",
                name="eval-nightly", account="speech-acct", labels={"team": "speech"}),
            job("6", 1, "2026-11-02T10:00:00", "2026-11-02T11:00:00", run_id="r6", cluster="gpu2")]
    dimensions = {"project": {"tags": ["project", "account"]},
                  "job_type": {"rules": [{"match": {"job_name": "^eval"}, "value": "eval"}]}}
    return setup(tmp_path, [gpu_line("i-a")], jobs, dimensions=dimensions)


UNBILLED = {  # run → team, project, experiment, job_type, cluster, user
    "r1": ("nlp", "llm", "unallocated", "pretrain", "p5", "unallocated"),
    "r3": ("cv", "vision", "e1", "debug", "p5", "ana"),
    "r5": ("speech", "speech-acct", "unallocated", "eval", "gpu2", "unallocated"),
    "r6": ("unallocated", "unallocated", "unallocated", "unallocated", "gpu2", "unallocated"),
}


def test_a_run_without_a_billed_instance_takes_its_values_from_its_jobs(tmp_path):
    # its cost is 0, its labels are what its jobs state: columns, labels and fields through the
    # dimensions' tag keys, the virtual-tag rules on job fields, else the default
    lake, cfg = lake_with_unbilled_runs(tmp_path)
    result = runs(lake, cfg, query())
    fields = ("team", "project", "experiment", "job_type", "cluster", "user")
    assert {r.run: tuple(r.values[d] for d in fields) for r in result.rows} == UNBILLED
    assert {r.run: (r.cost, r.currency) for r in result.rows if r.run != "r1"} == {
        "r3": (D(0), None), "r5": (D(0), None), "r6": (D(0), None)}
    by_team = runs(lake, cfg, query(by="team"))
    assert {t.group: t.runs for t in by_team.totals} == {("nlp",): 1, ("cv",): 1, ("speech",): 1, ("unallocated",): 1}


def test_the_cli_and_the_api_show_the_values_of_runs_without_cost(tmp_path):
    lake, cfg = lake_with_unbilled_runs(tmp_path)
    data = whole_config(tmp_path, lake)
    data["attribution"] = cfg.attribution.model_dump(exclude_none=True, include={"dimensions", "clusters"})
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(json.loads(json.dumps(data, default=str))))
    runner = CliRunner()
    args = ["--config", str(path), "runs", "--since", "2026-11-02", "--until", "2026-11-03", "--format"]
    shown = runner.invoke(cli, [*args, "json"])
    assert shown.exit_code == 0, shown.output
    fields = ("team", "project", "experiment", "job_type", "cluster", "user")
    assert {r["run"]: tuple(r[d] for d in fields) for r in json.loads(shown.stdout)["rows"]} == UNBILLED
    table = runner.invoke(cli, [*args, "table"], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    [r3] = [line for line in table.stdout.splitlines() if " r3 " in f" {line} "]
    assert all(value in r3 for value in ("cv", "vision", "e1", "debug")), table.stdout
    csv_out = runner.invoke(cli, [*args, "csv"])
    assert "r5,speech,speech-acct,unallocated,eval,gpu2" in csv_out.stdout, csv_out.stdout
    api = api_for(parse_config(yaml.safe_load(path.read_text())))
    response = api.handle("/api/v1/runs", parse_qs("since=2026-11-02&until=2026-11-03"), None)
    assert response.status == 200, response.body
    assert {r["run"]: tuple(r[d] for d in fields) for r in json.loads(response.body)["rows"]} == UNBILLED


def test_the_json_rows_keys_come_in_the_csv_columns_order_and_the_apis_too(tmp_path):
    """status47: a run's JSON put `user` before `cluster` (its jobs' values, then the clusters they
    ran on) where the CSV's header has cluster, user: one order, the CSV's, for billed runs, runs
    without cost and the folded rest alike."""
    lake, cfg = lake_with_unbilled_runs(tmp_path)
    data = whole_config(tmp_path, lake)
    data["attribution"] = cfg.attribution.model_dump(exclude_none=True, include={"dimensions", "clusters"})
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(json.loads(json.dumps(data, default=str))))
    args = ["--config", str(path), "runs", "--since", "2026-11-02", "--until", "2026-11-03", "--top", "1", "--format"]
    header = CliRunner().invoke(cli, [*args, "csv"]).stdout.splitlines()[0].split(",")
    assert header.index("cluster") < header.index("user") and header[-1] == "folded_runs"
    header = header[:-1]  # the folded rest's count: only its row has it in JSON
    rows = json.loads(CliRunner().invoke(cli, [*args, "json"]).stdout)["rows"]
    assert [(r["run"], r["currency"]) for r in rows] == [("r1", "USD"), ("r3", None), ("other", None)]
    assert [[key for key in row if key in header] for row in rows] == [header] * len(rows)  # main: user, cluster
    api = api_for(parse_config(yaml.safe_load(path.read_text())))
    response = api.handle("/api/v1/runs", parse_qs("since=2026-11-02&until=2026-11-03"), None)
    assert [[key for key in row if key in header] for row in json.loads(response.body)["rows"]] == [header] * 4


def test_a_window_past_the_bill_says_where_the_bill_ends_and_prices_no_gpu_hour(tmp_path):
    # the bill ends at 11:00 on the 2nd: on the 3rd r3's job still runs and nothing is billed
    lake, _ = lake_with_runs(tmp_path)
    path = write_config(tmp_path, lake)
    args = ["--config", path, "runs", "--since", "2026-11-03", "--until", "2026-11-04", "--format"]
    shown = CliRunner().invoke(cli, [*args, "json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert data["data_through"] == "2026-11-02T11:00:00Z" and data["sources"] == [
        {"source": "cur", "data_through": "2026-11-02T11:00:00Z"}]
    assert [(r["run"], r["cost"], r["currency"], r["cost_per_gpu_hour"], r["gpu_hours"]) for r in data["rows"]] == [
        ("r3", "0", None, None, "48.000000")]
    # its cost 0 is no bill yet, not no spend: JSON and CSV say so on stderr, as the table's data line does
    note = ("note: the window's last 24.0 h have no data yet (data through 2026-11-02 11:00 UTC): a run's hours "
            "after it have no cost yet\n")
    assert shown.stderr == note and CliRunner().invoke(cli, [*args, "csv"]).stderr == note
    table = CliRunner().invoke(cli, [*args, "table"], env={"COLUMNS": "250"})
    assert "data through 2026-11-02 11:00 UTC; the window's last 24.0 h have no data yet" in table.stdout, table.output
    lines = table.stdout.splitlines()
    [header] = [line for line in lines if "$/GPU-h" in line]
    [r3] = [line for line in lines if " r3 " in line]
    cells = dict(zip((c.strip() for c in re.split("[┃│]", header)), (c.strip() for c in r3.split("│"))))
    assert (cells["cost"], cells["currency"], cells["$/GPU-h"]) == ("0.00", "", "")
    # api47: /api/v1/runs, with no stderr, said nothing; it gives the sentence in `notes` (as attribute's API)
    answer = json.loads(api_for(load_config(path)).handle("/api/v1/runs", parse_qs("since=2026-11-03&until=2026-11-04"),
                                                           None).body)
    assert answer == {**data, "notes": [note.removeprefix("note: ").rstrip("\n")]}
    within = api_for(load_config(path)).handle("/api/v1/runs", parse_qs("since=2026-11-02&until=2026-11-02T11:00"), None)
    # a window the bill covers: no note of data to come, only the warning that r3's i-z is in no bill
    assert [note.split(":")[0] for note in json.loads(within.body)["notes"]] == [
        "1 job(s) of cluster p5 name instances no bill line of the window holds"]


def test_a_lake_without_a_bill_shows_the_runs_of_its_job_records(tmp_path):
    from service.core.lake import Lake
    from tests.attribution_helpers import add_jobs

    lake = Lake(tmp_path / "lake")
    add_jobs(lake, [job("7", 8, "2026-11-02T10:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"], run_id="r7",
                        team="nlp", project="llm")])
    data = whole_config(tmp_path, lake)
    result = runs(lake, parse_config(data), query())
    assert result.lake_empty and [(r.run, r.values["team"], r.values["project"], r.gpu_hours, r.cost, r.currency)
                                  for r in result.rows] == [("r7", "nlp", "llm", D(16), D(0), None)]
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(data))
    shown = CliRunner().invoke(cli, ["--config", str(path), "runs", "--since", "2026-11-02", "--until", "2026-11-03",
                                     "--format", "table"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    assert "holds no bill: the runs of its job records show no cost" in shown.stderr
    assert " r7 " in shown.stdout and "data through: no usage data in the lake" in shown.stdout
    csv_out = CliRunner().invoke(cli, ["--config", str(path), "runs", "--since", "2026-11-02", "--until",
                                       "2026-11-03", "--format", "csv", "--state", "completed"])
    assert csv_out.stdout.splitlines()[1].startswith("r7,nlp,llm,"), csv_out.output


def test_runs_without_since_on_a_lake_without_a_bill_ends_at_a_whole_hour_not_the_wall_clocks_microsecond(tmp_path):
    # break52c item 8: with no data's end, the last 7 days ended at utc_now(): since
    # "2026-11-30T07:23:29.528071Z"; they end at the whole hour after it, as a run's own span does
    from service.core.lake import Lake
    from tests.attribution_helpers import add_jobs

    now = datetime(2026, 12, 7, 7, 23, 29, 528071, tzinfo=timezone.utc)
    assert RunsQuery.parse(since=None, now=now).window == parse_window("2026-11-30T08:00Z", "2026-12-07T08:00Z")
    assert RunsQuery.parse(since=None, until="now", now=now).window.until == now  # typed: as typed
    lake = Lake(tmp_path / "lake")
    add_jobs(lake, [job("7", 8, "2026-11-02T10:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"], run_id="r7")])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(whole_config(tmp_path, lake)))
    shown = CliRunner().invoke(cli, ["--config", str(path), "runs", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    since, until = (datetime.fromisoformat(data[key].replace("Z", "+00:00")) for key in ("since", "until"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:00:00Z", data["since"]) and until - since == timedelta(days=7), data


def test_a_run_in_two_clusters_lists_both_and_attribute_splits_its_cost_per_cluster(tmp_path):
    # r1's job 1 holds p5's i-a 10:00-10:30 (8 GPUs: $40), its restart job 2 h100's i-b 10:30-11:00
    # ($40): one row of $80 whose cluster is both, sorted; `attribute --by cluster,run` still puts
    # $40 on each cluster. r9 ran in two clusters that bill nothing: its jobs' clusters, the same way.
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1",
                state="FAILED"),
            job("2", 8, "2026-11-02T10:30:00", "2026-11-02T11:00:00", instance_ids=["i-b"], run_id="r1",
                cluster="h100"),
            job("8", 1, "2026-11-02T10:00:00", "2026-11-02T11:00:00", run_id="r9", cluster="gpu3"),
            job("9", 1, "2026-11-02T11:00:00", "2026-11-02T12:00:00", run_id="r9", cluster="gpu2")]
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")], jobs)
    result = runs(lake, cfg, query())
    assert {r.run: (r.values["cluster"], r.cost, r.jobs, r.restarts) for r in result.rows} == {
        "r1": ("h100,p5", D(80), 2, 1), "r9": ("gpu2,gpu3", D(0), 2, 0)}
    assert {(t.group, t.cost) for t in runs(lake, cfg, query(by="cluster")).totals} == {
        (("h100,p5",), D(80)), (("gpu2,gpu3",), D(0))}
    assert by(lake, cfg, ["cluster", "run"]) == {("p5", "r1"): D(40), ("h100", "r1"): D(40),
                                                 ("p5", "idle"): D(40), ("h100", "idle"): D(40)}
    path = write_config(tmp_path, lake)
    args = ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03", "--format"]
    shown = CliRunner().invoke(cli, [*args, "json"])
    assert shown.exit_code == 0, shown.output
    assert {r["run"]: r["cluster"] for r in json.loads(shown.stdout)["rows"]} == {"r1": "h100,p5", "r9": "gpu2,gpu3"}
    csv_out = CliRunner().invoke(cli, [*args, "csv"])
    assert 'r1,unallocated,unallocated,unallocated,unallocated,"h100,p5",' in csv_out.stdout, csv_out.stdout


def test_a_window_of_idle_hours_only_says_no_job_held_gpus_and_what_the_idle_cost(tmp_path):
    # i-a is billed 10:00-12:00 ($80 an hour); r1's only job held it 10:00-10:30: 11:00-12:00 is idle
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1")]
    lake, _ = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-a", start="2026-11-02T11:00:00")], jobs)
    path = write_config(tmp_path, lake)
    idle_hour = ["--config", path, "runs", "--since", "2026-11-02T11:00:00", "--until", "2026-11-02T12:00:00"]
    shown = CliRunner().invoke(cli, [*idle_hour, "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["rows"] == []
    assert ("no job held GPUs of the shared clusters in the window 2026-11-02 11:00 → 2026-11-02 12:00 UTC; "
            "the clusters' instances cost p5 USD 80.00, of it idle 80.00") in shown.stderr, shown.stderr
    table = CliRunner().invoke(cli, [*idle_hour, "--format", "table"])  # no blank table and total row above it
    assert table.exit_code == 0 and table.stdout == "" and table.stderr.startswith("note: no job held GPUs"), \
        table.output
    failed = CliRunner().invoke(cli, ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03",
                                      "--state", "failed,timeout", "--format", "csv"])
    assert failed.exit_code == 0 and failed.stdout.splitlines()[1:] == [], failed.output
    assert "no run in the window 2026-11-02 00:00 → 2026-11-03 00:00 UTC ended FAILED or TIMEOUT" in failed.stderr
    assert "the runs there ended COMPLETED" in failed.stderr, failed.stderr


def test_the_help_of_since_names_every_form_it_reads(tmp_path):
    # `runs --since mtd` works as `attribute --since mtd` does: the help says so
    shown = CliRunner().invoke(cli, ["runs", "--help"])
    since = " ".join(shown.stdout.split("--since", 1)[1].split("--until", 1)[0].split())
    assert all(form in since for form in ("7d", "24h", "30d", "mtd", "2026-11-01")), since
    lake, _ = lake_with_runs(tmp_path)
    month = CliRunner().invoke(cli, ["--config", write_config(tmp_path, lake), "runs", "--since", "mtd",
                                     "--format", "json"])
    assert month.exit_code == 0 and json.loads(month.stdout)["since"] == "2026-11-01T00:00:00Z", month.output


def test_on_a_terminal_without_format_runs_shows_its_table_with_totals_and_the_data_line(tmp_path, monkeypatch):
    # `spendlake runs --since 30d` typed at a terminal: the formatted table (money, totals, where
    # the bill ends), not the raw rows that --format table improves on
    lake, _ = lake_with_runs(tmp_path)
    path = write_config(tmp_path, lake)
    monkeypatch.setattr("service.cli.output.is_tty", lambda stream=None: True)
    shown = CliRunner().invoke(cli, ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03"],
                               env={"COLUMNS": "250"})
    asked = CliRunner().invoke(cli, ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03",
                                     "--format", "table"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0 and shown.stdout == asked.stdout, shown.stdout
    assert "billed cost per run, 2026-11-02T00:00:00Z → 2026-11-03T00:00:00Z" in shown.stdout
    assert "$/GPU-h" in shown.stdout and "data through 2026-11-02 11:00 UTC" in shown.stdout
    assert "idle is empty" not in shown.stderr  # every billed run has its idle share


def test_34_a_job_state_from_a_jobs_file_is_shown_not_run_in_the_note_on_an_empty_answer(tmp_path):
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1",
                state="FAILED\x1b]0;owned\x07\n2026-11-02 forged line")]
    lake, _ = setup(tmp_path, [gpu_line("i-a")], jobs)
    shown = CliRunner().invoke(cli, ["--config", write_config(tmp_path, lake), "runs", "--since", "2026-11-02",
                                     "--until", "2026-11-03", "--state", "completed", "--format", "table"])
    assert shown.exit_code == 0, shown.output
    assert "the runs there ended FAILED\\x1b]0;OWNED\\x07" in shown.stderr  # the terminal shows it, runs nothing
    assert "\x1b" not in shown.output and "\x07" not in shown.output


def test_the_runs_table_shows_times_and_gpu_hours_as_a_runs_story_does(tmp_path):
    # one run's story and the runs table side by side: `2026-11-02 10:00`, not `2026-11-02T10:00`, and
    # GPU-hours with their decimal, so a column reads 8.0 beside 2.0 and 28.0, not 8 beside 2.5
    lake, _ = lake_with_runs(tmp_path)
    path = write_config(tmp_path, lake)
    shown = CliRunner().invoke(cli, ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03", "--format", "table"], env={"COLUMNS": "250"})
    story = CliRunner().invoke(cli, ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03", "--run", "r1", "--format", "table"],
                               env={"COLUMNS": "250"})
    assert shown.exit_code == 0 and story.exit_code == 0, shown.output + story.output
    [r1] = [line for line in shown.stdout.splitlines() if line.startswith("│ r1 ")]
    cells = [cell.strip() for cell in r1.strip("│").split("│")]
    assert cells[6:8] == ["8", "8.0"] and cells[-2:] == ["2026-11-02 10:00", "2026-11-02 11:00"], cells
    assert re.search(r"│ start +│ 2026-11-02 10:00", story.stdout), story.stdout  # the labels' width aside
    [r3] = [line for line in shown.stdout.splitlines() if line.startswith("│ r3 ")]
    assert [cell.strip() for cell in r3.strip("│").split("│")][-2:] == ["2026-11-02 10:00", "running"]


def test_the_runs_tables_total_row_sums_the_gpu_hours_per_currency_as_the_json_totals_do(tmp_path):
    """The total row showed the cost alone: the GPU-hours the runs used (r1 8 + r2 2 billed in USD,
    r3 28 in no bill) were in the JSON's totals only."""
    lake, _ = lake_with_runs(tmp_path)
    shown = CliRunner().invoke(cli, ["--config", write_config(tmp_path, lake), "runs", "--since", "2026-11-02",
                                     "--until", "2026-11-03", "--format", "table"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    totals = [[cell.strip() for cell in line.strip("│").split("│")] for line in shown.stdout.splitlines()
              if line.startswith("│ total") or line.startswith("│       ")]
    header = next(line for line in shown.stdout.splitlines() if line.startswith("┃ run "))
    at = [cell.strip() for cell in header.strip("┃").split("┃")].index("GPU-h")
    assert sorted(row[at] for row in totals) == ["10.0", "28.0"], totals


def test_at_120_columns_the_runs_table_keeps_state_and_idle_before_the_times(tmp_path):
    """At 120 columns state and idle were left out with the times: "what failed" needs state."""
    lake, _ = lake_with_runs(tmp_path)
    args = ["--config", write_config(tmp_path, lake), "runs", "--since", "2026-11-02", "--until", "2026-11-03",
            "--format", "table"]
    shown = CliRunner().invoke(cli, args, env={"COLUMNS": "120"})
    assert shown.exit_code == 0, shown.output
    header = next(line for line in shown.stdout.splitlines() if line.startswith("┃ run "))
    assert "state" in header and "idle" in header and "cost" in header and "start" not in header, header
    [r2] = [line for line in shown.stdout.splitlines() if line.startswith("│ r2 ")]
    assert "CANCELLED" in r2 and "75.0%" in r2, r2
    assert max(len(line) for line in shown.stdout.splitlines()) <= 120
    assert "start, end" in shown.stderr and "state" not in shown.stderr.split("(")[0]


def test_runs_and_a_runs_story_in_yen_show_whole_yen(tmp_path):
    # one hour of an 8-GPU instance billed JPY 12,345.6: r1 holds all of it, the yen have no sen
    lake, _ = setup(tmp_path, [{**gpu_line("i-a", cost="12345.6"), "currency": "JPY"}],
                    [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1")])
    path = write_config(tmp_path, lake)
    args = ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03", "--format", "table"]
    table = CliRunner().invoke(cli, args, env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    [r1] = [line for line in table.stdout.splitlines() if " r1 " in line]
    assert "12,346" in r1 and "12,345.60" not in table.stdout and "1,543" in r1, table.stdout  # 12,345.6 / 8 GPU-h
    story = CliRunner().invoke(cli, [*args, "--run", "r1"], env={"COLUMNS": "250"})
    assert story.exit_code == 0, story.output
    assert "JPY 12,346" in story.stdout and ".60" not in story.stdout, story.stdout


@pytest.mark.parametrize("credit", ["-70", "-80", "-100"])
def test_a_credit_on_an_instance_leaves_the_idle_share_out_rather_than_outside_0_to_100(tmp_path, credit):
    # i-b's $80 hour, its job holding $20 of it, and an idle hour after it with a credit of $70
    # (or $80, $100): idle $60 - $70 of a net $10 read -100%, of a net $0 nothing, $60 - $100 of
    # -$20 read 200%; no share
    jobs = [job("3", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r2",
                state="CANCELLED", team="nlp")]
    lake, cfg = setup(tmp_path, [gpu_line("i-b"), {**gpu_line("i-b", cost=credit, start="2026-11-02T11:00:00"), "category": "Credit"}], jobs)
    assert [(r.run, r.cost, r.idle_share) for r in runs(lake, cfg, query()).rows] == [("r2", D(20), None)]
    story = runs(lake, cfg, query(run="r2")).story
    assert story.idle_shares() == {}  # the row's, from the story's parts
    table = top_runs(cfg, lake, parse_window("2026-11-02", "2026-11-03"), 5)
    assert [r["idle_share_pct"] for r in table.rows] == [None] and table.notes == [NO_IDLE_SHARE]
    assert [i["share"] for i in story.to_json()["idle"]] == ["0.7500"]  # while it held them: the credit is after
    shown = CliRunner().invoke(cli, ["--config", write_config(tmp_path, lake), "runs", "--since", "2026-11-02",
                                     "--until", "2026-11-03", "--format", "table"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    assert "note: a run's idle is empty where credits or negations make its instances' cost net (or 0)" in shown.stderr


def test_a_restart_redoes_the_failed_work_not_another_benchmark_or_sweep_task(tmp_path):
    # an eval suite (gsm8k fails at 10:20, safety starts after: another benchmark, no restart) and a
    # sweep's array tasks (task 0 fails, tasks 1 and 2 run after: siblings, no restart); a
    # requeue of task 0 (same job id) and a resubmission of gsm8k (same name, another id) are restarts
    suite = [job(record, 1, start, end, instance_ids=["i-a"], run_id="evals", name=name, state=state)
             for record, name, start, end, state in (
                 ("10", "eval-gsm8k", "2026-11-02T10:00:00", "2026-11-02T10:20:00", "FAILED"),
                 ("11", "eval-safety", "2026-11-02T10:30:00", "2026-11-02T10:50:00", "COMPLETED"),
                 ("12", "EVAL-GSM8K", "2026-11-02T11:00:00", "2026-11-02T11:20:00", "COMPLETED"))]
    sweep = [{**job(record, 1, start, end, instance_ids=["i-b"], run_id="sweep", name="eval-sweep", state=state),
              "record_id": f"p5/{record}@{start}"} for record, start, end, state in (
                 ("7_0", "2026-11-02T10:00:00", "2026-11-02T10:10:00", "NODE_FAIL"),
                 ("7_1", "2026-11-02T10:15:00", "2026-11-02T10:30:00", "COMPLETED"),
                 ("7_2", "2026-11-02T10:30:00", "2026-11-02T10:45:00", "FAILED"),
                 ("7_0", "2026-11-02T10:45:00", "2026-11-02T11:00:00", "COMPLETED"))]
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")], suite + sweep)
    got = {r.run: (r.jobs, r.restarts) for r in runs(lake, cfg, query()).rows}
    assert got == {"evals": (3, 1), "sweep": (4, 1)}


def test_an_attempt_renamed_by_hand_is_a_restart_of_its_run_and_a_new_version_is_not(tmp_path):
    # "train" fails at 10:20; resubmitted by hand as "train-try2" under the same run label (job
    # 21): a restart; "sft" fails and "sft_v2" starts after it: a new version, no restart. Without
    # the shared run id each is its own run, and `runs` shows no restart at all.
    def attempts(run):
        return [job(f"{run}{record}", 1, start, end, instance_ids=["i-a"], name=name, state=state,
                    **({"run_id": run} if run else {}))
                for record, name, start, end, state in (
                    ("20", "train", "2026-11-02T10:00:00", "2026-11-02T10:20:00", "FAILED"),
                    ("21", "Train-Try2", "2026-11-02T10:30:00", "2026-11-02T10:50:00", "COMPLETED"),
                    ("30", "sft", "2026-11-02T10:00:00", "2026-11-02T10:10:00", "FAILED"),
                    ("31", "sft_v2", "2026-11-02T10:15:00", "2026-11-02T10:50:00", "COMPLETED"))]
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], attempts("exp") + attempts(""))
    got = {r.run: (r.jobs, r.restarts) for r in runs(lake, cfg, query()).rows}
    assert got == {"exp": (4, 1), "20": (1, 0), "21": (1, 0), "30": (1, 0), "31": (1, 0)}


def test_a_run_id_reused_in_a_cluster_that_bills_nothing_names_both_clusters_and_prices_the_billed_hours(tmp_path):
    # "exp" holds p5's i-a 10:00-10:30 (8 GPUs: $40) and, under the same run id, 8 GPUs of
    # k8s-east, whose instances are in no bill: one row naming both clusters, as README's
    # `cluster` says (every cluster its jobs ran in), its cost p5's $40, its price p5's hours' ($5 would
    # spread the $40 over hours no bill holds)
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="exp"),
            job("2", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", run_id="exp", cluster="k8s-east")]
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], jobs)
    [row] = runs(lake, cfg, query()).rows
    assert (row.values["cluster"], row.cost, row.jobs, row.gpu_hours) == ("k8s-east,p5", D(40), 2, D(8))
    assert row.cost_per_gpu_hour == D(10)  # $40 for p5's 4 GPU-hours: k8s-east's 4 have no price


def test_a_job_id_repeated_in_a_cluster_that_bills_nothing_is_priced_by_its_own_clusters_hours(tmp_path):
    # as above with both jobs "1" (a scheduler's job ids are its cluster's own): p5's job 1 has the
    # cost, k8s-east's job 1 none, so the price is still p5's 4 GPU-hours' ($5 when keyed by id alone)
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="exp"),
            {**job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", run_id="exp", cluster="k8s-east"),
             "record_id": "k8s-east/1@x"}]
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], jobs)
    [row] = runs(lake, cfg, query()).rows
    assert (row.cost, row.jobs, row.gpu_hours, row.priced_hours) == (D(40), 2, D(8), D(4))
    assert row.cost_per_gpu_hour == D(10)


def test_hours_past_the_bills_end_add_gpu_hours_but_no_price(tmp_path):
    # r3's job holds 8 GPUs of i-a from 10:00 and runs on; the bill holds i-a's 10:00 hour ($80)
    # and ends at 11:00: a window to 14:00 counts 32 GPU-hours, $80, at $10 a GPU-hour (the bill's
    # hour), not $2.50 over hours the bill does not reach yet
    jobs = [job("1", 8, "2026-11-02T10:00:00", None, instance_ids=["i-a"], run_id="r3", state="RUNNING")]
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], jobs)
    [row] = runs(lake, cfg, query(since="2026-11-02T10:00:00Z", until="2026-11-02T14:00:00Z")).rows
    assert (row.gpu_hours, row.cost, row.cost_per_gpu_hour) == (D(32), D(80), D(10))


def test_a_run_named_other_is_its_own_row_beside_the_folded_rest_and_reserved_ids_are_said(tmp_path):
    # r1 of lake_with_runs renamed `other` ($80), r2 $20: with --top 1 the report dropped the real
    # run (it kept rows whose run was not "other") and the table showed two rows named other
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="other"),
            job("3", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r2"),
            job("5", 4, "2026-11-02T10:30:00", "2026-11-02T11:00:00", instance_ids=["i-b"], run_id="idle")]
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")], jobs)
    top = runs(lake, cfg, query(top="1")).rows
    assert [(r.run, r.cost, r.folded_runs) for r in top] == [("other", D(80), 0), ("other", D(40), 2)]
    assert [r.to_json().get("folded_runs") for r in top] == [None, 2]
    table = top_runs(cfg, lake, parse_window("2026-11-02", "2026-11-03"), 1)
    assert [(r["run"], r["cost"]) for r in table.rows] == [("other", D(80))]
    path = write_config(tmp_path, lake)
    shown = CliRunner().invoke(cli, ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03",
                                     "--top", "1", "--format", "table"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0 and "other (2 runs)" in shown.stdout, shown.output
    idle = CliRunner().invoke(cli, ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03",
                                    "--run", "idle", "--format", "json"])
    assert idle.exit_code == 0 and D(json.loads(idle.stdout)["rows"][0]["cost"]) == 20, idle.output
    assert ("note: run id 'idle' is also what attribute's run dimension calls the clusters' idle: `attribute --where "
            "run=idle` adds that idle to this run's cost") in idle.stderr, idle.stderr


def test_with_top_the_csv_tells_the_folded_rest_from_a_run_named_other_by_its_folded_runs(tmp_path):
    """`--top 1 --format csv` wrote two lines `other,...`: a script could not tell the run named
    other ($80) from the two runs folded beside it ($40); JSON said so in `folded_runs` only."""
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="other"),
            job("3", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r2"),
            job("5", 4, "2026-11-02T10:30:00", "2026-11-02T11:00:00", instance_ids=["i-b"], run_id="r3")]
    lake, _ = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")], jobs)
    args = ["--config", write_config(tmp_path, lake), "runs", "--since", "2026-11-02", "--until", "2026-11-03",
            "--format", "csv"]
    folded = CliRunner().invoke(cli, [*args, "--top", "1"])
    assert folded.exit_code == 0, folded.output
    rows = list(csv.DictReader(io.StringIO(folded.stdout)))
    assert [(r["run"], D(r["cost"]), r["folded_runs"]) for r in rows] == [("other", D(80), ""), ("other", D(40), "2")]
    plain = CliRunner().invoke(cli, args)  # without --top no row is folded: the columns as before
    assert plain.stdout.splitlines()[0].endswith(",state,start,end,eval_cost"), plain.output


def test_the_folded_rest_and_the_totals_sum_the_runs_gpu_hours_before_rounding(tmp_path):
    """Three runs of 1 GPU for 20 minutes on i-b ($10 a GPU-hour) are 0.333333 GPU-hours each as
    shown: folded by --top 1 beside r1 (8 GPU-hours) they showed 0.999999 GPU-hours at $10.000010 a
    GPU-hour and a total of 8.999999 (the 10M-line month: 1,145,171.719734 for 1,145,171.719722)."""
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1"),
            *(job(str(n), 1, "2026-11-02T10:00:00", "2026-11-02T10:20:00", instance_ids=["i-b"], run_id=f"s{n}")
              for n in (2, 3, 4))]
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")], jobs)
    data = runs(lake, cfg, query(top="1")).to_json()
    assert [(r["run"], r["gpu_hours"], r["cost_per_gpu_hour"]) for r in data["rows"]] == [
        ("r1", "8.000000", "10.000000"), ("other", "1.000000", "10.000000")]
    assert [t["gpu_hours"] for t in data["totals"]] == ["9.000000"]


def test_a_restart_whose_failed_attempt_ended_before_the_window_counts_in_it(tmp_path):
    # "r1" trains on the 1st and fails at 23:00; its restart starts on the 2nd: asked from the 2nd,
    # the run's one job in the window re-ran failed work (a research lead's "jobs (restarts)": 1 (1)).
    # "r2" failed on the 1st at another benchmark: its job on the 2nd is no restart. "r3"'s job on
    # the 2nd began before its failure on the 1st ended: no restart either.
    jobs = [job("1", 8, "2026-11-01T20:00:00", "2026-11-01T23:00:00", instance_ids=["i-a"], run_id="r1",
                name="train", state="FAILED"),
            job("2", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1",
                name="train-retry"),
            job("3", 4, "2026-11-01T20:00:00", "2026-11-01T21:00:00", instance_ids=["i-b"], run_id="r2",
                name="eval-gsm8k", state="FAILED"),
            job("4", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r2",
                name="eval-safety"),
            job("5", 1, "2026-11-01T20:00:00", "2026-11-01T22:00:00", instance_ids=["i-b"], run_id="r3",
                name="sft", state="FAILED"),
            job("6", 1, "2026-11-01T21:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r3", name="sft")]
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")], jobs)
    got = {r.run: (r.jobs, r.restarts) for r in runs(lake, cfg, query()).rows}
    assert got == {"r1": (1, 1), "r2": (1, 0), "r3": (1, 0)}
    story = runs(lake, cfg, query(run="r1")).story
    assert [(j.job, j.restart) for j in story.jobs] == [("2", True)]
    # over the run's whole span both attempts are in the window: the same one restart
    assert [(r.jobs, r.restarts) for r in runs(lake, cfg, RunsQuery.parse(since=None, run="r1")).rows] == [(2, 1)]


def test_groups_come_costliest_first_as_the_runs_in_each_and_top_keeps_that_order(tmp_path):
    # project alpha: a1 $10, a2 $20 (= $30); beta: b1 $40, b2 $80 (= $120); gamma: g1 on no billed
    # instance ($0). By name alpha came first: a research lead asking `--by project` reads the
    # costliest project first, as `--top` keeps the costliest runs of each
    jobs = [job(record, gpus, "2026-11-02T10:00:00", end, instance_ids=[instance], run_id=run, project=project)
            for record, gpus, end, instance, run, project in (
                ("1", 2, "2026-11-02T10:30:00", "i-a", "a1", "alpha"), ("2", 4, "2026-11-02T10:30:00", "i-a", "a2", "alpha"),
                ("3", 8, "2026-11-02T10:30:00", "i-b", "b1", "beta"), ("4", 8, "2026-11-02T11:00:00", "i-c", "b2", "beta"),
                ("5", 1, "2026-11-02T10:30:00", "i-z", "g1", "gamma"))]
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b"), gpu_line("i-c")], jobs)
    result = runs(lake, cfg, query(by="project"))
    assert [(r.values["project"], r.run, r.cost) for r in result.rows] == [
        ("beta", "b2", D(80)), ("beta", "b1", D(40)), ("alpha", "a2", D(20)), ("alpha", "a1", D(10)),
        ("gamma", "g1", D(0))]
    assert [(t.group, t.cost) for t in result.totals] == [(("beta",), D(120)), (("alpha",), D(30)), (("gamma",), D(0))]
    top = runs(lake, cfg, query(by="project", top="1")).rows
    assert [(r.values["project"], r.run, r.cost) for r in top] == [
        ("beta", "b2", D(80)), ("beta", "other", D(40)), ("alpha", "a2", D(20)), ("alpha", "other", D(10)),
        ("gamma", "g1", D(0))]
    runner, path = CliRunner(), write_config(tmp_path, lake)
    args = ["--config", path, "runs", "--since", "2026-11-02", "--until", "2026-11-03", "--by", "project", "--top", "1"]
    data = json.loads(runner.invoke(cli, [*args, "--format", "json"]).stdout)
    assert [(r["project"], r["run"]) for r in data["rows"]] == [(r.values["project"], r.run) for r in top]
    assert [t["project"] for t in data["totals"]] == ["beta", "alpha", "gamma"]
    lines = list(csv.DictReader(io.StringIO(runner.invoke(cli, [*args, "--format", "csv"]).stdout)))
    assert [(r["project"], r["run"], r["folded_runs"]) for r in lines] == [
        ("beta", "b2", ""), ("beta", "other", "1"), ("alpha", "a2", ""), ("alpha", "other", "1"), ("gamma", "g1", "")]


def test_runs_without_since_answers_the_last_7_days_of_the_data_as_the_api_does(tmp_path):
    """`spendlake runs` without --since was exit 2 (the window needs a start): it answers the
    last RUNS_SINCE (7d) of the data, as `runs --since 7d`, and /api/v1/runs without `since` the
    same; the data ends at 11:00 on 2026-11-02 (i-a's and i-b's hour), so the window is
    2026-10-26 11:00 to then, holding r1 ($80), r2 ($20) and r3 (running, not billed: $0).
    `--until` alone counts the 7 days back from it; `--run` alone keeps its own span."""
    lake, _ = lake_with_runs(tmp_path)
    path = write_config(tmp_path, lake)

    def shown(*args: str) -> dict:
        result = CliRunner().invoke(cli, ["--config", path, "runs", *args, "--format", "json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    default = shown()
    assert default == shown("--since", "7d")
    assert (default["since"], default["until"]) == ("2026-10-26T11:00:00Z", "2026-11-02T11:00:00Z")
    assert {r["run"]: r["cost"] for r in default["rows"]} == {"r1": "80.000000000000", "r2": "20.000000000000",
                                                             "r3": "0"}
    api = api_for(parse_config(whole_config(tmp_path, lake)))
    served = json.loads(api.handle("/api/v1/runs", {}, None).body)
    assert {key: served[key] for key in default} == default
    until = shown("--until", "2026-11-02T10:30:00")
    assert (until["since"], until["until"]) == ("2026-10-26T10:30:00Z", "2026-11-02T10:30:00Z")
    assert (shown("--run", "r2")["since"], shown("--run", "r2")["until"]) == ("2026-11-02T10:00:00Z",
                                                                             "2026-11-02T11:00:00Z")
    from service.attribution import RUNS_SINCE
    from service.cli.runs import runs_command

    [since] = [option for option in runs_command.params if option.name == "since"]
    assert RUNS_SINCE == "7d"
    assert f"[default: {RUNS_SINCE}; with --run: the run's own span" in " ".join(since.help.split())


def test_a_config_without_clusters_has_no_runs_and_says_so_with_exit_0(tmp_path):
    """A config without `clusters:` (nothing places GPU instances' cost on jobs) made `runs` exit
    2 (`attribution.clusters: no shared clusters are configured`), /api/v1/runs a 400: there are no
    runs to show, which is no usage error. It answers the JSON contract with no row, says why on
    stderr and in `notes` (the API's too), exit 0; the table prints no table, only the note."""
    lake, _ = lake_with_runs(tmp_path)
    config = {key: value for key, value in whole_config(tmp_path, lake).items() if key != "attribution"}
    path = tmp_path / "clusterless.yaml"
    path.write_text(yaml.safe_dump(config))
    note = ("no runs: the config has no `clusters:` under `attribution:` (attribution.clusters), which places the "
            "shared GPU clusters' instance cost on the jobs that held them: add it to see runs (README: Shared GPU "
            "clusters)")
    shown = CliRunner().invoke(cli, ["--config", str(path), "runs", "--since", "2026-11-02", "--until", "2026-11-03", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert {key: data[key] for key in ("since", "until", "rows", "totals", "notes")} == {
        "since": "2026-11-02T00:00:00Z", "until": "2026-11-03T00:00:00Z", "rows": [], "totals": [], "notes": [note]}
    assert data["data_through"] == "2026-11-02T11:00:00Z"
    assert shown.stderr == f"note: {note}\n"
    table = CliRunner().invoke(cli, ["--config", str(path), "runs", "--format", "table"])
    assert (table.exit_code, table.stdout, table.stderr) == (0, "", f"note: {note}\n")
    served = api_for(parse_config(config)).handle("/api/v1/runs", parse_qs("since=2026-11-02&until=2026-11-03"), None)
    assert served.status == 200 and json.loads(served.body) == data
    # one run on a lake no job record nor bill names it in: the same note, exit 0 (it was exit 2, `--since: no job
    # record or bill in the lake names run 'r1'`), over `runs`' window
    empty = tmp_path / "empty.yaml"
    empty.write_text(yaml.safe_dump({"lake": str(tmp_path / "empty-lake"), "sources": []}))
    one = CliRunner().invoke(cli, ["--config", str(empty), "runs", "--run", "r1", "--format", "json"])
    assert (one.exit_code, json.loads(one.stdout)["rows"], one.stderr) == (0, [], f"note: {note}\n"), one.output
