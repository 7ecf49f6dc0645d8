"""A run's eval cost: what the jobs of job type `eval` that name it (`parent_run`) cost, beside
its own cost. Figures by hand (p5.48xlarge: 8 GPUs, $80 an hour, 10:00-11:00 on 2026-11-02):

- r1's pretrain job holds 4 GPUs for the hour: $40;
- eval job 2 (run ev-1) holds 2 GPUs for the hour, its label `parent_run: R1` (any case): $20;
- eval job 3 (run ev-2) holds 1 GPU for the hour, naming r1 by the label `evaluates`, an alias
  the config gives the dimension: $10;
- debug job 4 (run dbg) holds 1 GPU for half an hour and names r1 too, but is no eval: $5, not r1's;
- eval job 5 (run ev-3) holds 1 GPU for half an hour and names no run: $5, nobody's eval;
- idle: the other $0.
So r1 costs $40 with eval_cost $30; every run keeps its own cost, and the runs' total is $80 still.
"""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pytest
import yaml
from click.testing import CliRunner

from service.attribution import RunsQuery, runs
from service.cli.main import cli
from tests.test_clusters_allocation import assert_ties_out, by, gpu_line, job, setup
from tests.test_runs import whole_config

D = Decimal
DAY = {"since": "2026-11-02", "until": "2026-11-03"}
ALIASES = {"parent_run": {"tags": ["parent_run", "evaluates"]}}


def evaluated_fleet(tmp_path):
    at = "2026-11-02T{}:00"
    jobs = [job("1", 4, at.format("10:00"), at.format("11:00"), instance_ids=["i-a"], run_id="r1", job_type="pretrain"),
            job("2", 2, at.format("10:00"), at.format("11:00"), instance_ids=["i-a"], run_id="ev-1", job_type="eval",
                labels={"parent_run": "R1"}),
            job("3", 1, at.format("10:00"), at.format("11:00"), instance_ids=["i-a"], run_id="ev-2", job_type="eval",
                labels={"evaluates": "r1"}),
            job("4", 1, at.format("10:00"), at.format("10:30"), instance_ids=["i-a"], run_id="dbg", job_type="debug",
                labels={"parent_run": "r1"}),
            job("5", 1, at.format("10:00"), at.format("10:30"), instance_ids=["i-a"], run_id="ev-3", job_type="eval")]
    return setup(tmp_path, [gpu_line("i-a")], jobs, dimensions=ALIASES)


def evaluated_config(tmp_path):
    """spendlake.yaml of evaluated_fleet's lake, with clusters and the parent_run aliases."""
    lake, _ = evaluated_fleet(tmp_path)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(whole_config(tmp_path, lake) | {"attribution": {"clusters": {},
                                                                                   "dimensions": ALIASES}}))
    return path


def test_a_run_shows_what_the_eval_jobs_naming_it_cost_beside_its_own_cost(tmp_path):
    lake, cfg = evaluated_fleet(tmp_path)
    result = runs(lake, cfg, RunsQuery.parse(**DAY))
    assert {r.run: (r.cost, r.eval_cost) for r in result.rows} == {
        "r1": (D(40), D(30)), "ev-1": (D(20), D(0)), "ev-2": (D(10), D(0)), "dbg": (D(5), D(0)), "ev-3": (D(5), D(0))}
    assert [(t.currency, t.runs, t.cost) for t in result.totals] == [("USD", 5, D(80))]  # no dollar twice
    assert by(lake, cfg, ["parent_run", "job_type"]) == {
        ("r1", "eval"): D(30), ("r1", "debug"): D(5), ("unallocated", "pretrain"): D(40),
        ("unallocated", "eval"): D(5)}
    assert_ties_out(lake, cfg)
    # `--top` folds the rest's eval cost into `other` as it folds their cost
    assert [(r.run, r.cost, r.eval_cost) for r in runs(lake, cfg, RunsQuery.parse(**DAY, top="1")).rows] == [
        ("r1", D(40), D(30)), ("other", D(40), D(0))]


def test_one_runs_story_lists_the_eval_runs_naming_it(tmp_path):
    lake, cfg = evaluated_fleet(tmp_path)
    data = runs(lake, cfg, RunsQuery.parse(**DAY, run="R1")).to_json()
    assert [(r["run"], D(r["cost"]), D(r["eval_cost"])) for r in data["rows"]] == [("r1", D(40), D(30))]
    assert [(e["run"], e["currency"], D(e["cost"])) for e in data["evals"]] == [("ev-1", "USD", D(20)),
                                                                                 ("ev-2", "USD", D(10))]
    assert sum(D(j["cost"]) for j in data["jobs"]) == D(40)  # its own jobs alone


