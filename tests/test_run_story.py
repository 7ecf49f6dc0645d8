"""`spendlake runs --run X` and /api/v1/runs?run=X: one run's story. Figures by hand
(p5.48xlarge: 8 GPUs, $80 an hour, i.e. $10 a GPU-hour; i-a billed 10:00-11:00 and 12:00-13:00,
i-b 10:00-12:00):

- run r1, 10:00-11:00: job 1 (pretrain, 8 GPUs of i-a, 10:00-10:30) FAILED: $40; its restart job 2
  (8 GPUs of i-a, 10:30-11:00) COMPLETED: $40; job 3, an eval (4 GPUs of i-b, 10:00-10:30):
  4·30/(8·60) of $80 = $20. Then job 7 (pretrain) requeued: attempt 7@1 8 GPUs of i-a 12:00-12:15
  (2 GPU-hours) and attempt 7@2 12:15-12:45 (4 GPU-hours), both REQUEUED: allocation places $60 on
  job 7, each attempt's parts carrying its record: $20 and $40.
  r1 costs $160: pretrain $140, eval $20; COMPLETED $60, FAILED $40, REQUEUED $60 (unfinished: $100).
- run r2: job 4 (debug, 4 GPUs of i-b, 10:00-10:15): 4·15/(8·60) of $80 = $10, CANCELLED.
- idle beside r1: the instance-hours r1 held: i-a 10:00 ($80, idle 0), i-a 12:00 ($80: 45 min of
  8 GPUs = $60 held by job 7, idle $20), i-b 10:00 ($80: r1 $20, r2 $10, idle $50): $70 of $240
  (0.2917). i-b's 11:00 hour ($80, all idle) r1 never held: outside its idle, inside the row's
  idle share (over the whole window: (20 + 50 + 80) / 320 = 0.4688).
- run r3: job 5 on i-z, which the bill lacks: jobs, no billed cost.
- run r4: job 6 on i-a at 14:00, after the bill's end (13:00): no cost yet.
"""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import yaml
from click.testing import CliRunner

from connectors.jobs_base import job_row
from service.attribution import RunsQuery, runs
from service.cli.main import cli
from service.cli.run_story import UNFINISHED_LINE
from service.core import staging
from service.core.config import parse_config
from service.core.errors import UsageError
from service.core.lake import Lake
from service.core.timewindow import iso_utc
from tests.attribution_helpers import add_jobs
from tests.test_clusters_allocation import gpu_line, job, setup
from tests.test_runs import whole_config
from tests.test_service_http import api_for

D = Decimal
DAY = ["--since", "2026-11-02", "--until", "2026-11-03"]


def attempt(record: str, start: str, end: str) -> dict:
    from datetime import datetime
    return job_row(record_id=f"p5/7@{record}", job_id="7", cluster="p5", state="REQUEUED", run_id="r1",
                   start_time=datetime.fromisoformat(start), end_time=datetime.fromisoformat(end), gpus=8.0,
                   instance_ids=["i-a"], job_type="pretrain")


def written_config(tmp_path, lake) -> Path:
    """The whole config of `lake` written as tmp_path/spendlake.yaml, for the CLI's --config."""
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(whole_config(tmp_path, lake)))
    return path


def lake_with_a_story(tmp_path, currency: str = "USD"):
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1",
                state="FAILED", job_type="pretrain", project="llm"),
            job("2", 8, "2026-11-02T10:30:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1",
                job_type="pretrain", project="llm"),
            job("3", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r1",
                job_type="eval", project="llm"),
            attempt("1", "2026-11-02T12:00:00", "2026-11-02T12:15:00"),
            attempt("2", "2026-11-02T12:15:00", "2026-11-02T12:45:00"),
            job("4", 4, "2026-11-02T10:00:00", "2026-11-02T10:15:00", instance_ids=["i-b"], run_id="r2",
                state="CANCELLED", job_type="debug"),
            job("5", 2, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-z"], run_id="r3"),
            job("6", 8, "2026-11-02T14:00:00", "2026-11-02T15:00:00", instance_ids=["i-a"], run_id="r4")]
    lines = [gpu_line("i-a"), gpu_line("i-a", start="2026-11-02T12:00:00"),
             gpu_line("i-b"), gpu_line("i-b", start="2026-11-02T11:00:00")]
    lake, cfg = setup(tmp_path, [{**line, "currency": currency} for line in lines], jobs)
    path = written_config(tmp_path, lake)
    return lake, cfg, str(path)


def story(lake, cfg, run="r1"):
    return runs(lake, cfg, RunsQuery.parse(since="2026-11-02", until="2026-11-03", run=run))


