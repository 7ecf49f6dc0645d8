"""Plans vs actual: what a plan's estimate allowed for failures (`--failure-overhead`) beside what
failed attempts run again spent in its window (service/report/plan_failures.py)."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from service.cli.main import cli
from service.core.config import parse_config
from service.planning.estimate import estimate, plan_inputs
from service.planning.plans import plan_from_estimate, register_plan
from service.report.sections.plans import plans_as_of
from service.serve.app import Api
from tests.test_failed_reruns import hand_lake
from tests.test_runs import whole_config

D = Decimal
DAY = date(2026, 11, 2)
# 7B params on 20B tokens at 8 H100s: a run of days from the 2nd's midnight, over the hand lake's jobs (10:00-12:00)
RUN = {"params": "7B", "tokens": "20B", "gpu": "H100", "gpus": 8, "mfu": "0.4", "price_per_gpu_hour": "10",
       "storage_price_per_gb_month": "0"}


def registered(lake, cfg, failure_overhead: str, **more):
    inputs = plan_inputs({**RUN, "failure_overhead": failure_overhead, **more})
    plan = plan_from_estimate(estimate(inputs, cfg), name="llm-r1", project="llm", experiment="e1",
                              start=DAY.isoformat())
    register_plan(lake, plan)
    return plan


def test_a_plans_failed_reruns_are_set_beside_its_planned_failure_overhead_and_said_when_above(tmp_path):
    """The hand lake's run r1 (project llm, experiment e1) failed twice and ran again: $31.33 of its
    $111.33 (the failed-reruns rule's count, what `runs --run r1` says), 28.1%. A plan allowing 10%
    failures (of the training compute: 0.1 / 1.1 of its compute, 9.1% of its total, no storage kept)
    is told it; one allowing 50% (33.3%) is not."""
    lake, cfg = hand_lake(tmp_path)
    plan = registered(lake, cfg, "0.1", retention_days=0)
    found = plans_as_of(cfg, lake, DAY)
    [row] = found.rows
    assert (row["actual_to_date"].quantize(D("0.01")), row["planned_failure_overhead"], row["planned_failure_pct"],
            row["failed_actual"].quantize(D("0.01")), row["failed_pct"]) == (
        D("111.33"), "0.1", D("9.1"), D("31.33"), D("28.1"))
    assert plan.storage_cost.high == 0  # the 9.1% is of its compute alone
    assert ("plan llm-r1: failed attempts run again (the failed-reruns rule's count) cost USD 31.33 in its window, "
            "28.1% of its actual, above the 9.1% of its total its estimate allowed for failures (--failure-overhead "
            "0.1): `spendlake runs --run r1` tells which attempts.") in found.notes

    registered(lake, cfg, "50%", retention_days=0)  # the same name: replaces it
    [row] = (found := plans_as_of(cfg, lake, DAY)).rows
    assert (row["planned_failure_overhead"], row["planned_failure_pct"], row["failed_pct"]) == ("0.5", D("33.3"),
                                                                                                D("28.1"))
    assert not [note for note in found.notes if "failed attempts run again" in note]

    registered(lake, cfg, "0", retention_days=0)  # no failure overhead: nothing allowed, not "above 0.0%"
    [row] = (found := plans_as_of(cfg, lake, DAY)).rows
    assert (row["planned_failure_pct"], row["failed_pct"]) == (D("0.0"), D("28.1"))
    assert ("28.1% of its actual, where its estimate allowed nothing for failures (no --failure-overhead): "
            "`spendlake runs --run r1` tells which attempts.") in " ".join(found.notes)


def test_the_plans_json_and_the_api_carry_the_figures_and_a_lake_without_job_records_says_nothing(tmp_path):
    lake, cfg = hand_lake(tmp_path)
    registered(lake, cfg, "0.1", retention_days=0)
    config = tmp_path / "spendlake.yaml"
    config.write_text(json.dumps(whole_config(tmp_path, lake)))
    out = CliRunner().invoke(cli, ["--config", str(config), "plans", "--as-of", DAY.isoformat(), "--format", "json"])
    assert out.exit_code == 0, out.output
    [row] = json.loads(out.stdout)
    assert (row["planned_failure_pct"], D(row["failed_actual"]).quantize(D("0.01")), row["failed_pct"]) == (
        "9.1", D("31.33"), "28.1")
    assert "failed attempts run again" in out.stderr
    body = json.loads(Api(cfg, CollectorRegistry()).handle("/api/v1/plans", {"as_of": [DAY.isoformat()]}, None).body)
    assert body["rows"] == json.loads(out.stdout)
    assert [note for note in body["notes"] if "failed attempts run again" in note]

    # the same lake read without `attribution.clusters`: no runs, no job records to count
    bare = parse_config({**whole_config(tmp_path, lake), "attribution": {}})
    found = plans_as_of(bare, lake, DAY)
    [row] = found.rows
    assert (row["planned_failure_pct"], row["failed_actual"], row["failed_pct"]) == (D("9.1"), None, None)
    assert not [note for note in found.notes if "failed attempts run again" in note]


def test_the_demos_plan_allowed_10_percent_for_failures_and_its_run_spent_what_its_story_says(demo_run, monkeypatch):
    """break49b: the demo's plan allows 10% for failures (`--failure-overhead 0.1`) while `runs --run llama-405b-r1`
    says half its cost went to failed attempts run again; plan vs actual never said it. Its row carries the
    story's figure, to the cent, beside the plan's, and its note says the run spent above it."""
    monkeypatch.setenv("COLUMNS", "400")  # the story's lines one each
    config = str(demo_run.config_path)
    shown = CliRunner().invoke(cli, ["--config", config, "plans", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    [row] = json.loads(shown.stdout)
    story = CliRunner().invoke(cli, ["--config", config, "runs", "--run", "llama-405b-r1", "--format", "table"])
    [said] = [line for line in story.stdout.splitlines() if line.startswith("failed and run again")]
    failed = D(row["failed_actual"]).quantize(D("0.01"))
    assert f": USD {failed:,} of {D(row['actual_to_date']).quantize(D('0.01')):,} ({row['failed_pct']}%)" in said
    assert (row["planned_failure_overhead"], row["planned_failure_pct"], failed, row["failed_pct"]) == (
        "0.1", "9.1", D("520194.00"), "51.7")
    assert f"cost USD {failed:,} in its window, {row['failed_pct']}% of its actual, above the 9.1%" in shown.stderr


def test_the_plans_failures_read_the_job_records_in_the_sections_one_snapshot(tmp_path, monkeypatch):
    """review49: each plan's failures read the job records in a snapshot of their own (a commit between
    the actual and them mixed two lake states; a snapshot taken per plan): every plan's read is in the
    snapshot the section's actuals were read in, held with the job records."""
    from service.attribution import HELD_TABLES, run_costs
    from service.core import snapshot as snapshots

    lake, cfg = hand_lake(tmp_path)
    registered(lake, cfg, "0.1", retention_days=0)
    inputs = plan_inputs({**RUN, "failure_overhead": "0.2"})
    register_plan(lake, plan_from_estimate(estimate(inputs, cfg), name="llm-r1b", project="llm", experiment="e1",
                                           start=DAY.isoformat()))
    taken, read_in = [], []
    take = snapshots.take_snapshot
    monkeypatch.setattr(snapshots, "take_snapshot", lambda *args: taken.append(take(*args)) or taken[-1])
    within = run_costs.read_within
    monkeypatch.setattr(run_costs, "read_within",
                        lambda lake, snapshot, *rest: read_in.append(snapshot) or within(lake, snapshot, *rest))
    rows = plans_as_of(cfg, lake, DAY).rows
    assert [row["failed_actual"].quantize(D("0.01")) for row in rows] == [D("31.33"), D("31.33")]
    # the first snapshot taken is the command's (read_consistently's), the one both plans' reads are in
    assert len(read_in) == 2 and read_in[0] is read_in[1] is taken[0], (read_in, taken)
    assert set(HELD_TABLES) <= set(taken[0].tables), taken[0].tables