def test_the_cli_shows_eval_cost_in_json_csv_table_and_the_story(tmp_path):
    path = evaluated_config(tmp_path)

    def ran(*args):
        result = CliRunner().invoke(cli, ["--config", str(path), "runs", "--since", DAY["since"], "--until",
                                          DAY["until"], *args], env={"COLUMNS": "250"})
        assert result.exit_code == 0, result.output
        return result.stdout

    rows = {r["run"]: r for r in json.loads(ran("--format", "json"))["rows"]}
    assert [D(rows[run]["eval_cost"]) for run in ("r1", "ev-1")] == [D(30), D(0)]
    [header, *lines] = list(csv.reader(io.StringIO(ran("--format", "csv"))))
    assert D({line[0]: line[header.index("eval_cost")] for line in lines}["r1"]) == D(30)
    table = ran("--format", "table")
    [r1] = [line for line in table.splitlines() if " r1 " in line]
    assert "eval cost" in table and r1.split("│")[9:11] == [" 40.00 ", "     30.00 "]  # cost, eval cost
    story = ran("--run", "r1", "--format", "table")
    assert "USD 30.00" in story and "eval runs naming r1" in story
    assert [line.split("│")[1:3] for line in story.splitlines() if "ev-" in line] == [
        [" ev-1     ", " 20.00 "], [" ev-2     ", " 10.00 "]]


PARENT_CSV = (
    "job_id,start_time,end_time,gpus,job_type,Parent_Run,labels\n"
    '1,2026-11-30T10:00:00Z,2026-11-30T11:00:00Z,8,eval,llama-r1,"{""parent_run"": ""old"", ""suite"": ""mmlu""}"\n'
    "2,2026-11-30T10:00:00Z,2026-11-30T11:00:00Z,8,eval, R2 ,\n"
    '3,2026-11-30T10:00:00Z,2026-11-30T11:00:00Z,8,eval,,"{""a"": ""b""}"\n'
    "4,2026-11-30T10:00:00Z,2026-11-30T11:00:00Z,8,pretrain,,\n")


@pytest.mark.parametrize("row_wise", [False, True])
def test_a_jobs_files_parent_run_column_is_the_jobs_parent_run_label(tmp_path, monkeypatch, row_wise):
    """The column (its header in any case) is kept as the label `parent_run`, over a `labels` key of
    that name, by the column-wise reader and the row reader alike."""
    import connectors.jobs_file as jobs_file
    import connectors.jobs_file_columns as jobs_file_columns
    from tests.test_jobs_file import jobs, run

    read_row_wise = []
    row_reader = jobs_file.JobsFileConnector._row_wise
    monkeypatch.setattr(jobs_file.JobsFileConnector, "_row_wise",
                        lambda self, path, *args: read_row_wise.append(path) or row_reader(self, path, *args))
    if row_wise:
        monkeypatch.setattr(jobs_file_columns, "column_rows", lambda *args: None)
    (tmp_path / "jobs.csv").write_text(PARENT_CSV)
    assert run(tmp_path, tmp_path / "jobs.csv", cluster="p5").error is None
    assert len(read_row_wise) == row_wise
    assert jobs(tmp_path, "job_id, labels") == [("1", {"parent_run": "llama-r1", "suite": "mmlu"}),
                                                 ("2", {"parent_run": "R2"}), ("3", {"a": "b"}), ("4", None)]


def test_a_runs_own_span_takes_the_eval_jobs_naming_it_run_after_its_last_job(tmp_path):
    """`runs --run r1` without --since reads the run's own span: r1's job ran 10:00-11:00, its eval (ev-1, parent_run
    r1) 13:00-14:00 after it, $40 (4 GPUs of 8 at $80 an hour). The span ended at 11:00: eval_cost 0 and no eval run
    listed, where `runs --since 2026-11-02` gave 40; it now ends at 14:00, with the eval, its own cost unchanged."""
    at = "2026-11-02T{}:00"
    jobs = [job("1", 4, at.format("10:00"), at.format("11:00"), instance_ids=["i-a"], run_id="r1", job_type="pretrain"),
            job("2", 4, at.format("13:00"), at.format("14:00"), instance_ids=["i-a"], run_id="ev-1", job_type="eval",
                labels={"parent_run": "r1"})]
    lake, cfg = setup(tmp_path, [gpu_line("i-a", start=at.format(h)) for h in ("10:00", "13:00")], jobs)
    data = runs(lake, cfg, RunsQuery.parse(since=None, run="r1")).to_json()
    assert (data["since"], data["until"]) == ("2026-11-02T10:00:00Z", "2026-11-02T14:00:00Z"), data
    assert [(r["run"], D(r["cost"]), D(r["eval_cost"])) for r in data["rows"]] == [("r1", D(40), D(40))]
    assert [(e["run"], D(e["cost"])) for e in data["evals"]] == [("ev-1", D(40))]
