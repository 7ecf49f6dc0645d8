"""Findings say what kind of money they are (issue 15, item 3): each rule declares a category,
`monthly_waste_usd` is for waste only, every finding has a documented `impact_usd`, and the
store, the CLI, the API, the report and the metrics keep the categories apart."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import get_args
from urllib.parse import parse_qs

import pyarrow as pa
import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from servicekit import make_config

from rules.base import CATEGORIES, Category, Finding, registered
from service.cli.main import cli
from service.core.lake import Lake
from service.findings.store import PARTITION, load_findings, store_findings
from service.serve.app import Api
from service.serve.metrics import LakeCollector

SEEN = datetime(2026, 11, 28, tzinfo=timezone.utc)
EXPECTED_CATEGORIES = {
    "idle-gpu": "waste", "checkpoint-sprawl": "waste", "duplicate-datasets": "waste", "unbounded-logs": "waste",
    "commitment-unused": "waste", "capacity-unused": "waste", "failed-reruns": "waste",
    "spend-anomaly": "overspend", "budget": "overspend", "unallocated-spend": "ownership",
}


def finding(id, rule, category, impact, *, team="nlp", status="open", **extra) -> Finding:
    return Finding(id=id, rule=rule, category=category, severity="warning", resource_id=f"r-{id}", team=team,
                   impact_usd=Decimal(impact), monthly_waste_usd=Decimal(impact) if category == "waste" else None,
                   summary=f"{rule} {id}", first_seen=SEEN, last_seen=SEEN, status=status, **extra)


MIXED = [
    finding("w1", "idle-gpu", "waste", "900"),
    finding("w2", "checkpoint-sprawl", "waste", "40.50", team="vision"),
    finding("b1", "budget", "overspend", "1579850.12"),
    finding("a1", "spend-anomaly", "overspend", "28027.49", team="pretrain"),
    finding("u1", "unallocated-spend", "ownership", "279796.00", team="unallocated"),
    finding("gone", "idle-gpu", "waste", "5000", status="resolved"),
]


def test_each_built_in_rule_declares_its_category_and_documents_its_impact():
    assert CATEGORIES == get_args(Category) == ("waste", "overspend", "ownership")
    rules = registered()
    assert {name: rules[name].category for name in EXPECTED_CATEGORIES} == EXPECTED_CATEGORIES
    for name in EXPECTED_CATEGORIES:
        doc = __import__(rules[name].__module__, fromlist=["_"]).__doc__
        assert f"Category `{rules[name].category}`" in doc and "`impact_usd`" in doc, name
        assert "`monthly_waste_usd`" in doc, name  # waste says what it is, the others why there is none


def test_monthly_waste_is_for_waste_findings_only():
    with pytest.raises(ValueError, match="monthly_waste_usd is for waste findings only"):
        Finding(id="x", rule="budget", category="overspend", severity="info", resource_id="b", summary="s",
                impact_usd=Decimal(1), monthly_waste_usd=Decimal(1))
    with pytest.raises(ValueError, match="every waste finding has one"):
        Finding(id="x", rule="idle-gpu", category="waste", severity="info", resource_id="i", summary="s",
                impact_usd=Decimal(1))
    with pytest.raises(ValueError, match="category 'savings' is not one of waste, overspend, ownership"):
        Finding(id="x", rule="idle-gpu", category="savings", severity="info", resource_id="i", summary="s",
                impact_usd=Decimal(1))


def test_the_store_keeps_categories_and_lists_waste_before_overspend_and_ownership(tmp_path):
    lake = Lake(tmp_path / "lake")
    store_findings(lake, MIXED)
    found = load_findings(lake, status="open")
    assert [(f.id, f.category) for f in found] == [
        ("w1", "waste"), ("w2", "waste"), ("b1", "overspend"), ("a1", "overspend"), ("u1", "ownership")]
    assert [f.monthly_waste_usd for f in found] == [Decimal("900.00"), Decimal("40.50"), None, None, None]
    assert [f.id for f in load_findings(lake, category="overspend")] == ["b1", "a1"]


def test_findings_stored_before_categories_still_load(tmp_path):
    """A findings table of the old schema: no category, no impact_usd, every finding with a
    monthly_waste_usd (unallocated-spend's a monthly projection of its window's spend)."""
    lake = Lake(tmp_path / "lake")
    rows = {
        "id": ["old-idle", "old-budget", "old-unalloc"], "rule": ["idle-gpu", "budget", "unallocated-spend"],
        "severity": ["critical", "warning", "critical"], "resource_id": ["i-1", "budget:b", "unallocated:team"],
        "team": ["nlp", "pretrain", "unallocated"], "project": ["p", "p", "p"], "experiment": ["e", "e", "e"],
        "monthly_waste_usd": [Decimal("1708.90"), Decimal("1579850.12"), Decimal("304.17")],
        "summary": ["idle", "over budget", "no team"],
        "evidence": ["{}", '{"kind": "forecast"}', '{"unallocated_usd": "70.00"}'],
        "first_seen": [SEEN.replace(tzinfo=None)] * 3, "last_seen": [SEEN.replace(tzinfo=None)] * 3,
        "status": ["open"] * 3, "acknowledged_at": [None] * 3, "ack_reason": [None] * 3,
    }
    old = pa.table(rows, schema=pa.schema([
        (name, pa.decimal128(38, 12) if name == "monthly_waste_usd" else pa.timestamp("us")
         if name in ("first_seen", "last_seen", "acknowledged_at") else pa.string()) for name in rows]))
    con = lake.connect()
    lake.commit_snapshot(con, con.from_arrow(old), **PARTITION)
    found = {f.id: f for f in load_findings(lake)}
    assert (found["old-idle"].category, found["old-idle"].impact_usd, found["old-idle"].monthly_waste_usd) == (
        "waste", Decimal("1708.90"), Decimal("1708.90"))
    assert (found["old-budget"].category, found["old-budget"].impact_usd, found["old-budget"].monthly_waste_usd) == (
        "overspend", Decimal("1579850.12"), None)
    assert (found["old-unalloc"].category, found["old-unalloc"].impact_usd,
            found["old-unalloc"].monthly_waste_usd) == ("ownership", Decimal("70.00"), None)
    store_findings(lake, list(found.values()))  # the next run writes the new schema
    assert {f.id: f.category for f in load_findings(lake)} == {
        "old-idle": "waste", "old-budget": "overspend", "old-unalloc": "ownership"}


def test_cli_json_csv_and_table_keep_the_categories_apart(tmp_path):
    config = make_config(tmp_path)
    store_findings(Lake(config.lake), MIXED)
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(json.dumps({"lake": str(config.lake)}))

    def findings(*args):
        result = CliRunner(env={"COLUMNS": "300"}).invoke(cli, ["--config", str(config_file), "findings", *args])
        assert result.exit_code == 0, result.output
        return result.output

    rows = json.loads(findings("--format", "json"))
    assert [(r["rule"], r["category"], r["impact_usd"], r["monthly_waste_usd"]) for r in rows] == [
        ("idle-gpu", "waste", "900.00", "900.00"), ("checkpoint-sprawl", "waste", "40.50", "40.50"),
        ("budget", "overspend", "1579850.12", None), ("spend-anomaly", "overspend", "28027.49", None),
        ("unallocated-spend", "ownership", "279796.00", None)]
    assert [r["id"] for r in json.loads(findings("--category", "ownership", "--format", "json"))] == ["u1"]
    header, *lines = findings("--format", "csv").splitlines()
    assert header.startswith("id,rule,category,severity") and "impact_usd,monthly_waste_usd" in header
    assert lines[2].startswith("b1,budget,overspend,") and lines[2].count(",,") >= 1  # no monthly waste

    table = findings("--format", "table")
    waste, rest = table.split("overspend: spend above a budget", 1)
    overspend, ownership = rest.split("ownership: spend nobody owns", 1)
    assert "monthly_waste_usd" in waste and "900.00" in waste and "40.50" in waste
    assert "1,579,850.12" not in waste and "279,796.00" not in waste  # never in a waste column
    # money with separators, as every other table shows it
    assert "impact_usd" in overspend and "1,579,850.12" in overspend and "28,027.49" in overspend
    assert "279,796.00" in ownership and "1,579,850.12" not in ownership


def test_the_api_lists_categories_and_filters_by_one(tmp_path):
    config = make_config(tmp_path)
    store_findings(Lake(config.lake), MIXED)
    api = Api(config, CollectorRegistry())
    response = api.handle("/api/v1/findings", parse_qs("category=waste"), None)
    rows = json.loads(response.body)
    assert response.status == 200 and [(r["id"], r["category"]) for r in rows] == [("w1", "waste"), ("w2", "waste")]
    every = json.loads(api.handle("/api/v1/findings", {}, None).body)
    assert {r["id"]: r["monthly_waste_usd"] for r in every if r["category"] != "waste"} == {
        "b1": None, "a1": None, "u1": None}
    bad = api.handle("/api/v1/findings", parse_qs("category=savings"), None)
    assert bad.status == 400 and json.loads(bad.body)["error"]["where"] == "category"


def test_the_findings_url_the_readme_shows_with_empty_values_filters_nothing(tmp_path):
    """README lists `/api/v1/findings?team=&rule=&status=&category=`; the server keeps blank
    values, and an empty category answered 400 where the empty team, rule and status filter nothing."""
    config = make_config(tmp_path)
    store_findings(Lake(config.lake), MIXED)
    api = Api(config, CollectorRegistry())
    blank = parse_qs("team=&rule=&status=&category=", keep_blank_values=True)
    response = api.handle("/api/v1/findings", blank, None)
    assert response.status == 200
    assert json.loads(response.body) == json.loads(api.handle("/api/v1/findings", {}, None).body)


def test_waste_metric_is_waste_only_and_impact_keeps_the_categories(tmp_path):
    config = make_config(tmp_path)
    store_findings(Lake(config.lake), MIXED)
    registry = CollectorRegistry()
    registry.register(LakeCollector(config))
    waste = {(s.labels["rule"], s.labels["team"]): s.value for m in registry.collect()
             if m.name == "spendlake_waste_monthly_usd" for s in m.samples}
    assert waste == {("idle-gpu", "nlp"): 900.0, ("checkpoint-sprawl", "vision"): 40.5}
    impact = {(s.labels["rule"], s.labels["category"], s.labels["team"]): s.value for m in registry.collect()
              if m.name == "spendlake_finding_impact_usd" for s in m.samples}
    assert impact == {("idle-gpu", "waste", "nlp"): 900.0, ("checkpoint-sprawl", "waste", "vision"): 40.5,
                      ("budget", "overspend", "nlp"): 1579850.12, ("spend-anomaly", "overspend", "pretrain"): 28027.49,
                      ("unallocated-spend", "ownership", "unallocated"): 279796.0}


@pytest.mark.slow
def test_demo_waste_metric_equals_the_reports_waste_total_and_the_demo_prints_waste_apart(demo_run, capsys):
    from service.cli.demo import _print_spend_and_findings

    registry = CollectorRegistry()
    registry.register(LakeCollector(demo_run.config))
    waste_metric = sum(s.value for m in registry.collect() if m.name == "spendlake_waste_monthly_usd"
                       for s in m.samples)
    report = json.loads((Path(demo_run.report.location) / "report.json").read_text())
    (waste_table,) = [t for s in report["sections"] for t in s["tables"] if t["key"] == "waste_by_rule"]
    assert {r["rule"] for r in waste_table["rows"]} <= {n for n, c in EXPECTED_CATEGORIES.items() if c == "waste"}
    assert waste_metric == pytest.approx(float(Decimal(waste_table["total"]["monthly_waste_usd"])), abs=0.005)
    assert waste_metric > 0

    _print_spend_and_findings(demo_run)
    out = capsys.readouterr().out
    waste, others = out.split("top waste", 1)[1].split("top overspend and ownership", 1)
    assert "/month" in waste and "/month" not in others and "impact" in others
    # the demo's failed re-runs and Capacity Block are what they cost, once: never "a month"
    assert re.search(r"^│ failed-reruns .* once │", waste, re.MULTILINE)
    assert not re.search(r"^│ failed-reruns .*/month", waste, re.MULTILINE)
    for rule in ("budget", "spend-anom", "unallocat"):  # in the rule column; rich may cut a long name short
        assert not re.search(rf"^│ {rule}", waste, re.MULTILINE), rule
        assert re.search(rf"^│ {rule}", others, re.MULTILINE), rule
    assert re.search(r"^│ idle-gpu", waste, re.MULTILINE)


FINISHED = [  # two finished costs beside two that go on (a reservation held empty, idle GPUs)
    finding("g1", "idle-gpu", "waste", "900"),
    finding("f1", "failed-reruns", "waste", "500", evidence={"run": "llama"}),
    finding("c1", "capacity-unused", "waste", "300", evidence={"projected_to_month": False}),
    finding("c2", "capacity-unused", "waste", "200", evidence={"projected_to_month": True}),
]


def test_finished_costs_are_said_once_not_a_month_in_the_findings_table_and_the_report(tmp_path):
    """failed-reruns' attempts and a Capacity Block's unused value are finished costs, but the findings
    table said `USD a month` over them and the report put them under "monthly waste" and "monthly $";
    they now say `once, finished` beside the amount (the JSON and the metric keep monthly_waste_usd)."""
    from service.report.model import Report
    from service.report.render import render_html, render_markdown
    from service.report.sections.findings import waste_section

    config = make_config(tmp_path)
    lake = Lake(config.lake)
    store_findings(lake, FINISHED)
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(json.dumps({"lake": str(config.lake)}))
    table = CliRunner(env={"COLUMNS": "300"}).invoke(
        cli, ["--config", str(config_file), "findings", "--format", "table"]).output
    header = next(line for line in table.splitlines() if line.startswith("┃"))
    at = [cell.strip() for cell in header.split("┃")].index("per")
    per = {line.split("│")[1].strip(): line.split("│")[at].strip() for line in table.splitlines()
           if re.match(r"^│ [gfc]\d ", line)}
    assert per == {"g1": "a month", "f1": "once", "c1": "once", "c2": "a month"}

    section = waste_section(lake, SEEN.date(), top=10)
    by_rule, top = section.tables
    assert {r["rule"]: (r["month_usd"], r["once_usd"], r["monthly_waste_usd"]) for r in by_rule.rows} == {
        "idle-gpu": (900, 0, 900), "capacity-unused": (200, 300, 500), "failed-reruns": (0, 500, 500)}
    assert (by_rule.total["month_usd"], by_rule.total["once_usd"], by_rule.total["monthly_waste_usd"]) == (
        1100, 800, 1900)  # the last: spendlake_waste_monthly_usd's sum, in JSON and CSV
    assert [c.label for c in by_rule.columns if c.in_html][-2:] == ["a month, while it goes on", "finished, once"]
    assert [(r["id"], r["per"]) for r in top.rows] == [("g1", "a month"), ("f1", "once"),
                                                      ("c1", "once"), ("c2", "a month")]
    report = Report(day=SEEN.date(), month_start=SEEN.date().replace(day=1), headlines=[], sections=[section])
    html, summary = render_html(report), render_markdown(report)
    assert "monthly" not in html.lower() and "monthly" not in summary.lower()
    assert "- failed-reruns / r-f1 / nlp / once: $500.00" in summary
    assert "- idle-gpu / r-g1 / nlp / a month: $900.00" in summary


def test_an_80_column_findings_table_keeps_what_its_money_is_per(tmp_path):
    """At 80 or 120 columns the table left `per` out first among the narrow ones, so a failed
    attempt's finished cost read as waste a month (the title says to look at `per`)."""
    config = make_config(tmp_path)
    store_findings(Lake(config.lake), FINISHED)
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(json.dumps({"lake": str(config.lake)}))
    shown = CliRunner(env={"COLUMNS": "80"}).invoke(cli, ["--config", str(config_file), "findings", "--format", "table"])
    assert shown.exit_code == 0, shown.output
    header = next(line for line in shown.stdout.splitlines() if line.startswith("┃"))
    cells = [cell.strip() for cell in header.split("┃")]
    at = cells.index("per")  # the summary (wrapped) may follow it
    assert cells[at - 1] == "monthly_waste_usd"
    per = {line.split("│")[1].strip(): line.split("│")[at].strip() for line in shown.stdout.splitlines()
           if re.match(r"^│ [gfc]\d ", line)}
    assert per == {"g1": "a month", "f1": "once", "c1": "once", "c2": "a month"}
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80