def test_a_run_whose_jobs_carry_two_projects_counts_its_failed_attempts_toward_each_projects_plan(tmp_path):
    """review49: a run whose jobs' cost carries several projects (its owner `several`) counted toward no plan:
    the hand lake's run r1 with its NODE_FAIL attempt (job 2, $4.67) on project vision, its FAILED one (job 1,
    $26.67) and the completed re-run ($80) on llm: each plan counts the failed attempt its project's cost carries."""
    from tests.test_clusters_allocation import gpu_line, job, setup
    from tests.test_failed_reruns import OWNER
    from service.core.lake import Lake

    vision = {**OWNER, "project": "vision"}
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:20:00", instance_ids=["i-a"], run_id="r1",
                state="FAILED", **OWNER),
            job("2", 4, "2026-11-02T10:25:00", "2026-11-02T10:32:00", instance_ids=["i-a"], run_id="r1",
                state="NODE_FAIL", **vision),
            job("3", 8, "2026-11-02T11:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"], run_id="r1", **OWNER)]
    lake, _ = setup(tmp_path, [gpu_line("i-a", start=s) for s in ("2026-11-02T10:00:00", "2026-11-02T11:00:00")], jobs)
    cfg = parse_config(whole_config(tmp_path, lake))
    lake = Lake.of(cfg)
    registered(lake, cfg, "0.1", retention_days=0)  # llm-r1: project llm, experiment e1
    inputs = plan_inputs({**RUN, "failure_overhead": "0.1", "retention_days": 0})
    register_plan(lake, plan_from_estimate(estimate(inputs, cfg), name="vision-r1", project="vision",
                                           experiment="e1", start=DAY.isoformat()))
    cent = D("0.01")
    rows = {row["plan"]: row for row in plans_as_of(cfg, lake, DAY).rows}
    assert {name: (row["actual_to_date"].quantize(cent), row["failed_actual"] and row["failed_actual"].quantize(cent),
                   row["failed_pct"]) for name, row in rows.items()} == {
        "llm-r1": (D("106.67"), D("26.67"), D("25.0")), "vision-r1": (D("4.67"), D("4.67"), D("100.0"))}, rows