def test_one_run_shows_each_attempt_with_its_cost_nodes_and_gpu_hours(tmp_path):
    lake, cfg, _ = lake_with_a_story(tmp_path)
    result = story(lake, cfg)
    [row] = result.rows  # the run's row as `runs` shows it, alone
    # restarts: jobs 2, 7@1 and 7@2 started after job 1 failed at 10:30
    assert (row.run, row.jobs, row.restarts, row.cost, row.idle_share) == ("r1", 5, 3, D(160), D("0.4688"))
    assert [(t.runs, t.jobs, t.cost) for t in result.totals] == [(1, 5, D(160))]
    jobs = [(j.job, j.record, j.job_type, j.state, j.gpus, j.gpu_hours, j.cost, j.instance_ids, j.shared)
            for j in result.story.jobs]
    assert jobs == [
        ("1", "p5/1", "pretrain", "FAILED", D(8), D(4), D(40), ("i-a",), False),
        ("3", "p5/3", "eval", "COMPLETED", D(4), D(2), D(20), ("i-b",), False),
        ("2", "p5/2", "pretrain", "COMPLETED", D(8), D(4), D(40), ("i-a",), False),
        ("7", "p5/7@1", "pretrain", "REQUEUED", D(8), D(2), D(20), ("i-a",), False),
        ("7", "p5/7@2", "pretrain", "REQUEUED", D(8), D(4), D(40), ("i-a",), False)]
    assert sum(j.cost for j in result.story.jobs) == row.cost


def test_the_splits_by_job_type_and_state_sum_to_the_run_and_idle_stands_beside_it(tmp_path):
    lake, cfg, _ = lake_with_a_story(tmp_path)
    data = story(lake, cfg).to_json()
    assert [(s["job_type"], D(s["cost"]), s["jobs"]) for s in data["by_job_type"]] == [
        ("pretrain", D(140), 4), ("eval", D(20), 1)]
    assert [(s["state"], D(s["cost"]), s["unfinished"]) for s in data["by_state"]] == [
        ("COMPLETED", D(60), False), ("REQUEUED", D(60), True), ("FAILED", D(40), True)]
    assert [(i["currency"], D(i["cost"]), D(i["held_cost"]), i["share"]) for i in data["idle"]] == [
        ("USD", D(70), D(240), "0.2917")]
    assert [(i["instance"], D(i["cost"]), D(i["held_cost"]), D(i["idle"]), D(i["window_cost"]), D(i["window_idle"]))
            for i in data["instances"]] == [("i-a", D(140), D(160), D(20), D(160), D(20)),
                                            ("i-b", D(20), D(80), D(50), D(160), D(130))]
    # the runs JSON contract stays: the rows of that one run, keys added beside it
    assert {"since", "until", "rows", "totals"} <= set(data) and [r["run"] for r in data["rows"]] == ["r1"]


def test_the_run_agrees_with_attribute_where_run_to_the_cent(tmp_path):
    lake, cfg, path = lake_with_a_story(tmp_path)
    data = story(lake, cfg).to_json()
    runner = CliRunner()
    for dim, split in (("job_type", "by_job_type"), ("job_state", "by_state")):
        shown = runner.invoke(cli, ["--config", path, "attribute", *DAY, "--where", "run=r1", "--by", dim,
                                    "--format", "json"])
        assert shown.exit_code == 0, shown.output
        attributed = {r[dim]: D(r["cost"]) for r in json.loads(shown.stdout)["rows"]}
        assert attributed == {s["job_type" if dim == "job_type" else "state"]: D(s["cost"]) for s in data[split]}