def test_the_findings_table_wraps_each_findings_summary_rather_than_leaving_it_out(tmp_path):
    """SpendlakeSpendAnomaly's alert sends the reader to `spendlake findings --rule spend-anomaly
    --team T`, whose table at 160 columns (and 120) left each finding's summary out ('not shown at
    160 columns: summary'), its sentence too long for any terminal: what the finding says (the
    spend against the expected, over how many days) was nowhere on screen. The summary wraps in its column; the resource id and status give way first."""
    config = make_config(tmp_path)
    sentence = ("team pretrain on Amazon Elastic Compute Cloud spent above its expected band on 2026-11-29: "
                "$87,578.08 on 2026-11-29 against $68,105.13 expected, $19,472.95 over in 1 day(s).")
    anomaly = replace(finding("a1", "spend-anomaly", "overspend", "19472.95", team="pretrain"), summary=sentence)
    store_findings(Lake(config.lake), [anomaly])
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(json.dumps({"lake": str(config.lake)}))
    for width in ("160", "120"):
        result = CliRunner(env={"COLUMNS": width}).invoke(cli, ["--config", str(config_file), "findings",
                                                                 "--format", "table"])
        assert result.exit_code == 0, result.output
        header = next(line for line in result.stdout.splitlines() if line.startswith("┃"))
        at = [cell.strip() for cell in header.split("┃")].index("summary")
        shown = " ".join(line.split("│")[at].strip() for line in result.stdout.splitlines() if line.startswith("│"))
        assert "$68,105.13 expected, $19,472.95 over in 1 day(s)." in " ".join(shown.split()), result.output
        assert "summary" not in result.stderr


