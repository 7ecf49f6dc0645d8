"""The Grafana dashboard: every panel's PromQL, evaluated by a real Prometheus that scraped a
real `spendlake serve`, must run without error and return series carrying the labels the panel
shows; and what spendlake exposes reaches that Prometheus under its own label names."""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal

import pytest
import yaml
from stackkit import DEPLOY, demo_service, prometheus, query, wait_until

DASHBOARD = DEPLOY / "grafana" / "dashboards" / "spendlake.json"
# Anomalies come with issue 5's spend-anomaly rule; until spendlake exports that metric the
# panel returns nothing. Strict: once the metric exists, the mark must go.


def panel_queries() -> list[tuple[str, str]]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(panel["title"], target["expr"]) for panel in panels for target in panel["targets"]]


def panel_labels() -> list[tuple[str, str, set[str]]]:
    """Each panel query with the labels its legend or its table's columns show."""
    found = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        columns = {name for step in panel.get("transformations", []) if step["id"] == "organize"
                   for name in step["options"].get("indexByName", {})} - {"Time", "Value", "value"}
        for target in panel["targets"]:
            found.append((panel["title"], target["expr"],
                          set(re.findall(r"{{\s*(\w+)\s*}}", target.get("legendFormat") or "")) | columns))
    return found


def test_dashboard_and_provisioning_agree():
    dashboard = json.loads(DASHBOARD.read_text())

    datasource = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    uids = {d["uid"] for d in datasource["datasources"]}
    assert {t["datasource"]["uid"] for p in dashboard["panels"] for t in p["targets"]} <= uids
    titles = [p["title"] for p in dashboard["panels"]]
    assert len(titles) == len(set(titles)) and len({p["id"] for p in dashboard["panels"]}) == len(titles)
    provider = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/spendlake.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def panels() -> dict[str, dict]:
    return {panel["title"]: panel for panel in json.loads(DASHBOARD.read_text())["panels"]}


def steps(thresholds: dict) -> list[tuple[str, float | None]]:
    return [(step["color"], step["value"]) for step in thresholds["steps"]]


def test_the_budget_panel_turns_amber_and_red_where_the_budget_alerts_fire():
    """A forecast of 128.5 % showed green: the panel had one step. Amber and red at the ratios the
    shipped budget alerts fire at (read from alerts.yml, not copied)."""
    groups = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())["groups"]
    exprs = {rule["alert"]: rule["expr"] for group in groups for rule in group["rules"]}
    [warning] = re.findall(r"spendlake_budget_used_ratio\[1h\]\) >= ([0-9.]+)", exprs["SpendlakeBudgetWarning"])
    [exceeded] = re.findall(r">= ([0-9.]+)", exprs["SpendlakeBudgetExceeded"])
    [panel] = [p for title, p in panels().items() if title.startswith("Budgets: used")]
    assert steps(panel["fieldConfig"]["defaults"]["thresholds"]) == [
        ("green", None), ("orange", float(warning)), ("red", float(exceeded))]


def colour(thresholds: dict, value: float) -> str:
    """The colour Grafana gives `value`: its highest step whose value is at most it (the first
    step, value null, below them all)."""
    found = [color for color, at in steps(thresholds) if at is None or value >= at]
    return found[-1]


def test_the_commitment_panel_colours_follow_the_rule():
    """The demo's Savings Plan, 95.0 % used and a critical commitment-unused finding, showed an
    orange bar (green began at 95 %, orange at 80 %), then green: Grafana colours a value by the
    highest step it reaches, and the rule flags a commitment with at least min_unused_pct unused,
    so green from exactly 95 % showed the demo's flagged 95.0 % green. Read at the edges: red
    where the rule flags, the unused dollars orange from its min_monthly_usd, red from its
    critical_monthly_usd (a critical finding)."""
    from rules.commitment_unused import CommitmentUnusedConfig

    rule = CommitmentUnusedConfig()
    [panel] = [p for title, p in panels().items() if title.startswith("Commitments:")]
    edge = 1 - float(rule.min_unused_pct) / 100
    for utilization in (0.0, 0.5, math.nextafter(edge, 0), edge, math.nextafter(edge, 1), 0.951, 1.0):
        # the ratio the float stands for (spendlake writes float(Decimal)), as the rule's Decimal sums
        flagged = (1 - Decimal(repr(utilization))) * 100 >= rule.min_unused_pct
        assert colour(panel["fieldConfig"]["defaults"]["thresholds"], utilization) == \
            ("red" if flagged else "green"), utilization
    [unused] = [prop["value"] for override in panel["fieldConfig"]["overrides"] for prop in override["properties"]
                if prop["id"] == "thresholds"]
    for monthly in ("0", "9.99", rule.min_monthly_usd, "999.99", rule.critical_monthly_usd, "25000"):
        expected = ("red" if Decimal(monthly) >= rule.critical_monthly_usd
                    else "orange" if Decimal(monthly) >= rule.min_monthly_usd else "green")
        assert colour(unused, float(monthly)) == expected, monthly


