"""`attribute --explain` as a table on a shared cluster: a row's job parts are a few lines, not one per job."""

from __future__ import annotations

import json
from decimal import Decimal

import yaml
from click.testing import CliRunner

from service.cli.main import cli
from tests.attribution_helpers import declared_sources
from tests.test_clusters_allocation import gpu_line, job, setup


def eight_jobs_on_one_instance(tmp_path):
    """i-a's hours 10:00..17:00 ($80 each): in hour k (1..8) job k holds k of its 8 GPUs, $10·k; the rest
    of each hour is the cluster's idle ($10·(8-k), $80·8 - $360 = $280 in all). Returns the config's path."""
    lines = [gpu_line("i-a", start=f"2026-11-02T{9 + k}:00:00") for k in range(1, 9)]
    jobs = [job(str(k), k, f"2026-11-02T{9 + k}:00:00", f"2026-11-02T{10 + k}:00:00", instance_ids=["i-a"])
            for k in range(1, 9)]
    lake, _ = setup(tmp_path, lines, jobs)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake),
                                    "inventory": [{"name": "slurm", "kind": "jobs-file", "path": str(tmp_path / "jobs")}],
                                    "attribution": {"clusters": {}}}))
    return path


def test_the_explain_table_shows_a_rows_five_largest_jobs_and_folds_the_others_into_one_line(tmp_path):
    path = eight_jobs_on_one_instance(tmp_path)
    args = ["--config", str(path), "attribute", "--since", "2026-11-01", "--until", "2026-12-01", "--by", "team",
            "--explain"]
    table = CliRunner().invoke(cli, [*args, "--format", "table"], env={"COLUMNS": "160"})
    assert table.exit_code == 0, table.output
    placed = [line.split("│")[4].strip() + " " + line.split("│")[5].strip()
              for line in table.output.splitlines() if line.startswith("│ unallocated") and "│ team" in line]
    assert placed == ["job:8 80.00", "job:7 70.00", "job:6 60.00", "job:5 50.00", "job:4 40.00",
                      "3 more jobs 60.00"], table.output
    assert "--format csv or json lists each job" in table.output
    assert "idle:p5" in table.output
    every = json.loads(CliRunner().invoke(cli, [*args, "--format", "json"]).stdout)
    jobs_listed = {p["how"]: Decimal(p["cost"]) for r in every["rows"] for p in r["explain"] if p["how"].startswith("job:")}
    assert jobs_listed == {f"job:{k}": Decimal(10 * k) for k in range(1, 9)}


def test_the_explain_table_keeps_its_placed_by_column_on_a_narrow_terminal(tmp_path):
    # at 80 columns the table gave way on `placed by` (the folded line's text made it 43 wide):
    # the one column --explain is for; the key columns give way first
    path = eight_jobs_on_one_instance(tmp_path)
    table = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--since", "2026-11-01", "--until",
                                     "2026-12-01", "--by", "team,project", "--explain", "--format", "table"],
                               env={"COLUMNS": "80"})
    assert table.exit_code == 0, table.output
    assert "placed by" in table.output and "job:8" in table.output and "idle:p5" in table.output, table.output
    assert "3 more jobs" in table.output, table.output


