"""idle-gpu on a shared GPU cluster: an hour a job held is the job's, not the instance's idle.
Figures by hand (p5.48xlarge: 8 GPUs, $80 an hour; i-a billed 10:00 to 13:00, SM activity 1% in
every hour): job 1 held its 8 GPUs 10:00-11:00 and did nothing (a hung job: its cost is the job's,
`spendlake runs` shows it); nobody held 11:00-13:00, the cluster's idle. The idle run is those two
hours, $160 of the day's window: 160 × 730 / 24 = $4,866.67 a month. Counting the held hour too
said $240 ($7,300.00 a month), the job's $80 flagged as the instance's idle."""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal

import pytest

from rules.idle_gpu import IdleGpu, IdleGpuConfig
from service.attribution.compute import RollupSession
from service.core.config import parse_config
from service.core.lake import Lake
from service.core.timewindow import Window
from service.findings.run import rule_context
from tests.attribution_helpers import line, query_memory_limits, readers_memory_limit
from tests.rules_lake import build_lake
from tests.test_clusters_allocation import gpu_line, job, setup
from tests.test_runs import whole_config

WINDOW = Window(datetime(2026, 11, 2, tzinfo=timezone.utc), datetime(2026, 11, 3, tzinfo=timezone.utc))


def idle_finding(tmp_path, gpus: int, monkeypatch=None, rollup: str = "any", negated: bool = False):
    """i-a's finding when job 1 held `gpus` of its 8 GPUs 10:00-11:00 (`negated`: each hour's
    usage covered by a Savings Plan, $50 effective, and its SavingsPlanNegation line, a Credit of
    -$80 on the same instance, as a CUR bills it)."""
    lines = [gpu_line("i-a", start=f"2026-11-02T{h}:00:00") for h in (10, 11, 12)]
    if negated:
        for item in lines:
            item["effective"] = "50"
        lines += [line(f"2026-11-02T{h}:00:00", "-80", resource="i-a", instance_type="p5.48xlarge",
                       category="Credit", effective="0", list_cost="0", tags={"team": "platform"})
                  for h in (10, 11, 12)]
    jobs = [job("1", gpus, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1")]
    lake, _ = setup(tmp_path, lines, jobs)
    build_lake(lake, {"gpu_utilization": [
        {"resource_id": "i-a", "hour": f"2026-11-02 {h}:00:00", "util_pct": 1.0, "metric": "DCGM_FI_PROF_SM_ACTIVE"}
        for h in (10, 11, 12)]}, date(2026, 11, 2))
    config = whole_config(tmp_path, lake)  # the utilisation of build_lake's inventory source `test`
    config["inventory"].append({"name": "test", "kind": "gpu-metrics", "path": str(tmp_path / "dcgm.parquet")})
    cfg = parse_config(config)
    if rollup == "none":  # the held hours are placed on the window's lines: no session rolls up every period
        monkeypatch.setattr(RollupSession, "__init__", lambda *args, **kwargs: pytest.fail("a rollup session opened"))
    with Lake.of(cfg).query() as con:
        [finding] = IdleGpu(IdleGpuConfig()).evaluate(rule_context(Lake.of(cfg), cfg, WINDOW, con))
    return finding


@pytest.mark.parametrize("rollup", ["any", "none"])
def test_an_hour_a_job_held_is_not_idle_however_little_its_gpus_did(tmp_path, monkeypatch, rollup):
    finding = idle_finding(tmp_path, 8, monkeypatch, rollup)
    evidence = finding.evidence
    assert (evidence["idle_hours"], evidence["billed_hours"], evidence["idle_cost_usd"]) == (2, 3, "160.00")
    assert [(run["start"], run["hours"]) for run in evidence["idle_runs"]] == [("2026-11-02T11:00:00", 2)]
    assert finding.monthly_waste_usd == Decimal("4866.67")


def test_an_hour_a_job_held_one_of_eight_gpus_leaves_seven_eighths_idle(tmp_path):
    """The same instance and hours; job 1 held 1 of its 8 GPUs 10:00-11:00: that hour's $80 is $10
    the job's and $70 nobody's (the cluster's idle), so the run is the three hours, $70 + $160 = $230:
    230 × 730 / 24 = $6,995.83 a month. Before, the hour was the job's whole and the run two hours."""
    finding = idle_finding(tmp_path, 1)
    evidence = finding.evidence
    assert (evidence["idle_hours"], evidence["partly_held_hours"], evidence["idle_cost_usd"]) == (3, 1, "230.00")
    assert [(run["start"], run["hours"]) for run in evidence["idle_runs"]] == [("2026-11-02T10:00:00", 3)]
    assert finding.monthly_waste_usd == Decimal("6995.83")
    assert "for 3 of 3 billed hours (in 1 of them jobs held some of its GPUs: only the rest counts)" in finding.summary


@pytest.mark.parametrize("gpus, idle_hours, idle_cost", [(8, 2, "160.00"), (1, 3, "230.00")])
def test_a_savings_plans_negation_line_does_not_cancel_the_hours_jobs_held(tmp_path, gpus, idle_hours, idle_cost):
    """The hours above under a Savings Plan: each hour's covered usage bills $80 (BilledCost) and its
    negation line -$80 on i-a. idle-gpu counts the usage line's $80 an hour (credits it ignores), so
    the part jobs held must be theirs of that line too: job 1's 8 GPUs hold the 10:00 hour's $80
    (the run is 11:00-13:00, $160), its 1 GPU $10 of it ($70 + $160 = $230), as without the Plan.
    (Before: the job's part of usage and negation netted to $0 held, so the hour jobs held wholly
    counted $80 idle: 3 hours, $240; with 1 GPU $240 too.)"""
    evidence = idle_finding(tmp_path, gpus, negated=True).evidence
    assert (evidence["idle_hours"], evidence["idle_cost_usd"]) == (idle_hours, idle_cost)


def test_the_hours_jobs_held_are_placed_within_a_readers_memory(tmp_path, monkeypatch):
    """idle-gpu's held hours allocate the window's cluster lines in memory, as the daily-spend lookup
    and a session rolling up do, but on a connection without a limit (DuckDB may take 80% of the
    machine's memory): it now spills beyond READER_MEMORY_LIMIT. Job 1 held 4 of i-a's 8 GPUs for
    its 10:00 hour: $40 of the $80."""
    from service.attribution import held_hours_lookup

    lake, cfg = setup(tmp_path, [gpu_line("i-a")],
                      [job("1", 4, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1")])
    limits = query_memory_limits(monkeypatch)
    held = held_hours_lookup(lake, cfg)(WINDOW, "BilledCost")
    assert held == {("i-a", datetime(2026, 11, 2, 10)): Decimal(40)}
    assert limits and set(limits) == {readers_memory_limit()}


def test_the_rules_sql_aggregates_within_a_readers_memory(tmp_path, monkeypatch):
    """The rules' own queries (idle-gpu's cost by instance and hour, commitment-unused's by
    commitment and hour, over the window's lines) ran on a connection without a limit, in the
    process where the daily-spend lookup and the held hours keep to a reader's 400 MB."""
    from service.findings import run as run_module

    lake, cfg = setup(tmp_path, [gpu_line("i-a")], [])
    limits = []
    context = run_module.rule_context

    def recorded(lake, config, window, con, snapshot):
        limits.append(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
        return context(lake, config, window, con, snapshot)

    monkeypatch.setattr(run_module, "rule_context", recorded)
    report = run_module.run_rules(cfg, only=["idle-gpu"], since="30d", dry_run=True)
    assert report.result.findings == []  # no utilisation: nothing idle to say
    assert limits and set(limits) == {readers_memory_limit()}
