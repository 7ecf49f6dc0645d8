"""`runs --until T`: a run's state and end as they stood at T. A hand-made jobs file on p5's
i-a (8 GPUs, $80 an hour from 10:00 to 14:00 on 2026-11-02):

- run r1: job 1 (8 GPUs, 10:00-11:00, FAILED), then job 2 (8 GPUs, 11:00-13:30, COMPLETED);
- run r2: job 3 (8 GPUs, 10:00-10:30, CANCELLED).

Asked up to 12:00, job 2 still ran: r1 is RUNNING without end (it showed COMPLETED, ended
13:30, after the window); r2 ended inside the window and stays as it ended. A run id that is not
ASCII (`rün1`) is summed in Python, not SQL (run_inputs._summed_records): the same answer.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import pytest
import yaml
from click.testing import CliRunner

from service.attribution import RunsQuery, runs
from service.cli.main import cli
from service.core.config import load_config
from service.ingest.inventory import run_inventory
from tests.attribution_helpers import declared_sources, make_lake
from tests.test_clusters_allocation import gpu_line

JOBS = """job_id,run_id,state,start_time,end_time,gpus,instance_ids,cluster
1,r1,FAILED,2026-11-02T10:00:00Z,2026-11-02T11:00:00Z,8,i-a,p5
2,r1,COMPLETED,2026-11-02T11:00:00Z,2026-11-02T13:30:00Z,8,i-a,p5
3,r2,CANCELLED,2026-11-02T10:00:00Z,2026-11-02T10:30:00Z,8,i-a,p5
"""


def lake_with_a_jobs_file(tmp_path, r1: str = "r1"):
    lake = make_lake(tmp_path, [gpu_line("i-a", start=f"2026-11-02T{hour}:00:00") for hour in range(10, 14)])
    (tmp_path / "jobs.csv").write_text(JOBS.replace(",r1,", f",{r1},"), encoding="utf-8")
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake),
                                    "inventory": [{"name": "trace", "kind": "jobs-file",
                                                   "path": str(tmp_path / "jobs.csv")}],
                                    "attribution": {"clusters": {}}}))
    config = load_config(path)
    [outcome] = run_inventory(config, now=datetime(2026, 11, 3, 6))
    assert outcome.error is None
    return lake, config, path


def shown(lake, config, **window) -> dict:
    return {r.run: (r.state, r.end, r.jobs, r.restarts, r.gpu_hours)
            for r in runs(lake, config, RunsQuery.parse(since="2026-11-02", **window)).rows}


@pytest.mark.parametrize("r1", ["r1", "rün1"])
def test_a_job_ended_after_the_windows_end_is_running_as_of_it(tmp_path, r1):
    lake, config, _ = lake_with_a_jobs_file(tmp_path, r1)
    at = datetime(2026, 11, 2, tzinfo=timezone.utc).replace
    assert shown(lake, config, until="2026-11-02T12:00") == {
        r1: ("RUNNING", None, 2, 1, Decimal(16)),  # job 2 ran on at 12:00: 8 GPUs for 1 h in the window
        "r2": ("CANCELLED", at(hour=10, minute=30), 1, 0, Decimal(4))}
    assert shown(lake, config, until="2026-11-03") == {  # the window holds job 2's end
        r1: ("COMPLETED", at(hour=13, minute=30), 2, 1, Decimal(28)),
        "r2": ("CANCELLED", at(hour=10, minute=30), 1, 0, Decimal(4))}


def test_the_cli_json_and_state_filter_read_the_state_as_of_until(tmp_path):
    _, _, path = lake_with_a_jobs_file(tmp_path)
    args = ["--config", str(path), "runs", "--since", "2026-11-02", "--until", "2026-11-02T12:00", "--format", "json"]
    answer = CliRunner().invoke(cli, args)
    assert answer.exit_code == 0, answer.output
    assert {r["run"]: (r["state"], r["end"]) for r in json.loads(answer.stdout)["rows"]} == {
        "r1": ("RUNNING", None), "r2": ("CANCELLED", "2026-11-02T10:30:00Z")}
    running = json.loads(CliRunner().invoke(cli, [*args, "--state", "running"]).stdout)
    assert [r["run"] for r in running["rows"]] == ["r1"]