def test_a_later_run_not_registered_that_a_plans_actual_counts_after_its_runs_end_is_named(tmp_path):
    """review49: a second run of a plan's project begun while the first one's storage is kept counts in the
    first plan's actual, said nowhere. p5's i-a ($80 an hour): r1 (project llm) from 10:00 to 10:30, the plan's
    run, to 10:45 with a day's storage kept; r2 (llm too) from 11:00 to 12:00, $80, registered as no plan: the
    note names r2 and how to end the plan's actual at its start. The plan's own run going on past its end is
    not named (r1 again from 10:50 to 11:00, $13.33)."""
    from dataclasses import replace
    from datetime import datetime, timezone
    from tests.test_clusters_allocation import gpu_line, job, setup
    from tests.test_failed_reruns import OWNER
    from service.core.lake import Lake
    from service.planning.plans import Plan
    from service.planning.estimate import Span

    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1", **OWNER),
            job("3", 8, "2026-11-02T10:50:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1", **OWNER),
            job("2", 8, "2026-11-02T11:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"], run_id="r2", **OWNER)]
    lake, _ = setup(tmp_path, [gpu_line("i-a", start=s) for s in ("2026-11-02T10:00:00", "2026-11-02T11:00:00")], jobs)
    cfg = parse_config(whole_config(tmp_path, lake))
    lake = Lake.of(cfg)
    plan = Plan(name="llm-r1", project="llm", experiment="e1", start=datetime(2026, 11, 2, tzinfo=timezone.utc),
                run_hours=Span(D("10.75"), D("10.75")), retention_days=1, compute_cost=Span(D(100), D(100)),
                storage_cost=Span(D(0), D(0)), inputs={})
    register_plan(lake, plan)
    found = plans_as_of(cfg, lake, DAY)
    [row] = found.rows
    # r1's $40 and $13.33 (to its end and after); r2's $80 (the idle 20 minutes: no one's) set apart (session 51:
    # the actual counted it, $133.33, over plan, where the note named it a later run)
    assert (row["actual_to_date"].quantize(D("0.01")), row["later_runs"]) == (D("53.33"), D(80)), row
    assert ("plan llm-r1's actual leaves out run r2 (USD 80.00, from 2026-11-02 11:00 UTC), begun after its run's "
            "end (2026-11-02 10:45 UTC) while it pays for storage: a later run not registered, USD 80.00 in no plan's "
            "actual (later_runs). Register it (`spendlake estimate ... --register NAME --project llm --experiment e1 "
            "--start DAY`: its scope, or the whole project's) to set it against a plan of its own.") in found.notes, \
        found.notes
    # its chart's actual leaves it out too: $53.33 on the 2nd
    from service.report.sections.plans import plans_section
    [chart] = plans_section(cfg, lake, DAY).charts
    assert [None if v is None else v.quantize(D("0.01")) for v in chart.series["actual"]] == [D("53.33"), None], (
        chart.categories, chart.series)
    # registered, r2 is the later plan's, and the first plan's actual ends at its start
    register_plan(lake, replace(plan, name="llm-r2", start=datetime(2026, 11, 2, 11, tzinfo=timezone.utc)))
    found = plans_as_of(cfg, lake, DAY)
    assert {row["plan"]: row["actual_to_date"].quantize(D("0.01")) for row in found.rows} == {
        "llm-r1": D("53.33"), "llm-r2": D("80.00")}, found.rows
    assert not [note for note in found.notes if "later run not registered" in note], found.notes
    assert [row["later_runs"] for row in found.rows] == [None, None]


