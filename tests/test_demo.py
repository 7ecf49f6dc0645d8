"""`spendlake demo` end to end: generate, ingest, show; deterministic and safe to re-run."""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from connectors.synthetic.billing import write_billing
from connectors.synthetic.capacity import add_capacity_reservation
from connectors.synthetic.org import build_organisation, inject_gpu_anomaly
from connectors.synthetic.slurm import add_slurm_cluster
from service.cli.main import cli
from service.core.lake import Lake
from service.serve.metrics import JobMetrics, LakeCollector
from service.serve.scheduler import ServiceScheduler, Tasks

pytestmark = pytest.mark.slow  # each runs the whole demo, or reads the session's demo_run

ARGS = ["demo", "--days", "3", "--start", "2026-10-30", "--seed", "5"]  # three days across a month boundary


def lake_files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


def test_demo_generates_ingests_and_shows_the_lake(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    first = runner.invoke(cli, ARGS)
    assert first.exit_code == 0, first.output
    assert "ml-org 2026-10: committed" in first.output and "ml-org 2026-11: committed" in first.output
    assert "spendlake status" in first.output
    report = tmp_path / "spendlake-data" / "reports" / "2026-11-01"
    assert "report: spendlake-data/reports/2026-11-01/report.html" in first.output
    # the research lead's next step names the runs and the costliest run's story, runnable as pasted
    pasted = [line.split(" --config spendlake-data/demo/spendlake.yaml ")[1] for line in first.output.splitlines()
              if line.startswith("  spendlake --config ")]
    listed = runner.invoke(cli, ["--config", "spendlake-data/demo/spendlake.yaml", "runs", "--since", "7d"])
    top = json.loads(listed.stdout)["rows"][0]["run"]  # the costliest, first in the demo's top runs
    assert pasted[1:4] == ["runs --since 7d", f"runs --run {top}", "plans"], pasted
    story = runner.invoke(cli, ["--config", "spendlake-data/demo/spendlake.yaml", *pasted[2].split(), "--format",
                                "table"])
    assert story.exit_code == 0 and f"run {top}" in story.stdout and f"jobs of {top}" in story.stdout, story.output
    written = {p.name: p.read_bytes() for p in report.iterdir()}
    lake = tmp_path / "spendlake-data" / "lake"
    # without a config spendlake answers nothing (exit 2 naming where it looked); the demo's config names the lake
    assert runner.invoke(cli, ["status"]).exit_code == 2
    shown = runner.invoke(cli, ["--config", "spendlake-data/demo/spendlake.yaml", "status", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.output)
    assert [(r["source"], r["billing_period"], r["currency"], r["final"]) for r in rows] == [
        ("ml-org", "2026-10", "USD", True), ("ml-org", "2026-11", "USD", False)]
    org = build_organisation(5, date(2026, 10, 30), 3)
    inject_gpu_anomaly(org)  # the demo's bill carries the injected GPU anomaly
    add_slurm_cluster(org)  # and the Slurm cluster
    add_capacity_reservation(org)  # and the capacity reservation
    expected = write_billing(org, tmp_path / "expected")
    assert [(r["rows"], Decimal(r["billed_cost"]), Decimal(r["effective_cost"])) for r in rows] == [
        (p.rows, p.billed_cost, p.effective_cost) for p in expected.periods]

    before = lake_files(lake)
    ledger = (lake / "_ledger" / "deliveries.json").read_bytes()
    # the re-run names the same directory with --dir from elsewhere: were --dir ignored, it
    # would build a new lake under the other working directory and commit again
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    second = runner.invoke(cli, [*ARGS, "--dir", str(tmp_path / "spendlake-data")])
    assert second.exit_code == 0, second.output
    unchanged = [line for line in second.output.splitlines() if line.startswith("ml-org 2026-") and "unchanged" in line]
    assert len(unchanged) == 2 and ": committed" not in second.output, second.output  # no period ingested again
    assert lake_files(lake) == before
    assert {p.name: p.read_bytes() for p in report.iterdir()} == written
    assert (lake / "_ledger" / "deliveries.json").read_bytes() == ledger
    assert list(elsewhere.iterdir()) == []

    # the config it wrote is valid and names the lake
    config = tmp_path / "spendlake-data" / "demo" / "spendlake.yaml"
    checked = runner.invoke(cli, ["--config", str(config), "config", "validate"])
    assert checked.exit_code == 0, checked.output
    assert str(lake) in checked.output


def test_demo_shows_budgets_the_injected_anomaly_and_unallocated_spend(demo_run):
    from service.core.lake import Lake
    from service.findings.store import load_findings

    result = demo_run  # 40 days from 2026-10-20, seed 7
    found = load_findings(Lake(result.config.lake))
    budgets = {(f.evidence["budget"], f.evidence["kind"], f.evidence["line"]) for f in found if f.rule == "budget"}
    assert ("pretrain-monthly", "actual", "1.0") in budgets  # crossed
    assert ("eval-monthly", "forecast", "1.0") in budgets and ("eval-monthly", "actual", "1.0") not in budgets
    (sweep,) = [f for f in found if f.rule == "spend-anomaly" and f.team == "eval" and f.evidence["ongoing"]]
    # the injected nodes run the last three days (a long-context-eval run may start it earlier)
    assert {"2026-11-26", "2026-11-27", "2026-11-28"} <= {d["day"] for d in sweep.evidence["daily"]}
    assert {c["value"] for c in sweep.evidence["root_causes"] if c["dimension"] == "usage_type"} >= {
        "BoxUsage:p4d.24xlarge"}
    unallocated = {f.resource_id: f for f in found if f.rule == "unallocated-spend"}
    # The Slurm cluster's nodes name no team, project or experiment: their jobs take what they
    # held, and the idle rest stays with the nodes' own (missing) team, so those nodes (tagged
    # with the cluster and node only) still lead team's unallocated spend: named as the cluster's
    # idle, GPU hours no job used, not as their node tag no alias reads, which would place nothing.
    assert set(unallocated) == {"unallocated:experiment", "unallocated:project", "unallocated:team"}
    team = unallocated["unallocated:team"].evidence
    cluster = result.generation.organisation.clusters[0]
    assert {r["value"] for r in team["top_resources"]} <= set(cluster.nodes.values())
    assert [c["value"] for c in team["idle_clusters"]] == [cluster.name]
    uncovered = {k["key"] for k in team["uncovered_tag_keys"]}
    assert "user_slurm_node" not in uncovered and "user_cluster" not in uncovered  # the cluster dimension reads it
    for finding in unallocated.values():
        assert finding.evidence["top_services"] and finding.evidence["top_resources"]
        # the demo's attribution reads `owner-team` too, so no owner key is left uncovered
        assert not {"user_owner_team", "user_team"} & {k["key"] for k in finding.evidence["uncovered_tag_keys"]}


def test_demo_attributes_runs_the_rules_and_sets_budgets_that_warn(demo_run):
    from service.findings.budgets import budget_status
    from service.core.lake import Lake

    result = demo_run
    rules = {f.rule for f in result.findings if f.status == "open"}
    assert {"budget", "idle-gpu", "checkpoint-sprawl", "duplicate-datasets", "unbounded-logs"} <= rules
    assert any(f.monthly_waste_usd > 0 for f in result.findings if f.rule == "idle-gpu")
    statuses = {s.budget.name: s.status for s in budget_status(Lake(result.config.lake), result.config, result.as_of)}
    assert statuses == {"pretrain-monthly": "exceeded", "eval-monthly": "forecast to exceed"}
    shown = CliRunner().invoke(cli, ["--config", str(result.config_path), "attribute", "--since", "2026-11-14",
                                     "--until", "2026-11-21", "--format", "json"])
    teams = {row["team"] for row in json.loads(shown.output)["rows"]}
    assert {"pretrain", "posttrain", "eval", "data", "inference"} <= teams  # the inconsistent tag keys map


def test_the_bill_with_its_slurm_cluster_ties_out(demo_run):
    from service.core.lake import Lake

    result = demo_run
    shown = CliRunner().invoke(cli, ["--config", str(result.config_path), "attribute", "--check",
                                     "--format", "json"])  # every whole billing period; a window does not apply
    assert shown.exit_code == 0, shown.output
    checks = json.loads(shown.output)
    assert checks and all(c["ok"] and Decimal(c["difference"]) == 0 for c in checks)
    billed = {c["billing_period"]: Decimal(c["source_total"]) for c in checks if c["cost"] == "billed"}
    assert billed == {p.billing_period: p.billed_cost for p in result.generation.periods}
    # the cluster's nodes are in those totals: every hour of the window, at the p5 list price
    [cluster] = result.generation.organisation.clusters
    with Lake(result.config.lake).query() as con:
        [(hours, cost)] = con.execute(
            "SELECT count(*), sum(BilledCost) FROM costs WHERE ResourceId IN (SELECT unnest($ids)) "
            "AND x_usage_type LIKE '%BoxUsage%'", {"ids": list(cluster.nodes.values())}).fetchall()
    assert hours == len(cluster.nodes) * result.generation.organisation.hours
    assert cost == Decimal("98.32") * hours


def test_the_demos_savings_plan_is_the_platform_teams_in_commitments_and_their_metric_families(demo_run):
    """The demo's Savings Plan carried no team tag: `commitments --by team` and the commitment
    metric families put it on team="unallocated", an owner nobody answers to; the platform team
    buys it (its recurring fee is tagged `team: platform`), so every commitment has its team."""
    shown = CliRunner().invoke(cli, ["--config", str(demo_run.config_path), "commitments", "--since", "30d",
                                     "--by", "team", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert [(row["type"], row["team"]) for row in json.loads(shown.stdout)["rows"]] == [("Savings Plan", "platform")]
    registry = CollectorRegistry()
    registry.register(LakeCollector(demo_run.config))
    owners = {(sample.labels["type"], sample.labels["team"]) for family in registry.collect()
              if family.name == "spendlake_commitment_unused_usd" for sample in family.samples}
    assert ("Savings Plan", "platform") in owners and not any(team == "unallocated" for _, team in owners), owners


def test_the_demo_registers_a_plan_for_its_pretraining_run_that_plans_and_the_report_set_against_its_actual(demo_run):
    """The demo registered no plan (walk46): `spendlake plans` and the report's "Plans vs actual" only said how
    to register one. Its llama-405b run has a plan, as `estimate --register` stores it, from the run's first day."""
    config = str(demo_run.config_path)
    shown = CliRunner().invoke(cli, ["--config", config, "plans", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    [row] = json.loads(shown.stdout)
    assert (row["plan"], row["project"], row["start"]) == ("llama-405b-r1", "llama-405b", "2026-10-20T00:00:00Z")
    planned, actual = Decimal(row["planned_to_date_high"]), Decimal(row["actual_to_date"])
    # 88 GPUs at the p5 price since its start; the run held them but for its restarts
    assert row["status"] == "under plan" and planned * Decimal("0.9") < actual < planned, row
    again = CliRunner().invoke(cli, ["--config", config, "estimate", "--params", "405B", "--tokens", "100B", "--gpu",
                                     "H100", "--gpus", "88", "--mfu", "0.35-0.45", "--failure-overhead", "0.1",
                                     "--format", "json"])
    # the plan is what that estimate prices, to the cent (its compute and storage were each stored in cents: a cent off)
    assert json.loads(again.stdout)["high"]["total_cost"] == row["planned_total_high"]
    # registered on the run's experiment: its actual is the run's cost (the project's held its debug jobs too)
    run = CliRunner().invoke(cli, ["--config", config, "runs", "--run", "llama-405b-r1", "--format", "json"])
    [story] = json.loads(run.stdout)["rows"]
    assert row["experiment"] == "llama-405b" and Decimal(row["actual_to_date"]) == Decimal(story["cost"]), story
    section = (Path(demo_run.report.location) / "plans.csv").read_text(encoding="utf-8")
    assert "llama-405b-r1,llama-405b" in section and "under plan" in section, section


def test_a_service_started_after_the_demo_does_not_write_its_report_again(demo_run):
    """`spendlake serve` right after the demo logged 'the daily run of <today> has not happened: running it now' and
    rewrote the report the demo had just written (walk46): the demo records its report as the daily run of the day
    after its last, as that run does; the next day's run is still due."""
    tasks = Tasks(ingest=lambda: None, rules=None, daily=lambda day: None)
    scheduler = ServiceScheduler(Lake.of(demo_run.config), JobMetrics(CollectorRegistry(), ()), tasks,
                                 ingest_every=timedelta(hours=1), daily_at=time(6))
    assert demo_run.report.day == date(2026, 11, 28)
    assert not scheduler.daily_due(datetime(2026, 11, 29, 7, tzinfo=timezone.utc))
    assert scheduler.daily_due(datetime(2026, 11, 30, 7, tzinfo=timezone.utc))


def test_the_demos_estimate_prices_a_gpu_hour_as_its_bill_does(demo_run):
    """`spendlake estimate --gpu H100` on the demo's config was exit 2 (no price for H100): a research lead
    following the README had to make up one; the demo's config prices H100 and A100 as its bill does."""
    config = str(demo_run.config_path)
    estimated = CliRunner().invoke(cli, ["--config", config, "estimate", "--params", "7B", "--tokens", "2T", "--gpu",
                                         "H100", "--gpus", "64", "--mfu", "0.4", "--format", "json"])
    assert estimated.exit_code == 0, estimated.output
    assert json.loads(estimated.stdout)["price_per_gpu_hour"] == "12.29"
    listed = CliRunner().invoke(cli, ["--config", config, "runs", "--since", "7d", "--format", "json"])
    top = json.loads(listed.stdout)["rows"][0]
    assert (top["run"], top["cost_per_gpu_hour"]) == ("llama-405b-r1", "12.290000")  # p5.48xlarge: $98.32 / 8 GPUs


def test_the_demos_summary_heads_each_ranking_by_the_rows_it_lists(demo_run):
    """summary.md headed its first 5 runs, experiments and findings "Top 10 ..." (walk46): the page lists 10."""
    folder = Path(demo_run.report.location)
    summary = (folder / "summary.md").read_text(encoding="utf-8")
    page = {t["key"]: t for s in json.loads((folder / "report.json").read_text())["sections"] for t in s["tables"]}
    for key in ("top_runs", "top_experiments", "open_findings"):
        title = page[key]["title"]
        assert title.startswith("Top 10 ") and len(page[key]["rows"]) == 10, title
        listed = summary.split(f"\n*Top 5 {title.removeprefix('Top 10 ')}*", 1)[1].split("\n\n", 1)[0]
        assert listed.count("\n- ") == 5, listed
    assert "Top 10" not in summary


def test_the_api_serves_budgets_and_commitments_as_the_commands_json_shows_them(demo_run):
    """/api/v1/budgets and /api/v1/commitments answered 404 (walk46) while `spendlake budgets` and `commitments`
    show the demo's budgets and its Savings Plan: the API gives their JSON, from the same code."""
    from service.serve.app import Api

    config = str(demo_run.config_path)
    api = Api(demo_run.config, CollectorRegistry())
    budgets = api.handle("/api/v1/budgets", {}, None)
    assert budgets.status == 200, budgets.body
    body = json.loads(budgets.body)
    shown = CliRunner().invoke(cli, ["--config", config, "budgets", "--format", "json"])
    assert body["rows"] == json.loads(shown.stdout) and {r["budget"] for r in body["rows"]} == {
        "pretrain-monthly", "eval-monthly"}
    assert (body["month"], body["as_of"]) == ("2026-11", "2026-11-29T00:00:00Z")
    assert body["notes"] and [f"warning: {note}" for note in body["notes"]] == shown.stderr.splitlines(), shown.stderr
    commitments = api.handle("/api/v1/commitments", {"since": ["30d"], "by": ["team"]}, None)
    assert commitments.status == 200, commitments.body
    shown = CliRunner().invoke(cli, ["--config", config, "commitments", "--since", "30d", "--by", "team", "--format",
                                     "json"])
    assert json.loads(commitments.body) == json.loads(shown.stdout) and json.loads(commitments.body)["rows"]
    assert json.loads(api.handle("/api/v1/commitments", {}, None).body)["since"] == "2026-10-30T00:00:00Z"  # 30d
    bad = api.handle("/api/v1/commitments", {"by": ["tema"]}, None)
    assert bad.status == 400 and json.loads(bad.body)["error"]["where"] == "by", bad.body
    assert api.handle("/api/v1/budgets", {"since": ["7d"]}, None).status == 400  # none to take