def test_the_cli_prints_tables_csv_and_json_of_one_run(tmp_path):
    _, _, path = lake_with_a_story(tmp_path)
    runner = CliRunner()
    args = ["--config", path, "runs", *DAY, "--run", "R1", "--format"]  # any case
    table = runner.invoke(cli, [*args, "table"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "jobs of r1 (each attempt)" in table.stdout and "p5/7" not in table.stdout
    assert "REQUEUED (unfinished)" in table.stdout and "USD 160.00" in table.stdout
    assert f"{UNFINISHED_LINE}: USD 100.00 of 160.00 (62.5%)" in " ".join(table.stdout.split())
    assert ("idle in the hours it held its instances, beside the run, not in its cost: USD 70.00 (29.2%) of the 240.00 "
            "those instance-hours cost") in " ".join(table.stdout.split())
    csv_out = runner.invoke(cli, [*args, "csv"])
    lines = csv_out.stdout.splitlines()
    assert lines[0] == ("run,job,record,cluster,job_type,state,start,end,gpus,gpu_hours,nodes,instance_ids,cost,"
                        "currency,shared,restart,relaunched") and len(lines) == 6
    # job 1 FAILED and job 2 did its work again: relaunched, as the JSON says it (the CSV lacked the column)
    assert [line.split(",")[2] for line in lines[1:] if line.endswith(",true")] == ["p5/1"]
    assert lines[4].startswith("r1,7,p5/7@1,p5,pretrain,REQUEUED,2026-11-02T12:00:00Z,2026-11-02T12:15:00Z,8,"), lines
    shown = runner.invoke(cli, [*args, "json"])
    data = json.loads(shown.stdout)
    assert [r["run"] for r in data["rows"]] == ["r1"] and len(data["jobs"]) == 5 and data["notes"] == []


def test_each_attempt_that_re_ran_failed_work_is_marked_as_the_rows_restarts_count_it(tmp_path):
    """`runs --run` listed a run's jobs with only the row's restarts count (3 for r1): which of
    them re-ran failed work it did not say. Each attempt now carries `restart` (JSON, CSV, the
    table's column): jobs 2, 7@1 and 7@2 started after job 1 failed at 10:30; job 3 began before."""
    lake, cfg, path = lake_with_a_story(tmp_path)
    result = story(lake, cfg)
    assert [(j.record, j.restart) for j in result.story.jobs] == [
        ("p5/1", False), ("p5/3", False), ("p5/2", True), ("p5/7@1", True), ("p5/7@2", True)]
    assert sum(j.restart for j in result.story.jobs) == result.rows[0].restarts
    runner = CliRunner()
    args = ["--config", path, "runs", *DAY, "--format"]
    data = json.loads(runner.invoke(cli, [*args, "json", "--run", "r1"]).stdout)
    assert [(j["record"], j["restart"]) for j in data["jobs"]] == [(j.record, j.restart) for j in result.story.jobs]
    written = csv.DictReader(io.StringIO(runner.invoke(cli, [*args, "csv", "--run", "r1"]).stdout))
    assert [row["restart"] for row in written] == ["false", "false", "true", "true", "true"]  # as `shared` is written
    table = runner.invoke(cli, [*args, "table", "--run", "r1"], env={"COLUMNS": "200"}).stdout.splitlines()
    assert next(line for line in table if "┃ job " in line).split("┃")[1:3] == [" job   ", " restart "]
    cells = [line.split("│") for line in table if line.startswith("│")]
    assert [c[1].strip() for c in cells if c[2].strip() == "yes"] == ["2", "7", "7"], table
    # a run none of whose jobs re-ran failed work has no column of blanks
    assert "┃ restart ┃" not in runner.invoke(cli, [*args, "table", "--run", "r2"], env={"COLUMNS": "200"}).stdout


def test_the_storys_figures_and_relaunched_attempts_are_in_its_json_and_the_api_as_the_table_says_them(tmp_path):
    """break49b: "failed and run again" and "unfinished attempts" were computed only to print the
    table; `--format json` and /api/v1/runs?run= carried neither, nor which failed attempts were
    run again. r1: job 1 FAILED ($40), then job 2 did its work: relaunched; unfinished are jobs 1,
    7@1 and 7@2 ($100 of $160); the rule's count (its default states) is job 1's $40."""
    lake, cfg, path = lake_with_a_story(tmp_path)
    api = api_for(parse_config(whole_config(tmp_path, lake)))
    shown = CliRunner().invoke(cli, ["--config", path, "runs", *DAY, "--run", "r1", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    served = json.loads(api.handle("/api/v1/runs", parse_qs("since=2026-11-02&until=2026-11-03&run=r1"), None).body)
    for data in (json.loads(shown.stdout), served):
        assert [(j["record"], j["relaunched"]) for j in data["jobs"]] == [
            ("p5/1", True), ("p5/3", False), ("p5/2", False), ("p5/7@1", False), ("p5/7@2", False)]
        exact = [{**part, "cost": D(part["cost"]), "run_cost": D(part["run_cost"])} for part in data["unfinished"]]
        assert exact == [{"currency": "USD", "cost": D(100), "jobs": 3, "run_cost": D(160), "share": "0.6250"}]
        reruns = data["failed_reruns"]
        assert {**reruns, "cost": D(reruns["cost"]), "run_cost": D(reruns["run_cost"])} == {
            "currency": "USD", "states": ["FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT"], "cost": D(40), "jobs": 1,
            "run_cost": D(160), "share": "0.2500"}  # the rule's default states
    table = " ".join(CliRunner().invoke(cli, ["--config", path, "runs", *DAY, "--run", "r1", "--format", "table"],
                                        env={"COLUMNS": "200"}).stdout.split())
    assert f"{UNFINISHED_LINE}: USD 100.00 of 160.00 (62.5%)" in table
    assert "TIMEOUT, then an attempt of the same work): USD 40.00 of 160.00 (25.0%)" in table
    # r2's one job was cancelled, by its user: unfinished, no failed re-run
    r2 = story(lake, cfg, run="r2").to_json()
    assert (r2["unfinished"][0]["share"], D(r2["failed_reruns"]["cost"]), r2["jobs"][0]["relaunched"]) == (
        "1.0000", 0, False)
    # a run the state filter leaves out shows no figures, as it shows no jobs
    left_out = runs(lake, cfg, RunsQuery.parse(since="2026-11-02", until="2026-11-03", run="r1", state="failed"))
    assert (left_out.to_json()["unfinished"], left_out.to_json()["failed_reruns"]) == ([], None)


def test_the_storys_two_idle_figures_are_labelled_apart(tmp_path):
    """break49b: `runs --run` showed the run's idle, $X (1.4%), beside its row's `idle share
    (its instances, window)`, 11.3%, and a reader could not tell which was which. r1: its row's idle
    share is of its instances over the whole window, (20 + 50 + 80) / 320 = 46.9%; the idle line's
    is of the hours it held them, 70 / 240 = 29.2%: each says which it is, the line names the row's."""
    _, _, path = lake_with_a_story(tmp_path)
    table = CliRunner().invoke(cli, ["--config", path, "runs", *DAY, "--run", "r1", "--format", "table"],
                               env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    [row] = [line for line in table.stdout.splitlines() if "idle share" in line and "│" in line]
    assert [cell.strip() for cell in row.split("│")[1:3]] == ["idle share, whole window (its instances)", "46.9%"]
    said = " ".join(table.stdout.split())
    assert ("idle in the hours it held its instances, beside the run, not in its cost: USD 70.00 (29.2%) of the 240.00 "
            "those instance-hours cost (the cluster's idle); the row's 'idle share, whole window (its instances)', "
            "46.9%, is of the same instances over the whole window, held by the run or not") in said


def test_the_run_lines_show_a_bills_currency_escaped_on_their_own_line(tmp_path, monkeypatch):
    """BillingCurrency is the bill's text: an OSC escape in it is shown, a line feed cannot start a line."""
    with monkeypatch.context() as before:  # ingest refuses such a code now (core/currency.py); an older lake holds it
        before.setattr(staging, "with_currency_codes", lambda batch: batch)
        _, _, path = lake_with_a_story(tmp_path, currency="US\x1b]0;owned\x07D\nerror: forged")
    table = CliRunner().invoke(cli, ["--config", path, "runs", *DAY, "--run", "r1", "--format", "table"],
                               env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    currency = "US\\x1b]0;owned\\x07D\\nerror: forged"
    assert f"{UNFINISHED_LINE}: {currency} 100.00 of 160.00" in " ".join(table.stdout.split())
    assert f"idle in the hours it held its instances, beside the run, not in its cost: {currency} 70.00" in \
        " ".join(table.stdout.split())
    assert "\x1b" not in table.stdout and not any(line.startswith("error") for line in table.stdout.splitlines())


def test_57_an_unknown_run_is_exit_2_naming_the_closest_run_ids(tmp_path):
    # a run asked for by name is an object, as a plan is (`plans remove NAME`): was exit 0, a warning and
    # an empty story a script read as a run that cost nothing (break48 #2); the API answers 400 naming `run`
    lake, _, path = lake_with_a_story(tmp_path)
    shown = CliRunner().invoke(cli, ["--config", path, "runs", *DAY, "--run", "r11", "--format", "json"])
    assert shown.exit_code == 2 and shown.stdout == "", shown.output
    assert shown.stderr.strip() == "error: --run: no run 'r11' in the lake's job records or cost — closest run ids: r1"
    response = api_for(parse_config(whole_config(tmp_path, lake))).handle(
        "/api/v1/runs", parse_qs("since=2026-11-02&until=2026-11-03&run=r11"), None)
    assert response.status == 400 and json.loads(response.body)["error"]["where"] == "run", response.body
    idle = CliRunner().invoke(cli, ["--config", path, "runs", *DAY, "--run", "IDLE"])
    assert idle.exit_code == 2, idle.output
    assert "; `attribute --where run=IDLE` gives the clusters' idle" in idle.stderr, idle.stderr


def test_an_unknown_run_lists_named_runs_newest_first_before_job_ids(tmp_path):
    # twelve jobs whose run id is their job id (no label names a run) and two named runs: the
    # error lists the named ones, the newest first, then job ids, five in all
    jobs = [job(str(100 + n), 1, f"2026-11-02T{n + 10}:00:00", f"2026-11-02T{n + 10}:30:00", instance_ids=["i-a"])
            for n in range(12)]
    jobs += [job("90", 1, "2026-11-02T08:00:00", "2026-11-02T09:00:00", instance_ids=["i-a"], run_id="sweep-old"),
             job("91", 1, "2026-11-02T09:00:00", "2026-11-02T10:00:00", instance_ids=["i-a"], run_id="sweep-new")]
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], jobs)
    with pytest.raises(UsageError) as raised:
        runs(lake, cfg, RunsQuery.parse(since="2026-11-02", until="2026-11-03", run="nosuch"))
    assert str(raised.value) == ("--run: no run 'nosuch' in the lake's job records or cost — known run ids: "
                                 "sweep-new, sweep-old, 100, 101, 102, ...")


def test_a_run_nothing_names_without_a_window_names_the_since_option_or_parameter(tmp_path):
    # job records of another run and no bill: the run's own span cannot be found
    lake = Lake(tmp_path / "lake")
    add_jobs(lake, [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", run_id="r1")])
    path = written_config(tmp_path, lake)
    shown = CliRunner().invoke(cli, ["--config", str(path), "runs", "--run", "nosuch"])
    assert shown.exit_code == 2 and "no job record or bill in the lake names run 'nosuch'" in shown.stderr, shown.output
    assert "--since" in shown.stderr, shown.stderr
    response = api_for(parse_config(whole_config(tmp_path, lake))).handle("/api/v1/runs", parse_qs("run=nosuch"), None)
    assert response.status == 400 and json.loads(response.body)["error"]["where"] == "since", response.body


def test_a_run_without_jobs_in_the_window_or_without_billed_cost_says_why(tmp_path):
    _, _, path = lake_with_a_story(tmp_path)
    runner = CliRunner()
    later = runner.invoke(cli, ["--config", path, "runs", "--since", "2026-11-03", "--until", "2026-11-04",
                                "--run", "r1", "--format", "json"])
    assert later.exit_code == 0, later.output
    assert ("note: run 'r1' has no job that held GPUs in the window 2026-11-03 00:00 → 2026-11-04 00:00 UTC; its "
            "jobs ran 2026-11-02 10:00 → 2026-11-02 12:45 UTC") in later.stderr, later.stderr
    unbilled = runner.invoke(cli, ["--config", path, "runs", *DAY, "--run", "r3", "--format", "json"])
    data = json.loads(unbilled.stdout)
    assert [(j["job"], j["cost"], j["currency"], j["gpu_hours"]) for j in data["jobs"]] == [
        ("5", "0", None, "2.000000")]
    assert "has jobs in the window" in unbilled.stderr and "but no billed cost" in unbilled.stderr
    late = runner.invoke(cli, ["--config", path, "runs", *DAY, "--run", "r4", "--format", "json"])
    assert [(j["job"], j["cost"]) for j in json.loads(late.stdout)["jobs"]] == [("6", "0")]
    assert ("note: run 'r4' has jobs in the window but no cost yet: they started after the bill's end (data through "
            "2026-11-02 13:00 UTC)") in late.stderr, late.stderr


def test_the_http_api_tells_one_runs_story(tmp_path):
    lake, _, _ = lake_with_a_story(tmp_path)
    api = api_for(parse_config(whole_config(tmp_path, lake)))
    response = api.handle("/api/v1/runs", parse_qs("since=2026-11-02&until=2026-11-03&run=r2"), None)
    assert response.status == 200, response.body
    data = json.loads(response.body)
    assert [(r["run"], D(r["cost"])) for r in data["rows"]] == [("r2", D(10))]
    assert [(s["state"], D(s["cost"]), s["unfinished"]) for s in data["by_state"]] == [("CANCELLED", D(10), True)]
    bad = api.handle("/api/v1/runs", parse_qs("since=2026-11-02&run=%20"), None)
    assert bad.status == 400 and json.loads(bad.body)["error"]["where"] == "run"


def test_a_lake_without_a_bill_tells_the_runs_jobs_without_cost(tmp_path):
    from service.core.lake import Lake
    from tests.attribution_helpers import add_jobs

    lake = Lake(tmp_path / "lake")
    add_jobs(lake, [job("7", 8, "2026-11-02T10:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"], run_id="r7",
                        job_type="pretrain")])
    result = runs(lake, parse_config(whole_config(tmp_path, lake)),
                  RunsQuery.parse(since="2026-11-02", until="2026-11-03", run="r7"))
    assert result.lake_empty and [(r.run, r.cost) for r in result.rows] == [("r7", D(0))]
    assert [(j.job, j.job_type, j.gpu_hours, j.cost, j.currency) for j in result.story.jobs] == [
        ("7", "pretrain", D(16), D(0), None)]
    assert result.story.instances == () and result.story.notes == ()


def test_without_since_a_run_is_read_over_its_own_span_in_whole_hours(tmp_path):
    lake, cfg, path = lake_with_a_story(tmp_path)
    whole = runs(lake, cfg, RunsQuery.parse(since=None, run="R1"))
    # its jobs ran 10:00 → 12:45: the window is the hours they touch, and the cost all of it
    assert (iso_utc(whole.window.since), iso_utc(whole.window.until)) == ("2026-11-02T10:00:00Z", "2026-11-02T13:00:00Z")
    assert [(r.run, r.jobs, r.cost) for r in whole.rows] == [("r1", 5, D(160))]
    assert sum(j.cost for j in whole.story.jobs) == D(160)
    # r2's one job held GPUs 10:00 → 10:15: its hour is whole ($10, not a quarter of it)
    shown = CliRunner().invoke(cli, ["--config", path, "runs", "--run", "r2", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert (data["since"], data["until"]) == ("2026-11-02T10:00:00Z", "2026-11-02T11:00:00Z")
    assert [(r["run"], D(r["cost"])) for r in data["rows"]] == [("r2", D(10))]
    api = api_for(parse_config(whole_config(tmp_path, lake)))
    response = api.handle("/api/v1/runs", parse_qs("run=r1"), None)
    assert response.status == 200, response.body
    assert [(r["run"], D(r["cost"])) for r in json.loads(response.body)["rows"]] == [("r1", D(160))]
    table = CliRunner().invoke(cli, ["--config", path, "runs", "--run", "r1", "--format", "table"],
                               env={"COLUMNS": "200"})
    assert "jobs of r1 (each attempt), 2026-11-02 10:00 → 2026-11-02 13:00 UTC" in table.stdout, table.stdout
    # `until` alone leaves the start unknown
    cut = CliRunner().invoke(cli, ["--config", path, "runs", "--run", "r1", "--until", "2026-11-03"])
    assert cut.exit_code == 2 and "neither for the run's own span" in cut.output


def test_without_since_a_running_run_reaches_the_bill_end(tmp_path):
    jobs = [job("8", 4, "2026-11-02T11:30:00", None, instance_ids=["i-a"], run_id="r8", state="RUNNING")]
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-a", start="2026-11-02T12:00:00")], jobs)
    result = runs(lake, cfg, RunsQuery.parse(since=None, run="r8"))
    # from its start's hour to the bill's end (13:00): 4 of i-a's 8 GPUs 12:00 → 13:00 are $40
    assert (iso_utc(result.window.since), iso_utc(result.window.until)) == ("2026-11-02T11:00:00Z", "2026-11-02T13:00:00Z")
    assert [(r.run, r.state, r.cost, r.end) for r in result.rows] == [("r8", "RUNNING", D(40), None)]


def test_a_run_the_state_filter_leaves_out_says_so_and_how_it_ended(tmp_path):
    lake, cfg, path = lake_with_a_story(tmp_path)
    shown = CliRunner().invoke(cli, ["--config", path, "runs", *DAY, "--run", "r1", "--state", "failed",
                                     "--format", "table"])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == ""
    # r1's last job (7@2, the last to end) was requeued: not FAILED, whatever its first job did
    assert "note: run 'r1' is left out by the state filter (FAILED): its last job ended REQUEUED" in shown.stderr
    api = api_for(parse_config(whole_config(tmp_path, lake)))
    data = json.loads(api.handle("/api/v1/runs", parse_qs("run=r1&state=failed,cancelled"), None).body)
    assert (data["rows"], data["jobs"], data["by_state"], data["idle"]) == ([], [], [], [])  # neither row nor jobs
    assert data["notes"] == ["run 'r1' is left out by the state filter (FAILED or CANCELLED): its last job ended REQUEUED"]
    csv = CliRunner().invoke(cli, ["--config", path, "runs", *DAY, "--run", "r1", "--state", "failed", "--format", "csv"])
    assert csv.exit_code == 0 and csv.stdout.splitlines()[1:] == [], csv.stdout  # the header alone
    kept = runs(lake, cfg, RunsQuery.parse(since=None, run="r1", state="requeued"))
    assert [r.run for r in kept.rows] == ["r1"] and kept.story.notes == ()


def test_a_run_before_the_first_bill_says_no_bill_covers_it_and_one_past_the_end_answers_as_attribute(tmp_path):
    """Jobs in October, the bill from November: no node tag or pool is to blame, the bill does not
    reach them (as `attribute` says of such a window). A --since past the bill's end is the empty
    window `attribute` refuses too (exit 2); without --since, or with --until, the run is told at $0."""
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1"),
            job("9", 8, "2026-12-05T10:00:00", "2026-12-05T12:00:00", instance_ids=["i-a"], run_id="r9"),
            job("10", 8, "2026-10-05T10:00:00", "2026-10-05T12:00:00", instance_ids=["i-a"], run_id="r10")]
    lake, _ = setup(tmp_path, [gpu_line("i-a")], jobs)
    path = written_config(tmp_path, lake)
    runner = CliRunner()
    early = runner.invoke(cli, ["--config", str(path), "runs", "--run", "r10", "--format", "json"])
    assert early.exit_code == 0 and [(j["job"], j["cost"]) for j in json.loads(early.stdout)["jobs"]] == [("10", "0")]
    assert ("note: run 'r10' has jobs in the window 2026-10-05 10:00 → 2026-10-05 12:00 UTC but no bill covers their "
            "months: the lake holds the billing periods 2026-11 to 2026-11") in early.stderr, early.stderr
    listed = runner.invoke(cli, ["--config", str(path), "runs", "--since", "2026-10-05", "--until", "2026-10-06"])
    assert [(r["run"], r["cost"]) for r in json.loads(listed.stdout)["rows"]] == [("r10", "0")]
    assert ("note: no cost in the window 2026-10-05 00:00 → 2026-10-06 00:00 UTC; the lake holds the billing periods "
            "2026-11 to 2026-11") in listed.stderr, listed.stderr
    for command in ("runs", "attribute"):
        past = runner.invoke(cli, ["--config", str(path), command, "--since", "2026-12-05"])
        assert past.exit_code == 2 and "the window is empty: the data runs through 2026-11-02T11:00:00Z" in past.output
    late = runner.invoke(cli, ["--config", str(path), "runs", "--run", "r9", "--format", "json"])
    assert late.exit_code == 0 and "no cost yet: they started after the bill's end" in late.stderr, late.output


def test_the_api_says_of_runs_in_months_no_bill_reaches_what_the_cli_says_on_stderr(tmp_path):
    """/api/v1/runs gave the runs of a window before the first bill, or after its end, at $0 with no
    word (the CLI says on stderr that no bill reaches the window); it gives that sentence in `notes`."""
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1"),
            job("9", 8, "2026-12-05T10:00:00", "2026-12-05T12:00:00", instance_ids=["i-a"], run_id="r9"),
            job("10", 8, "2026-10-05T10:00:00", "2026-10-05T12:00:00", instance_ids=["i-a"], run_id="r10")]
    lake, _ = setup(tmp_path, [gpu_line("i-a")], jobs)
    path = written_config(tmp_path, lake)
    api = api_for(parse_config(whole_config(tmp_path, lake)))
    for since, until, run in (("2026-10-05", "2026-10-06", "r10"), ("2026-12-05", "2026-12-06", "r9")):
        shown = CliRunner().invoke(cli, ["--config", str(path), "runs", "--since", since, "--until", until,
                                         "--format", "json"])
        assert shown.exit_code == 0, shown.output
        answer = json.loads(api.handle("/api/v1/runs", parse_qs(f"since={since}&until={until}"), None).body)
        assert [(r["run"], r["cost"]) for r in answer["rows"]] == [(run, "0")]
        assert answer == {**json.loads(shown.stdout), "notes": [
            f"no cost in the window {since} 00:00 → {until} 00:00 UTC; the lake holds the billing periods 2026-11 to "
            "2026-11"]}
        assert shown.stderr == f"note: {answer['notes'][0]}\n"


def test_a_run_whose_hours_in_the_window_are_outside_the_bills_data_says_so_not_blaming_the_node_tag(tmp_path):
    """The bill holds i-a's 2026-11-02 10:00-11:00 hour. Job 11 ran before it that morning (its
    month is billed: no node tag or pool is to blame), job 12 from 10:30 for days: in a window after
    11:00 its hours are past the bill's end. Both were told to check clusters.node_tag."""
    jobs = [job("11", 8, "2026-11-02T08:00:00", "2026-11-02T09:30:00", instance_ids=["i-a"], run_id="r11"),
            job("12", 8, "2026-11-02T10:30:00", "2026-11-05T00:00:00", instance_ids=["i-a"], run_id="r12")]
    lake, _ = setup(tmp_path, [gpu_line("i-a")], jobs)
    path = written_config(tmp_path, lake)
    runner = CliRunner()
    early = runner.invoke(cli, ["--config", str(path), "runs", "--run", "r11", "--format", "json"])
    assert early.exit_code == 0 and [(j["job"], j["cost"]) for j in json.loads(early.stdout)["jobs"]] == [("11", "0")]
    assert ("note: run 'r11' has jobs in the window 2026-11-02 08:00 → 2026-11-02 10:00 UTC but no billed cost: their "
            "hours in it are before the bill's data begins (2026-11-02 10:00 UTC)") in early.stderr, early.stderr
    late = runner.invoke(cli, ["--config", str(path), "runs", "--run", "r12", "--since", "2026-11-03", "--until",
                               "2026-11-04", "--format", "json"])
    assert late.exit_code == 0 and [(j["job"], j["cost"]) for j in json.loads(late.stdout)["jobs"]] == [("12", "0")]
    assert ("note: run 'r12' has jobs in the window 2026-11-03 00:00 → 2026-11-04 00:00 UTC but no cost yet: their "
            "hours in it are after the bill's end (data through 2026-11-02 11:00 UTC)") in late.stderr, late.stderr
    assert "node_tag" not in early.stderr + late.stderr


def test_a_run_still_running_that_started_after_the_bills_end_shows_its_hours_to_now_with_cost_pending(
        tmp_path, monkeypatch):
    """The bill ends at 11:00; job 13 (8 GPUs) runs from 12:00 and it is now 22:30: 84 GPU-hours,
    no cost yet. Its span ended at the data's end, before its start: a one-hour window, 8.0."""
    from datetime import datetime, timezone

    now = datetime(2026, 11, 2, 22, 30, tzinfo=timezone.utc)
    for module in ("service.attribution.run_rows", "service.attribution.run_inputs"):
        monkeypatch.setattr(f"{module}.utc_now", lambda: now)
    lake, _ = setup(tmp_path, [gpu_line("i-a")],
                    [job("13", 8, "2026-11-02T12:00:00", None, instance_ids=["i-a"], run_id="r13", state="RUNNING")])
    path = written_config(tmp_path, lake)
    shown = CliRunner().invoke(cli, ["--config", str(path), "runs", "--run", "r13", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert [(r["run"], r["gpu_hours"], r["cost"], r["state"], r["end"]) for r in data["rows"]] == [
        ("r13", "84.000000", "0", "RUNNING", None)]
    assert (data["since"], data["until"]) == ("2026-11-02T12:00:00Z", "2026-11-02T23:00:00Z")
    assert [(j["job"], j["gpu_hours"], j["cost"]) for j in data["jobs"]] == [("13", "84.000000", "0")]
    assert "no cost yet: they started after the bill's end (data through 2026-11-02 11:00 UTC)" in shown.stderr


def test_attempts_of_one_job_that_ended_alike_each_carry_their_own_parts_cost(tmp_path):
    """Job 9 requeued twice, both attempts REQUEUED: 9@1 held 8 GPUs of i-a 10:00-11:00 (8 GPU-hours
    of an $80 hour: $80), 9@2 8 GPUs of i-c 12:00-12:30 (4 GPU-hours of a $200 hour: half of it,
    $100). Each part carries its record, so each attempt costs its own parts, $80 and $100, not the
    $180 split by GPU-hours (8:4 gave $120 and $60); none is `shared`, the run's cost unchanged."""
    from datetime import datetime

    def requeued(record: str, instance: str, start: str, end: str) -> dict:
        return job_row(record_id=f"p5/9@{record}", job_id="9", cluster="p5", state="REQUEUED", run_id="r9",
                       start_time=datetime.fromisoformat(start), end_time=datetime.fromisoformat(end), gpus=8.0,
                       instance_ids=[instance], job_type="pretrain")

    jobs = [requeued("1", "i-a", "2026-11-02T10:00:00", "2026-11-02T11:00:00"),
            requeued("2", "i-c", "2026-11-02T12:00:00", "2026-11-02T12:30:00")]
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-c", cost="200", start="2026-11-02T12:00:00")], jobs)
    result = story(lake, cfg, run="r9")
    assert [(j.record, j.gpu_hours, j.cost, j.shared) for j in result.story.jobs] == [
        ("p5/9@1", D(8), D(80), False), ("p5/9@2", D(4), D(100), False)]
    [row] = result.rows
    assert row.cost == D(180) == sum(j.cost for j in result.story.jobs)


def test_the_reports_unfinished_jobs_count_attempts_as_the_story_does(tmp_path):
    """The report's unfinished jobs counted job ids (job 7, requeued twice: 1) where `runs --run`'s
    by_state counts attempts (7@1 and 7@2: 2). Both count attempts now, and the column says so:
    REQUEUED 2 attempts $60, FAILED 1 (job 1) $40, CANCELLED 1 (job 4, r2) $10."""
    from datetime import date

    from service.report.sections.clusters import clusters_section

    lake, cfg, _ = lake_with_a_story(tmp_path)
    [section] = clusters_section(cfg, lake, date(2026, 11, 2), 10)
    [table] = [t for t in section.tables if t.key == "unfinished_jobs"]
    assert [(r["state"], r["jobs"], r["cost"]) for r in table.rows] == [
        ("REQUEUED", 2, D(60)), ("FAILED", 1, D(40)), ("CANCELLED", 1, D(10))]
    [column] = [c for c in table.columns if c.key == "jobs"]
    assert column.label == "attempts"
    by_state = {s["state"]: s["jobs"] for s in story(lake, cfg).story.to_json()["by_state"]}
    assert by_state["REQUEUED"] == 2 and by_state["FAILED"] == 1