def test_a_later_run_a_narrower_registered_plan_counts_stays_in_the_plans_actual_not_set_apart_as_no_plans(tmp_path):
    """review51 item 1: llm-all (project llm, its run to 10:45, a day's storage kept) and e1-r2 (experiment e1,
    from 11:00: narrower, so it leaves llm-all's window alone); r2 (e1, 11:00 to 12:00, $80) is in e1-r2's actual.
    llm-all set it apart as 'in no plan's actual, register it' ($40 and later_runs $80). It is e1-r2's: the later
    plan takes its scope's spend from its start, so llm-all's actual leaves it out as e1-r2's (later_plans $80, was
    in both actuals, $120 and $80, in session 51), not as no plan's."""
    from datetime import datetime, timezone
    from tests.test_clusters_allocation import gpu_line, job, setup
    from tests.test_failed_reruns import OWNER
    from service.core.lake import Lake
    from service.planning.plans import Plan
    from service.planning.estimate import Span

    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1", **OWNER),
            job("2", 8, "2026-11-02T11:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"], run_id="r2", **OWNER)]
    lake, _ = setup(tmp_path, [gpu_line("i-a", start=s) for s in ("2026-11-02T10:00:00", "2026-11-02T11:00:00")], jobs)
    cfg = parse_config(whole_config(tmp_path, lake))
    lake = Lake.of(cfg)
    register_plan(lake, Plan(name="llm-all", project="llm", experiment=None,
                             start=datetime(2026, 11, 2, tzinfo=timezone.utc), run_hours=Span(D("10.75"), D("10.75")),
                             retention_days=1, compute_cost=Span(D(100), D(100)), storage_cost=Span(D(0), D(0)),
                             inputs={}))
    register_plan(lake, Plan(name="e1-r2", project="llm", experiment="e1",
                             start=datetime(2026, 11, 2, 11, tzinfo=timezone.utc), run_hours=Span(D(1), D(1)),
                             retention_days=0, compute_cost=Span(D(80), D(80)), storage_cost=Span(D(0), D(0)),
                             inputs={}))
    found = plans_as_of(cfg, lake, DAY)
    assert {row["plan"]: (row["actual_to_date"].quantize(D("0.01")), row["later_runs"], row["later_plans"])
            for row in found.rows} == {"llm-all": (D("40.00"), None, D(80)), "e1-r2": (D("80.00"), None, None)}, \
        found.rows
    assert not [note for note in found.notes if "in no plan's actual" in note], found.notes
    assert ("plan llm-all's actual leaves out what plans of a narrower scope count from their start: USD 80.00 to plan "
            "e1-r2 (project llm, experiment e1, from 2026-11-02 11:00 UTC) (later_plans). Each dollar is in one plan's "
            "actual: the latest-started one whose scope holds it (on one start, the narrower one's).") in found.notes, \
        found.notes
    assert not [note for note in found.notes if note.startswith("plans ")], found.notes


