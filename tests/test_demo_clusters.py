"""The demo's Slurm cluster seen everywhere (issue 16, points 5 and 6): `spendlake demo` prints
its cost by job type and its top runs, and the daily report has a section with the month's top
runs, what failed and cancelled jobs cost, cost by job type per day and each cluster's idle
share; every figure ties out to the cluster's bill and to `spendlake runs`."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest

from connectors.synthetic.slurm import EVALUATED_RUN
from service.attribution import RunsQuery, cluster_usage, runs
from service.cli.demo import _print_cluster
from service.core.lake import Lake
from service.core.timewindow import Window, day_start
from service.report.data import gather

pytestmark = pytest.mark.slow  # reads the session's demo run

CENT = Decimal("0.01")


def instance_hours_cost(lake: Lake, window: Window, instances: list[str]) -> Decimal:
    """Σ billed cost of the instances' hourly BoxUsage lines inside the window, from the raw lines."""
    with lake.query() as con:
        [(cost,)] = con.execute(
            "SELECT sum(BilledCost) FROM costs WHERE ResourceId IN (SELECT unnest($ids)) "
            "AND x_usage_type LIKE '%BoxUsage%' AND ChargePeriodStart >= $since AND ChargePeriodEnd <= $until",
            {"ids": instances, "since": window.since.replace(tzinfo=None),
             "until": window.until.replace(tzinfo=None)}).fetchall()
    return cost


def money(text: str) -> Decimal:
    return Decimal(text.replace(",", ""))


def test_the_demo_prints_the_clusters_cost_by_job_type_and_its_top_runs(demo_run, capsys):
    _print_cluster(demo_run)
    printed = capsys.readouterr().out
    by_type, top = printed.split("top runs, last 7 days", 1)
    costs = {m.group(1): money(m.group(2)) for m in re.finditer(r"^│ (\w+)\s*│ USD\s*│\s*([\d,.]+) │", by_type, re.M)}
    # training, post-training (SFT and DPO as rl), nightly evals, debug sessions and the idle GPUs
    assert {"pretrain", "sft", "rl", "eval", "debug", "idle"} <= set(costs)
    assert costs["idle"] > 0 and costs["pretrain"] == max(costs.values())
    # the jobs and idle add up to what the cluster's nodes cost in those 7 days (to the cent on
    # each printed row); `unallocated` holds the cluster's other lines (the nodes' volumes, traffic)
    lake = Lake.of(demo_run.config)
    window = Window(demo_run.as_of - timedelta(days=7), demo_run.as_of)
    [cluster] = demo_run.generation.organisation.clusters
    gpu_time = {t: c for t, c in costs.items() if t != "unallocated"}
    nodes = instance_hours_cost(lake, window, list(cluster.nodes.values()))
    assert nodes == Decimal("98.32") * len(cluster.nodes) * 24 * 7
    assert abs(sum(gpu_time.values()) - nodes) <= CENT * len(gpu_time) / 2
    # the top runs are `spendlake runs`' costliest, the rest summed as other, told from a run of
    # that name by its count as `spendlake runs --top` shows it (it read `other`, as a run would)
    expected = runs(lake, demo_run.config, RunsQuery(window, top=8))
    shown = re.findall(r"^│ (\S+(?: \(\d+ runs\))?)\s*│.*│\s*([\d,.]+) │\s*([\d,.]*) │$", top, re.M)
    assert [(name, money(cost), money(evals or "0")) for name, cost, evals in shown] == [
        (f"other ({r.folded_runs} runs)" if r.folded_runs else r.run, r.cost.quantize(CENT),
         r.eval_cost.quantize(CENT)) for r in expected.rows]
    assert re.fullmatch(r"other \(\d+ runs\)", shown[-1][0])
    # the nightly evals name the pretraining run they score: its eval cost is theirs, beside its cost
    [scored] = [r for r in expected.rows if r.run == EVALUATED_RUN]
    evals = [j for j in cluster_usage(lake, demo_run.config, window).jobs if j.values["job_type"] == "eval"]
    assert {j.values["parent_run"] for j in evals} == {EVALUATED_RUN}
    assert scored.eval_cost == sum(j.cost for j in evals) > 0 and scored.cost > scored.eval_cost


