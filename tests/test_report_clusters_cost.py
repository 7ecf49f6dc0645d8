"""The report's Shared GPU clusters section shows effective (amortized) cost by default
(`report.clusters_cost`): a run on a Savings Plan node was $0 there, its instance-hours billed
0 and the commitment's fee on a line of its own (break50b item 2)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal as D

from service.report.sections.clusters import clusters_section
from tests.test_clusters_allocation import gpu_line, job, setup


def section_tables(cfg, lake) -> tuple[dict, str, str]:
    [section] = clusters_section(cfg, lake, date(2026, 11, 2), 10)
    return {t.key: t.rows for t in section.tables}, section.note, section.charts[0].title


def test_the_clusters_section_shows_a_savings_plan_nodes_runs_at_their_effective_cost(tmp_path):
    # i-a on demand ($80 billed and effective); i-b covered by a Savings Plan: billed 0, effective $50.
    # r1 holds i-a's 8 GPUs the whole hour, r2 i-b's for half of it.
    lines = [gpu_line("i-a"), {**gpu_line("i-b", cost="0"), "effective": "50"}]
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1"),
            job("2", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r2",
                state="FAILED")]
    lake, cfg = setup(tmp_path, lines, jobs)
    assert cfg.report.clusters_cost == "effective"
    tables, note, chart = section_tables(cfg, lake)
    assert {r["run"]: r["cost"] for r in tables["top_runs"]} == {"r1": D(80), "r2": D(25)}
    assert [(r["cost"], r["jobs_cost"], r["idle"]) for r in tables["cluster_idle"]] == [(D(130), D(105), D(25))]
    assert [(r["state"], r["cost"]) for r in tables["unfinished_jobs"]] == [("FAILED", D(25))]
    assert note.startswith("Effective (amortized) cost of the clusters' instances") and ", effective" in chart
    # billed, as asked: the invoice's figures, r2's $0 and i-b's hour nowhere
    billed = cfg.model_copy(update={"report": cfg.report.model_copy(update={"clusters_cost": "billed"})})
    tables, note, chart = section_tables(billed, lake)
    assert {r["run"]: r["cost"] for r in tables["top_runs"]} == {"r1": D(80), "r2": D(0)}
    assert [(r["cost"], r["idle"]) for r in tables["cluster_idle"]] == [(D(80), D(0))]
    assert note.startswith("Billed cost of the clusters' instances") and ", billed" in chart


def test_a_month_delivered_without_effective_cost_is_shown_billed_and_said(tmp_path):
    # an Azure actual-cost export has no EffectiveCost: effective would count its instances as 0
    lines = [{**gpu_line("i-a"), "effective": None}]
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1")]
    lake, cfg = setup(tmp_path, lines, jobs)
    tables, note, chart = section_tables(cfg, lake)
    assert {r["run"]: r["cost"] for r in tables["top_runs"]} == {"r1": D(40)}
    assert note.startswith("Billed cost of the clusters' instances: cur 2026-11 delivered no effective (amortized) "
                           "cost, which would count as 0, so billed is shown for all") and ", billed" in chart, note