def test_later_runs_below_a_hundredth_of_the_plans_actual_are_not_named_and_the_named_are_the_costliest_three():
    """small50: the demo's plan on llama-405b from 11-01 named run 41537 (USD 157.75) and 20 more (USD 1,039.08),
    ad-hoc jobs by their ids, of an actual of USD 798,000: noise. A later run is named where it comes to 1% of the
    plan's actual or more, three at most, the rest (small ones too) folded into 'and N more runs'."""
    from datetime import datetime, timezone
    from service.planning.estimate import Span
    from service.planning.plans import Plan
    from service.report.plan_later_runs import judged, later_runs_note

    plan = Plan(name="p", project="llm", experiment=None, start=datetime(2026, 11, 1, tzinfo=timezone.utc),
                run_hours=Span(D(24), D(24)), retention_days=30, compute_cost=Span(D(100), D(100)),
                storage_cost=Span(D(0), D(0)), inputs={})
    at = datetime(2026, 11, 5, 9)
    small = [(f"4153{i}", at, D("9.99")) for i in range(5)]  # 9.99 of 1,000: under 1%
    assert not judged(small, D(1000))
    big = [("r2", at, D(400)), ("r3", at, D(300)), ("r4", at, D(200)), ("r5", at, D(100))]
    assert judged(big + small, D(1000))
    assert later_runs_note(plan, big + small, D(1000), D("1049.95")) == (
        "plan p's actual leaves out run r2 (USD 400.00, from 2026-11-05 09:00 UTC), run r3 (USD 300.00, from "
        "2026-11-05 09:00 UTC), run r4 (USD 200.00, from 2026-11-05 09:00 UTC) and 6 more runs (USD 149.95), begun "
        "after its run's end (2026-11-02 00:00 UTC) while it pays for storage: a later run not registered, USD "
        "1,049.95 in no plan's actual (later_runs). Register it (`spendlake estimate ... --register NAME --project llm "
        "--start DAY`: its scope, or the whole project's) to set it against a plan of its own.")


def test_later_runs_each_small_but_together_a_twentieth_of_the_plans_actual_are_named_the_costliest_three():
    """fixb50a: a second run whose jobs carry no run label reads as many runs named by job id, each under 1% of the
    plan's actual (400 jobs of 0.5%: 200% together) and went unsaid, the plan over plan unexplained. Later runs that
    together come to 5% of the actual are named, the costliest three, the rest folded; under 5% together, nothing."""
    from datetime import datetime, timezone
    from service.planning.estimate import Span
    from service.planning.plans import Plan
    from service.report.plan_later_runs import judged, later_runs_note

    plan = Plan(name="p", project="llm", experiment=None, start=datetime(2026, 11, 1, tzinfo=timezone.utc),
                run_hours=Span(D(24), D(24)), retention_days=30, compute_cost=Span(D(100), D(100)),
                storage_cost=Span(D(0), D(0)), inputs={})
    at = datetime(2026, 11, 5, 9)
    jobs = [(f"{90000 + i}", at, D(5)) for i in range(400)]  # 5 of 1,000 each: 0.5%, 200% together
    assert judged(jobs, D(1000))
    assert later_runs_note(plan, jobs, D(1000), D(2000)) == (
        "plan p's actual leaves out run 90000 (USD 5.00, from 2026-11-05 09:00 UTC), run 90001 (USD 5.00, from "
        "2026-11-05 09:00 UTC), run 90002 (USD 5.00, from 2026-11-05 09:00 UTC) and 397 more runs (USD 1,985.00), "
        "begun after its run's end (2026-11-02 00:00 UTC) while it pays for storage: a later run not registered, USD "
        "2,000.00 in no plan's actual (later_runs). Register it (`spendlake estimate ... --register NAME --project llm "
        "--start DAY`: its scope, or the whole project's) to set it against a plan of its own.")
    assert judged(jobs[:10], D(1000))  # 5.0% together
    assert "and 7 more runs (USD 35.00)" in later_runs_note(plan, jobs[:10], D(1000), D(50))
    assert not judged(jobs[:9], D(1000))  # 4.5% together