def test_one_job_id_of_two_attempts_or_two_sources_is_told_apart_by_its_cluster_and_state(tmp_path):
    """A requeued job's attempts keep its id, and two job sources may hold the same id: each
    `job:<id>` part was one, summed ($80 on job:7, $80 on job:9, as if one job). They stay
    `job:<id>` and carry their cluster and state (JSON `cluster`, `job_state`; the table says them
    after an id the row holds twice). i-a: job 7 requeued at 10:30; i-b: p5's job 9 holds half
    its hour; i-c: east's job 9, 4 of 8 GPUs all hour."""
    from tests.attribution_helpers import add_jobs

    lines = [gpu_line(instance) for instance in ("i-a", "i-b", "i-c")]
    jobs = [{**job("7", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], state="REQUEUED"),
             "record_id": "p5/7@1"},
            {**job("7", 8, "2026-11-02T10:30:00", "2026-11-02T11:00:00", instance_ids=["i-a"]), "record_id": "p5/7@2"},
            job("9", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"])]
    lake, _ = setup(tmp_path, lines, jobs)
    add_jobs(lake, [job("9", 4, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-c"], cluster="east")],
             source="east")
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake), "inventory": [
        {"name": name, "kind": "jobs-file", "path": str(tmp_path / name)} for name in ("slurm", "east")],
        "attribution": {"clusters": {}}}))
    args = ["--config", str(path), "attribute", "--since", "2026-11-01", "--until", "2026-12-01", "--by", "team",
            "--explain"]
    shown = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert shown.exit_code == 0, shown.output
    parts = sorted((p["how"], p.get("cluster"), p.get("job_state"), Decimal(p["cost"]))
                   for row in json.loads(shown.stdout)["rows"] for p in row["explain"])
    assert parts == [("idle:east", None, None, 40), ("idle:p5", None, None, 40),
                     ("job:7", "p5", "COMPLETED", 40), ("job:7", "p5", "REQUEUED", 40),
                     ("job:9", "east", "COMPLETED", 40), ("job:9", "p5", "COMPLETED", 40)]
    table = CliRunner().invoke(cli, [*args, "--format", "table"], env={"COLUMNS": "160"})
    assert table.exit_code == 0, table.output
    placed = sorted(line.split("│")[4].strip() for line in table.output.splitlines() if "│ team" in line)
    assert placed == ["idle:east", "idle:p5", "job:7 (p5, COMPLETED)", "job:7 (p5, REQUEUED)",
                      "job:9 (east, COMPLETED)", "job:9 (p5, COMPLETED)"], table.output


def test_two_attempts_of_one_job_that_ended_alike_are_told_apart_by_their_records(tmp_path):
    """A job requeued twice: attempts 7@1 (10:00-10:15) and 7@2 (10:15-10:45) both REQUEUED, on i-a
    ($80 an hour, 8 GPUs each): $20 and $40, then 7@3 COMPLETED 10:45-11:00, $20. Its REQUEUED parts
    were one, job:7 (p5, REQUEUED) $60; each now carries its record (JSON `record`; the table says
    it where cluster and state are the same)."""
    attempts = [("1", "10:00", "10:15", "REQUEUED"), ("2", "10:15", "10:45", "REQUEUED"),
                ("3", "10:45", "11:00", "COMPLETED")]
    jobs = [{**job("7", 8, f"2026-11-02T{start}:00", f"2026-11-02T{end}:00", instance_ids=["i-a"], state=state),
             "record_id": f"p5/7@{n}"} for n, start, end, state in attempts]
    lake, _ = setup(tmp_path, [gpu_line("i-a")], jobs)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake),
                                    "inventory": [{"name": "slurm", "kind": "jobs-file", "path": str(tmp_path / "j")}],
                                    "attribution": {"clusters": {}}}))
    args = ["--config", str(path), "attribute", "--since", "2026-11-01", "--until", "2026-12-01", "--by", "team",
            "--explain"]
    shown = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert shown.exit_code == 0, shown.output
    [row] = json.loads(shown.stdout)["rows"]
    assert [(p["how"], p["job_state"], p["record"], Decimal(p["cost"])) for p in row["explain"]] == [
        ("job:7", "REQUEUED", "p5/7@2", 40), ("job:7", "COMPLETED", "p5/7@3", 20), ("job:7", "REQUEUED", "p5/7@1", 20)]
    table = CliRunner().invoke(cli, [*args, "--format", "table"], env={"COLUMNS": "160"})
    assert table.exit_code == 0, table.output
    placed = [line.split("│")[4].strip() for line in table.output.splitlines() if "│ team" in line]
    assert placed == ["job:7 (p5, REQUEUED, p5/7@2)", "job:7 (p5, COMPLETED)", "job:7 (p5, REQUEUED, p5/7@1)"]


def test_a_job_part_of_no_cluster_is_told_apart_by_its_state_alone():
    """review49's cosmetic item: a job part without a cluster read `job:7 (None, FAILED)`."""
    from service.cli.attribute import _jobs_folded

    parts = [{"dimension": "team", "how": "job:7", "cost": "40", "cluster": None, "job_state": "FAILED"},
             {"dimension": "team", "how": "job:7", "cost": "30", "cluster": None, "job_state": "COMPLETED"}]
    assert [part["how"] for part in _jobs_folded(parts)] == ["job:7 (FAILED)", "job:7 (COMPLETED)"]