def test_a_120_column_findings_table_shows_each_findings_summary_with_the_demos_ids_and_names(tmp_path):
    """walk46: on the demo at 120 columns `spendlake findings` left every summary out ('not shown at
    120 columns: summary, resource_id, status'): its ids are 16 hex digits and its rules and teams
    long (`unallocated-spend`, `unallocated`), so the severity and project, which gave way only after
    the summary, left no room for its 40 characters. They give way before it now; the id (for
    `findings ack`), the rule, the money and its `per` stay."""
    config = make_config(tmp_path)
    ownership = replace(finding("e7553e25802b6f4a", "unallocated-spend", "ownership", "147821.57", team="unallocated"),
                        project="unallocated", severity="critical",
                        summary="19.7% of spend ($147,821.57 of $750,717.14) has no experiment.")
    waste = replace(finding("51c65e76a0d4c90f", "duplicate-datasets", "waste", "106253.63", team="unallocated"),
                    project="unallocated", severity="critical",
                    summary="3 copies of s3://ml-data/tokenized/ hold the same 1.2 TB.")
    store_findings(Lake(config.lake), [ownership, waste])
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(json.dumps({"lake": str(config.lake)}))
    result = CliRunner(env={"COLUMNS": "120"}).invoke(cli, ["--config", str(config_file), "findings",
                                                             "--format", "table"])
    assert result.exit_code == 0, result.output
    headers = [[cell.strip() for cell in line.split("┃")[1:-1]]
               for line in result.stdout.splitlines() if line.startswith("┃")]
    assert [h[:2] for h in headers] == [["id", "rule"], ["id", "rule"]]
    assert all("summary" in h for h in headers), result.output
    assert "per" in headers[0] and "monthly_waste_usd" in headers[0] and "impact_usd" in headers[1]
    text = " ".join(" ".join(result.stdout.split("│")).split())
    assert "has no experiment." in text and "hold the same 1.2 TB." in text
    assert max(len(line) for line in result.stdout.splitlines()) <= 120


def test_an_80_column_rules_list_says_what_each_rule_flags(tmp_path):
    """walk46: `spendlake rules list`, README's "every rule, its category, whether it is enabled,
    what it flags", showed at 80 columns the rule, category and enabled only ('not shown at 80
    columns: about'): what a rule flags, its docstring's first line, wraps in its column now."""
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(json.dumps({"lake": str(tmp_path / "lake")}))
    result = CliRunner(env={"COLUMNS": "80"}).invoke(cli, ["--config", str(config_file), "rules", "list",
                                                            "--format", "table"])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if line.startswith("┃"))
    assert [cell.strip() for cell in header.split("┃")[1:-1]] == ["rule", "category", "enabled", "about"]
    assert "not shown" not in result.stderr
    rows = [line.split("│") for line in result.stdout.splitlines() if line.startswith("│")]
    about, rule = {}, None
    for row in rows:
        rule = row[1].strip() or rule
        about[rule] = f"{about.get(rule, '')} {row[4].strip()}".strip()
    for name, rule in registered().items():
        doc = rule.__doc__ or __import__(rule.__module__, fromlist=["_"]).__doc__
        assert about[name] == " ".join(doc.strip().splitlines()[0].split()), name
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
