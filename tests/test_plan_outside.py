"""Plans vs actual: the cluster jobs a plan on an experiment leaves out, its run's jobs carrying the
run but not the experiment (service/report/plan_outside.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timezone
from decimal import Decimal

from rules.context import JobAttempt, Owner, RunCost
from service.core.config import parse_config
from service.core.lake import Lake
from service.planning.estimate import Span
from service.planning.plans import Plan, register_plan
from service.report.plan_outside import outside_runs
from service.report.sections.plans import plans_as_of
from tests.test_clusters_allocation import gpu_line, job, setup
from tests.test_runs import whole_config

D = Decimal
DAY = date(2026, 11, 2)
START = datetime(2026, 11, 2, 10, tzinfo=timezone.utc)


def plan_on(experiment: str | None, name: str = "llm-r1") -> Plan:
    return Plan(name=name, project="llm", experiment=experiment, start=START, run_hours=Span(D(24), D(24)),
                retention_days=0, compute_cost=Span(D(10000), D(10000)), storage_cost=Span(D(0), D(0)), inputs={})


def test_a_plan_on_an_experiment_its_runs_jobs_do_not_carry_says_so_and_how_to_count_them(tmp_path):
    """break51b: `estimate --register bert-r1 --project bert --experiment bert-r1`, the run's sacct jobs carrying
    `run=bert-r1` and no experiment, tracked the experiment's S3 lines alone (USD 300 of the run's 2,376) and read
    'under plan', nothing said. Here p5's i-a ($80 an hour): run llm-r1's job (project llm, no experiment) from
    10:00 to 11:00, run r9's (experiment e2) from 11:00 to 12:00; a $10 line tagged llm/e1 beside them. The plan
    llm-r1 on llm/e1 reads $10, and its note names run llm-r1's $80 and both fixes; r9, of another experiment
    it names, is not said. A plan on the project alone counts all of it and is told nothing."""
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="llm-r1",
                team="nlp", project="llm"),
            job("2", 8, "2026-11-02T11:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"], run_id="r9",
                team="nlp", project="llm", experiment="e2")]
    lines = [gpu_line("i-a", start=s) for s in ("2026-11-02T10:00:00", "2026-11-02T11:00:00")]
    lines.append(gpu_line("vol-1", cost="10", instance_type="gp3", project="llm", experiment="e1"))
    lake, _ = setup(tmp_path, lines, jobs)
    cfg = parse_config(whole_config(tmp_path, lake))
    lake = Lake.of(cfg)
    register_plan(lake, plan_on("e1"))
    found = plans_as_of(cfg, lake, DAY)
    [row] = found.rows
    assert (row["actual_to_date"].quantize(D("0.01")), row["status"]) == (D("10.00"), "under plan to data end")
    assert ("plan llm-r1 counts project llm, experiment e1 only: the cluster jobs of run llm-r1 (USD 80.00, no "
            "experiment) in its window carry project llm but not experiment e1, so its actual leaves them out "
            "(`spendlake runs --run llm-r1` gives their cost). Register the plan on its run (`spendlake estimate ... "
            "--register llm-r1 --project llm --run llm-r1 --start 2026-11-02`): its actual is then the run's jobs' "
            "cost, whatever experiment they carry.") in found.notes, found.notes
    assert not [note for note in found.notes if "r9" in note]

    register_plan(lake, plan_on(None))  # the same name: replaces it
    found = plans_as_of(cfg, lake, DAY)
    [row] = found.rows
    assert row["actual_to_date"].quantize(D("0.01")) == D("170.00")
    assert not [note for note in found.notes if "leaves them out" in note], found.notes

    # as the note says: on its run, the plan counts the run's jobs ($80) whatever experiment they carry, nothing else
    # (not e1's line, not r9), and is told nothing
    register_plan(lake, replace(plan_on("e1"), experiment=None, run="llm-r1"))
    found = plans_as_of(cfg, lake, DAY)
    [row] = found.rows
    assert (row["actual_to_date"].quantize(D("0.01")), row["run"], row["later_runs"]) == (D("80.00"), "llm-r1", None)
    assert not [note for note in found.notes if "leaves them out" in note], found.notes


def _run(name: str, cost: str, experiment: str) -> RunCost:
    owner = Owner("nlp", "llm", experiment)
    attempt = JobAttempt(name, "COMPLETED", datetime(2026, 11, 2, 10), datetime(2026, 11, 2, 11), D(8), D(cost),
                         "USD", owner=owner)
    return RunCost(name, owner, (attempt,))


def test_runs_with_no_experiment_not_the_plans_are_said_only_together_a_twentieth_of_its_actual():
    """The demo's plan on llama-405b's experiment: 40 ad-hoc debug jobs of its project with no experiment (USD 2,423
    of an actual of 1.5M, 0.16%) are not its run, and are not said; unlabelled runs that together come to 5% of the
    actual are (another run of the plan's, its jobs not labelled). The plan's own run is said whatever its cost."""
    plan = plan_on("e1")
    debug = [_run(f"4164{i}", "5", "unallocated") for i in range(9)]  # 45 of 1,000: 4.5%
    assert outside_runs(debug, plan, "unallocated", D(1000)) == []
    assert len(outside_runs([*debug, _run("41650", "5", "unallocated")], plan, "unallocated", D(1000))) == 10
    assert outside_runs([*debug, _run("llm-r1", "1", "unallocated"), _run("x", "900", "e2")], plan, "unallocated",
                        D(1000)) == [("llm-r1", "unallocated", D(1))]
    # the plan's run labelled with another experiment is said too; an experiment's default other than 'unallocated'
    assert outside_runs([_run("LLM-R1", "7", "e1-typo"), _run("42", "60", "none")], plan, "none", D(1000)) == [
        ("42", "none", D(60)), ("LLM-R1", "e1-typo", D(7))]
    assert outside_runs([_run("llm-r1", "7", "unallocated")], plan_on(None), "unallocated", D(1000)) == []