def test_the_health_row_shows_bills_held_by_two_sources():
    """spendlake_lake_bill_overlaps (lake49: one bill configured as two sources, summed twice in
    every total) had no panel: a stat in the health row beside data freshness, red from one."""
    [row] = {p["gridPos"]["y"] for title, p in panels().items() if title.startswith("Data freshness")}
    [panel] = [p for p in panels().values() if [t["expr"] for t in p["targets"]] == ["spendlake_lake_bill_overlaps"]]
    assert panel["gridPos"]["y"] == row and "spendlake status" in panel["description"]
    thresholds = panel["fieldConfig"]["defaults"]["thresholds"]
    assert (colour(thresholds, 0), colour(thresholds, 1), colour(thresholds, 3)) == ("green", "red", "red")


def test_the_health_row_shows_the_lakes_damage_orphans_and_readability():
    """small50: spendlake_lake_partitions_damaged, spendlake_lake_snapshots_damaged (snapshots and derived
    files), spendlake_lake_orphaned_sources and spendlake_lake_readable had alerts (but the orphans, until
    ops51) and no panel: stats in the health row beside the bills held by two sources, coloured where the
    alerts fire (a damaged snapshot red, a derived file orange: critical and warning), each naming its alert."""
    [row] = {p["gridPos"]["y"] for title, p in panels().items() if title.startswith("Data freshness")}
    shown = {t["expr"]: (p, t.get("legendFormat")) for p in panels().values() for t in p["targets"]}
    groups = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())["groups"]
    exprs = {rule["alert"]: rule["expr"] for group in groups for rule in group["rules"]}
    wanted = {"SpendlakeLakeDamaged": ("sum(spendlake_lake_partitions_damaged)", "red"),
              "SpendlakeSnapshotDamaged": ('sum(spendlake_lake_snapshots_damaged{kind="snapshot"})', "red"),
              "SpendlakeDerivedFileDamaged": ('sum(spendlake_lake_snapshots_damaged{kind!="snapshot"})', "orange"),
              "SpendlakeLakeUnreadable": ("max(spendlake_lake_readable)", None),
              "SpendlakeOrphanedSources": ("spendlake_lake_orphaned_sources", "orange")}
    for alert, (expr, red) in wanted.items():
        assert expr in exprs[alert], alert
        panel, legend = shown[expr]
        assert f"alert {alert}" in panel["description"], panel["title"]
        assert row <= panel["gridPos"]["y"] < row + 8 and panel["type"] == "stat", panel["title"]
        thresholds = next((prop["value"] for override in panel["fieldConfig"]["overrides"]
                           if override["matcher"]["options"] == legend for prop in override["properties"]),
                          panel["fieldConfig"]["defaults"]["thresholds"])
        colours = (colour(thresholds, 0), colour(thresholds, 1), colour(thresholds, 3))
        assert colours == (("red", "green", "green") if red is None else ("green", red, red)), (expr, colours)


def test_no_two_panels_share_a_cell_of_the_grid():
    """Grafana moves a panel placed over another down, out of its row: each keeps its own cells
    (24 columns wide)."""
    taken: dict[tuple[int, int], str] = {}
    for title, panel in panels().items():
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, title
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in taken, f"{title} over {taken[(x, y)]}"
                taken[(x, y)] = title


def test_no_panel_adds_one_off_waste_into_a_month_unsaid():
    """A failed re-run's cost is paid once, not each month: a panel summing the waste family either
    says so in its title (`finished costs once`) or tells failed-reruns apart in its query (a label
    its legend shows: the slow tests check the series carry it)."""
    for title, panel in panels().items():
        exprs = [target for target in panel["targets"] if "spendlake_waste_monthly_usd" in target["expr"]]
        if not exprs or "finished costs once" in title:
            continue
        for target in exprs:
            [apart] = re.findall(r'label_replace\([^()]*\(?[^()]*\)?, "(\w+)", "[^"]*", "rule", "failed-reruns"\)',
                                 target["expr"])
            assert f"{{{{{apart}}}}}" in target["legendFormat"], title


def test_a_time_series_of_a_windowed_family_says_where_its_window_ends():
    """Each point of spendlake_spend_usd{window="24h"} is the 24 h before the data's end as that
    scrape saw it, not the 24 h before the point: the description must say so."""
    for title, panel in panels().items():
        if panel["type"] == "timeseries" and any("window=" in target["expr"] for target in panel["targets"]):
            assert "data's end" in panel["description"] and "data's end" in title, title


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("grafana")
    with demo_service(tmp_path) as spendlake, prometheus(tmp_path, spendlake) as prom:
        # rate()/increase() panels need two samples of everything.
        wait_until(lambda: query(prom, "count_over_time(spendlake_lake_readable[1m]) >= 3")["result"], 30,
                   "three scrapes of spendlake")
        yield prom


