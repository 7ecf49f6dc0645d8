"""The job dimensions (run, job_type, job_state, cluster, user) from the command line and in
budgets: the cost guides' breakdown is a `--by` away. Figures by hand (p5.48xlarge: 8 GPUs,
$80 an hour): a pretrain job holds 4 GPUs for the hour ($40), a failed eval job 2 GPUs for 30
minutes ($10), a cancelled debug job 2 GPUs for 30 minutes ($10); the other $20 is idle and
stays with the instance's project (`shared-fleet`). Jobs take `project` from their labels
(`wckey`, an alias of the dimension), `job_type` from virtual rules on their name, partition
and QOS.

The lake's hour is two days before the wall clock, so `--since 30d` holds it on any day."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.config import parse_config
from service.findings.budgets import budget_status
from tests.attribution_helpers import add_jobs, declared_sources, line, make_lake
from tests.test_clusters_allocation import job

D = Decimal
HOUR = (datetime.now(timezone.utc) - timedelta(days=2)).replace(minute=0, second=0, microsecond=0, tzinfo=None)


def whole_config(tmp_path, lake, **extra) -> dict:
    return {"lake": str(lake.root), "sources": declared_sources(lake),
            "inventory": [{"name": "slurm", "kind": "jobs-file", "path": str(tmp_path / "jobs")}],
            "attribution": {"clusters": {}, "dimensions": {
                "project": {"tags": ["project", "wckey"]},
                "job_type": {"rules": [{"match": {"job_name": "^eval"}, "value": "eval"},
                                       {"match": {"qos": "debug"}, "value": "debug"},
                                       {"match": {"partition": "train"}, "value": "pretrain"}]}}}, **extra}


def fleet(tmp_path, hour: datetime = HOUR):
    def at(minutes: int) -> str:
        return (hour + timedelta(minutes=minutes)).isoformat()

    lake = make_lake(tmp_path, [line(at(0), "80", resource="i-a", instance_type="p5.48xlarge",
                                     tags={"team": "platform", "project": "shared-fleet"})])
    add_jobs(lake, [
        job("pre", 4, at(0), at(60), instance_ids=["i-a"], partition="train", labels={"wckey": "llama"}),
        job("ev", 2, at(0), at(30), instance_ids=["i-a"], name="eval-mmlu", state="FAILED",
            labels={"wckey": "llama"}),
        job("dbg", 2, at(30), at(60), instance_ids=["i-a"], qos="debug", state="CANCELLED",
            labels={"project": "llama"})])
    return lake


def cli_rows(tmp_path, lake, *args) -> dict:
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(whole_config(tmp_path, lake)))
    result = CliRunner().invoke(cli, ["--config", str(path), "attribute", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    dims = json.loads(result.stdout)["by"]
    return {tuple(r[d] for d in dims): D(r["cost"]) for r in rows if D(r["cost"])}


def test_by_project_and_job_type_from_the_command_line(tmp_path):
    lake = fleet(tmp_path)
    assert cli_rows(tmp_path, lake, "--since", "30d", "--by", "project,job_type") == {
        ("llama", "pretrain"): D(40), ("llama", "eval"): D(10), ("llama", "debug"): D(10),
        ("shared-fleet", "idle"): D(20)}


def test_by_job_state_shows_what_failed_and_cancelled_jobs_cost(tmp_path):
    lake = fleet(tmp_path)
    assert cli_rows(tmp_path, lake, "--since", "30d", "--by", "job_state") == {
        ("COMPLETED",): D(40), ("FAILED",): D(10), ("CANCELLED",): D(10), ("idle",): D(20)}
    assert cli_rows(tmp_path, lake, "--since", "30d", "--by", "run", "--where", "job_state=failed",
                    "--where", "cluster=p5") == {("ev",): D(10)}


def test_a_budget_on_a_job_type(tmp_path):
    lake = fleet(tmp_path, datetime(2026, 11, 2, 10))
    budget = {"name": "evals", "dimension": "job_type", "value": "eval", "amount": 100}
    config = parse_config(whole_config(tmp_path, lake, budgets=[budget]))
    [status] = budget_status(lake, config, now=datetime(2026, 11, 3))
    assert status.outlook.actual == D(10)
