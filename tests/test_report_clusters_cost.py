"""The report's Shared GPU clusters section shows billed cost by default, as `spendlake runs`, the
demo's top runs and /metrics do (review50 item 7), and effective (amortized) cost with
`report.clusters_cost: effective`: a run on a Savings Plan node is $0 billed, its instance-hours
billed 0 and the commitment's fee on a line of its own (break50b item 2)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal as D

from service.report.sections.clusters import clusters_section
from tests.attribution_helpers import config, relation
from tests.test_clusters_allocation import gpu_line, job, setup


def section_tables(cfg, lake) -> tuple[dict, str, str]:
    [section] = clusters_section(cfg, lake, date(2026, 11, 2), 10)
    return {t.key: t.rows for t in section.tables}, section.note, section.charts[0].title


def effective(cfg):
    return cfg.model_copy(update={"report": cfg.report.model_copy(update={"clusters_cost": "effective"})})


def test_the_clusters_section_shows_billed_cost_by_default_and_a_savings_plan_nodes_runs_effective_if_asked(tmp_path):
    # i-a on demand ($80 billed and effective); i-b covered by a Savings Plan: billed 0, effective $50.
    # r1 holds i-a's 8 GPUs the whole hour, r2 i-b's for half of it.
    lines = [gpu_line("i-a"), {**gpu_line("i-b", cost="0"), "effective": "50"}]
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1"),
            job("2", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r2",
                state="FAILED")]
    lake, cfg = setup(tmp_path, lines, jobs)
    # billed by default, as `spendlake runs` and /metrics: r2's $0 and i-b's hour nowhere, the note says why
    assert cfg.report.clusters_cost == "billed"
    tables, note, chart = section_tables(cfg, lake)
    assert {r["run"]: r["cost"] for r in tables["top_runs"]} == {"r1": D(80), "r2": D(0)}
    assert [(r["cost"], r["idle"]) for r in tables["cluster_idle"]] == [(D(80), D(0))]
    assert note.startswith("Billed cost of the clusters' instances, as `spendlake runs`") and ", billed" in chart
    assert note.endswith(" The clusters' instances' effective (amortized) cost this month is $130.00 where they are "
                         "billed $80.00 ($50.00 more: a Savings Plan or reservation covers hours billed $0 here); "
                         "`report.clusters_cost: effective` shows each run its share of the commitment."), note
    # effective, as asked: each run its share of the commitment
    tables, note, chart = section_tables(effective(cfg), lake)
    assert {r["run"]: r["cost"] for r in tables["top_runs"]} == {"r1": D(80), "r2": D(25)}
    assert [(r["cost"], r["jobs_cost"], r["idle"]) for r in tables["cluster_idle"]] == [(D(130), D(105), D(25))]
    assert [(r["state"], r["cost"]) for r in tables["unfinished_jobs"]] == [("FAILED", D(25))]
    assert note.startswith("Effective (amortized) cost of the clusters' instances") and ", effective" in chart


def test_billed_on_demand_nodes_say_nothing_of_effective(tmp_path):
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1")]
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], jobs)
    _, note, _ = section_tables(cfg, lake)
    assert "differs" not in note, note


def test_a_bill_whose_other_lines_differ_in_effective_cost_says_nothing_of_the_clusters_effective(tmp_path):
    # session 51: the note compared whole bills' ledger totals ("Bills holding the clusters' instances have an
    # effective (amortized) cost other than their billed (cur 2026-11) ... may cover"): a database on a reservation
    # (billed 0, effective $30) in the bill of the on-demand GPU nodes read as the nodes' commitment
    lines = [gpu_line("i-a"), {**gpu_line("db-1", cost="0", instance_type="db.r6g.large"), "effective": "30"}]
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1")]
    lake, cfg = setup(tmp_path, lines, jobs)
    tables, note, _ = section_tables(cfg, lake)
    assert [(r["cost"], r["idle"]) for r in tables["cluster_idle"]] == [(D(80), D(0))]
    assert "effective (amortized) cost" not in note and "report.clusters_cost" not in note, note


def test_a_month_delivered_without_effective_cost_is_shown_billed_and_said(tmp_path):
    # an Azure actual-cost export has no EffectiveCost: effective would count its instances as 0
    lines = [{**gpu_line("i-a"), "effective": None}]
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1")]
    lake, cfg = setup(tmp_path, lines, jobs)
    tables, note, chart = section_tables(effective(cfg), lake)
    assert {r["run"]: r["cost"] for r in tables["top_runs"]} == {"r1": D(40)}
    assert note.startswith("Billed cost of the clusters' instances: cur 2026-11, holding them, delivered no effective "
                           "(amortized) cost, which would count as 0, so billed is shown for all"), note
    assert ", billed" in chart


def add_source(lake, name: str, lines: list[dict]) -> None:
    con = lake.connect()
    lake.commit_costs(con, relation(con, lines), source=name, delivery_id="d1", periods=None)
    con.close()


def test_a_delivery_without_effective_cost_of_other_lines_leaves_the_section_effective(tmp_path):
    # the GPU nodes on a Savings Plan (cur); an Azure actual-cost export of storage alone: the section
    # switched to billed for it and r2 read $0 again
    lines = [gpu_line("i-a"), {**gpu_line("i-b", cost="0"), "effective": "50"}]
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1"),
            job("2", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r2")]
    lake, _ = setup(tmp_path, lines, jobs)
    add_source(lake, "azure", [{**gpu_line("disk-1", cost="12", instance_type=None), "effective": None}])
    cfg = effective(config({"clusters": {}}, lake))
    tables, note, chart = section_tables(cfg, lake)
    assert {r["run"]: r["cost"] for r in tables["top_runs"]} == {"r1": D(80), "r2": D(25)}
    assert note.startswith("Effective (amortized) cost") and ", effective" in chart, note


def test_a_delivery_without_effective_cost_in_the_charts_days_before_the_month_is_shown_billed(tmp_path):
    # the chart reads the last 30 days: October's delivery of the cluster's instances has no effective cost
    # (counted 0: its days drawn as $0 and not a word), November's has
    lines = [{**gpu_line("i-a", start="2026-10-20T10:00:00"), "effective": None}]
    jobs = [job("0", 8, "2026-10-20T10:00:00", "2026-10-20T11:00:00", instance_ids=["i-a"], run_id="r0"),
            job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1")]
    lake, _ = setup(tmp_path, lines, jobs)
    add_source(lake, "cur-nov", [gpu_line("i-a")])
    cfg = effective(config({"clusters": {}}, lake))
    tables, note, chart = section_tables(cfg, lake)
    assert note.startswith("Billed cost of the clusters' instances: cur 2026-10, holding them, delivered no "
                           "effective") and ", billed" in chart, note
    assert sum(r["cost"] for r in tables["cluster_cost_by_job_type"]) == D(160)


def test_a_bill_holding_the_clusters_without_effective_cost_is_named_and_left_out_of_the_billed_sections_figures(
        tmp_path):
    # review51 item 2: billed by default, the note's effective figures counted an Azure actual-cost export's
    # instance (no effective cost) as $0 effective: "effective is $130.00 where billed $160.00 ($30.00 less: ...
    # an upfront fee, a discount)". The AWS bill's lines alone are $50 more effective; Azure's is not known.
    lines = [gpu_line("i-a"), {**gpu_line("i-b", cost="0"), "effective": "50"}]
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1"),
            job("2", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-b"], run_id="r2"),
            job("3", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-c"], run_id="r3")]
    lake, _ = setup(tmp_path, lines, jobs)
    add_source(lake, "azure", [{**gpu_line("i-c"), "effective": None}])
    tables, note, chart = section_tables(config({"clusters": {}}, lake), lake)
    assert [(r["cost"], r["idle"]) for r in tables["cluster_idle"]] == [(D(160), D(0))] and ", billed" in chart
    assert note.endswith(" The clusters' instances' effective (amortized) cost this month, in the bills holding them "
                         "that have it, is $130.00 where they are billed $80.00 ($50.00 more: a Savings Plan or "
                         "reservation covers hours billed $0 here); azure 2026-11, holding them too, delivered no "
                         "effective cost (not in these figures), so `report.clusters_cost: effective` would show "
                         "billed."), note