@pytest.mark.slow  # spendlake serve and Prometheus for real, three scrapes
@pytest.mark.parametrize("title, expr", [pytest.param(title, expr, id=title) for title, expr in panel_queries()])
def test_panel_query_returns_series(scraped, title, expr):
    result = query(scraped, expr)["result"]
    assert result, f"panel {title!r}: {expr} returned no series"


@pytest.mark.slow  # spendlake serve and Prometheus for real, three scrapes
@pytest.mark.parametrize("title, expr, labels", [pytest.param(*each, id=each[0]) for each in panel_labels()])
def test_every_label_a_panel_shows_is_on_its_series(scraped, title, expr, labels):
    """A legend's `{{team}}` or a table column naming a label the series lack shows blank: the
    series returned above do not tell."""
    for series in query(scraped, expr)["result"]:
        assert labels <= set(series["metric"]), f"panel {title!r}: {expr} has no {labels - set(series['metric'])}"


@pytest.mark.slow  # spendlake serve and Prometheus for real
def test_every_label_spendlake_exposes_reaches_prometheus_under_its_own_name_but_job(scraped):
    """Prometheus sets `job` and `instance` on what it scrapes and renames a series' own label of
    that name to `exported_job`: the `spendlake_job_*` series' `job` (issue 6's contract) arrives
    so, and their `task`, the same value, is what the alert rules, the Alertmanager's matchers and
    the dashboard read: under its own name, never the scrape job's."""
    series = query(scraped, '{__name__=~"spendlake_.+"}')["result"]
    assert series
    renamed = sorted({(s["metric"]["__name__"], label) for s in series for label in s["metric"]
                      if label.startswith("exported_") and label != "exported_job"})
    assert renamed == []
    jobs = [s["metric"] for s in series if s["metric"]["__name__"].startswith("spendlake_job_")]
    assert {"ingest", "rules", "daily"} <= {labels["task"] for labels in jobs}
    assert all(labels["exported_job"] == labels["task"] for labels in jobs)
    assert {s["metric"]["job"] for s in series} == {"spendlake"}  # the scrape job's, whatever the series


def rule_queries() -> list[tuple[str, str]]:
    groups = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())["groups"]
    return [(rule["alert"], rule["expr"]) for group in groups for rule in group["rules"]]


@pytest.mark.slow  # spendlake serve and Prometheus for real
@pytest.mark.parametrize("alert, expr", [pytest.param(*each, id=each[0]) for each in rule_queries()])
def test_every_metric_and_label_an_alert_rule_names_is_exposed(scraped, alert, expr):
    """promtool's unit tests feed the rules series written by hand: a metric or label name the
    service does not expose passes them and never fires."""
    names = set(re.findall(r"\b(spendlake_[a-z0-9_]+|up)\b(?!\s*\()", expr))
    labels = {name for group in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", expr) for name in re.findall(r"\w+", group)}
    labels |= set(re.findall(r"[{,]\s*(\w+)\s*(?:=~|!~|!=|=)", expr))
    exposed: dict[str, set[str]] = {}
    for name in names:
        for series in query(scraped, f"last_over_time({name}[5m])")["result"]:
            exposed.setdefault(name, set()).update(series["metric"])
    assert names <= set(exposed), f"{alert}: {sorted(names - set(exposed))} not exposed"
    assert labels <= set().union(*exposed.values()), f"{alert}: no metric it reads has {labels - set().union(*exposed.values())}"


@pytest.mark.slow  # spendlake serve and Prometheus for real
def test_the_commitment_alert_fires_as_the_rules_findings_say(scraped):
    """break49b: the demo's Savings Plan, 95.0 % used, had a critical commitment-unused finding and
    the shipped alert, reading a 90 % utilization threshold, stayed quiet. Evaluated by the real
    Prometheus over the real service: one series per team with findings, at their highest
    severity, its value their monthly waste."""
    [expr] = [expr for alert, expr in rule_queries() if alert == "SpendlakeCommitmentUnused"]
    found = query(scraped, 'spendlake_findings{rule="commitment-unused"} > 0')["result"]
    assert found, "the demo has no commitment-unused finding"
    order = ["info", "warning", "critical"]
    expected: dict[tuple[str, str | None], str] = {}
    for series in found:
        key = (series["metric"]["team"], series["metric"].get("folded"))
        expected[key] = max(expected.get(key, "info"), series["metric"]["severity"], key=order.index)
    waste = {(s["metric"]["team"], s["metric"].get("folded")): float(s["value"][1]) for s in query(
        scraped, 'sum by (team, folded) (spendlake_waste_monthly_usd{rule="commitment-unused"})')["result"]}
    fired = {(s["metric"]["team"], s["metric"].get("folded")): (s["metric"]["severity"], float(s["value"][1]))
             for s in query(scraped, expr)["result"]}
    assert fired == {key: (severity, waste[key]) for key, severity in expected.items()}
