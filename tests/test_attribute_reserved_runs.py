"""`attribute --where run=idle` (or the run dimension's default) sums two things: the bucket the
run dimension reserves (the shared clusters' idle; the cost no run claims) and a run of that id's
jobs. `runs --run idle` says so; `attribute` warns the same way, on stderr and in the JSON's notes.

By hand (p5.48xlarge: 8 GPUs, $80 an hour, $10 a GPU-hour, 2026-11-02 10:00-11:00): on i-b, job 3
(run r2) holds 4 GPUs for 30 minutes ($20), job 5 (run `idle`) 4 GPUs for the next 30 ($20); the
other 4 GPUs are idle all hour ($40). A $5 storage line of team nlp is on no cluster: no run claims it.
"""

from __future__ import annotations

import json
from decimal import Decimal

import yaml
from click.testing import CliRunner

from service.cli.main import cli
from tests.attribution_helpers import line
from tests.test_clusters_allocation import gpu_line, job, setup
from tests.test_runs import whole_config

D = Decimal
WINDOW = ["--since", "2026-11-02", "--until", "2026-11-03"]
PAST = "the window's last 13.0 h have no data yet (the data runs through 2026-11-02T11:00:00Z)"  # of WINDOW
IDLE_NOTE = ("run=Idle holds the shared clusters' idle (the GPU-hours no job held) beside the jobs of any run with "
             "that id: the idle alone is job_state=idle, a run's own jobs `spendlake runs --run Idle`")
DEFAULT_NOTE = ("run=unallocated holds the run dimension's default (the cost no run claims) beside the jobs of any "
                "run with that id: a run's own jobs are `spendlake runs --run unallocated`")


def config_file(tmp_path) -> str:
    jobs = [job("3", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r2"),
            job("5", 4, "2026-11-02T10:30:00", "2026-11-02T11:00:00", instance_ids=["i-b"], run_id="idle")]
    storage = line("2026-11-02 10:00", "5", service="Amazon Simple Storage Service", tags={"team": "nlp"})
    lake, _ = setup(tmp_path, [gpu_line("i-b"), storage], jobs)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(whole_config(tmp_path, lake)))
    return str(path)


def attributed(path: str, *where: str):
    result = CliRunner().invoke(cli, ["--config", path, "attribute", *WINDOW, "--by", "run", "--format", "json",
                                      *(arg for value in where for arg in ("--where", value))])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    return sum(D(row["cost"]) for row in answer["rows"]), answer.get("notes", []), result.stderr


def test_where_run_idle_warns_that_it_adds_the_clusters_idle_to_a_run_of_that_id(tmp_path):
    path = config_file(tmp_path)
    cost, notes, stderr = attributed(path, "run=Idle")
    assert cost == D(60)  # the run's $20 and the idle $40
    assert f"warning: --where {IDLE_NOTE}" in stderr and notes == [IDLE_NOTE, PAST], stderr
    cost, notes, stderr = attributed(path, "job_state=idle")  # what the warning offers: the idle alone
    assert (cost, notes) == (D(40), [PAST]) and "warning" not in stderr, stderr


def test_where_run_at_the_dimensions_default_warns_that_it_adds_the_cost_no_run_claims(tmp_path):
    cost, notes, stderr = attributed(config_file(tmp_path), "run=unallocated")
    assert cost == D(5)
    assert f"warning: --where {DEFAULT_NOTE}" in stderr and notes == [DEFAULT_NOTE, PAST], stderr


def test_where_a_run_of_its_own_id_warns_of_nothing(tmp_path):
    cost, notes, stderr = attributed(config_file(tmp_path), "run=r2")
    assert (cost, notes) == (D(20), [PAST]) and "warning" not in stderr, stderr