def test_the_report_shows_top_runs_unfinished_jobs_idle_and_job_types(demo_run):
    config, lake = demo_run.config, Lake.of(demo_run.config)
    day = (demo_run.as_of - timedelta(days=1)).date()
    [section] = [s for s in gather(config, lake, day).sections if s.key == "clusters"]
    tables = {t.key: t for t in section.tables}
    month = Window(day_start(day.replace(day=1)), day_start(day) + timedelta(days=1))
    usage = cluster_usage(lake, config, month)
    [cluster] = usage.clusters

    expected = runs(lake, config, RunsQuery(month, top=config.report.top))
    assert [(r["run"], r["cost"]) for r in tables["top_runs"].rows] == [
        (r.run, r.cost) for r in expected.rows if not r.folded_runs]

    [idle] = tables["cluster_idle"].rows
    assert (idle["cluster"], idle["cost"], idle["idle"]) == (cluster.cluster, cluster.cost, cluster.idle)
    assert idle["jobs_cost"] + idle["idle"] == idle["cost"] > 0 and 0 < idle["idle_pct"] < 100

    unfinished = {r["state"]: r for r in tables["unfinished_jobs"].rows}
    # the title named failed, cancelled and timed-out jobs above REQUEUED's $238,700.18 (demo)
    assert tables["unfinished_jobs"].title == (
        "Unfinished jobs (failed, cancelled, timed out, requeued, preempted...), month to date")
    assert "REQUEUED" in unfinished
    assert {"FAILED", "CANCELLED", "TIMEOUT"} <= set(unfinished)  # the demo's crashes, cancelled debug, 2 h limits
    for state, row in unfinished.items():
        assert row["cost"] == sum(j.cost for j in usage.jobs if j.values["job_state"] == state) > 0, state

    # per day and job type: what the cluster's lines cost each day of the last 30
    days = tables["cluster_cost_by_job_type"].rows
    assert {"pretrain", "eval", "debug", "idle"} <= {r["job_type"] for r in days}
    last = day_start(day)
    assert sum(r["cost"] for r in days if r["period"] == day.isoformat() and r["job_type"] != "unallocated") == (
        instance_hours_cost(lake, Window(last, last + timedelta(days=1)),
                            list(demo_run.generation.organisation.clusters[0].nodes.values())))
    [chart] = section.charts
    assert sum(values[-1] for values in chart.series.values()) == sum(
        r["cost"] for r in days if r["period"] == day.isoformat())


def test_a_run_still_running_at_the_demos_end_is_found_by_its_name_with_its_running_job(demo_run):
    """break49b: the demo's running jobs carried no comment (Slurm 22.05's sacct stores it when a
    job ends), so a run still running was not found by its name (`runs --run sft-chat-v5-28` exit 2)
    and its cost sat under its job id (run `41655`). The demo writes a running job's comment now:
    each job running at the demo's end whose comment names a run is in that run's story."""
    from connectors.synthetic.slurm import DAY, cluster_jobs

    org = demo_run.generation.organisation
    [cluster] = org.clusters
    end = org.days * DAY
    running = [(dict(job.labels)["run"], str(job.job_id)) for job in cluster_jobs(org, cluster)
               if job.start is not None and job.start < end and (job.end is None or job.end > end)
               and "run" in dict(job.labels)]
    assert any(run != job for run, job in running), running  # a labelled run, not a debug session's job id
    lake = Lake.of(demo_run.config)
    for run, job in running:
        story = runs(lake, demo_run.config, RunsQuery.parse(since=None, run=run)).story
        assert job in {j.job for j in story.jobs if j.end is None}, (run, job)
