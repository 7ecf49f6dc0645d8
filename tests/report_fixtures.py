"""Shared by the report tests: a report whose labels try to inject markup, formulas and links."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

from service.report.model import Chart, Column, Headline, Report, Section, Table, unavailable

INJECTIONS = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')
FORMULAS = ("=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)")


def sample_report() -> Report:
    day = date(2026, 11, 29)
    teams = ["pretrain", *INJECTIONS, "eval", "other"]
    days = [(day - timedelta(days=29 - i)).isoformat() for i in range(30)]
    series = {team: [Decimal(100 + 10 * t + (i % 7) * 5) for i in range(30)] for t, team in enumerate(teams)}
    spend = Table("spend_by_team", "Spend by team", [
        Column("team", "team"), Column("currency", "currency"), Column("day_cost", "day", "money"),
        Column("day_change_pct", "vs day before", "change"), Column("mtd_cost", "month to date", "money"),
    ], rows=[{"team": team, "currency": "USD", "day_cost": Decimal("1234.565"), "day_change_pct": Decimal("12.5"),
              "mtd_cost": Decimal("-20.10")} for team in teams])
    formulas = Table("top_experiments", "Top experiments", [Column("experiment", "experiment"),
                                                            Column("currency", "currency"),
                                                            Column("cost", "cost", "money")],
                     rows=[{"experiment": f, "currency": "EUR", "cost": Decimal("-5")} for f in FORMULAS])
    waste = Table("waste_by_rule", "Waste by rule", [Column("rule", "rule"), Column("findings", "open", "count"),
                                                     Column("monthly_waste_usd", "monthly $", "money")],
                  rows=[{"rule": "idle-gpu", "findings": 3, "monthly_waste_usd": Decimal("4200")}])
    return Report(
        day=day, month_start=day.replace(day=1),
        headlines=[Headline("Yesterday", "USD", Decimal("5000.123"), Decimal("4000"), Decimal("25.0"))],
        sections=[
            Section("spend", "Spend by team and project", tables=[spend]),
            Section("trend", "Spend by team, last 30 days",
                    charts=[Chart("stacked", "Daily spend by team (USD)", days, series, "USD")]),
            Section("experiments", "Top experiments", tables=[formulas]),
            Section("waste", "Waste by rule", tables=[waste],
                    charts=[Chart("bars", "Monthly waste by rule (USD)", ["idle-gpu", INJECTIONS[1]],
                                  {"waste": [Decimal("4200"), Decimal("90")]}, "USD")]),
            unavailable("budgets", "Budgets", "budgets are not part of this build"),
        ])


def write_files(files: dict[str, bytes], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


FOCUS_HEADER = ["BilledCost", "EffectiveCost", "BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd",
                "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ServiceName", "ResourceId",
                "SubAccountId", "ProviderName", "Tags"]


def focus_export(folder: Path, lines: list[tuple[date, str, dict[str, str], str]], currency: str = "USD") -> Path:
    """A FOCUS CSV of daily lines: (day, cost, tags, service)."""
    import csv
    import json

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "focus.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(FOCUS_HEADER)
        for number, (day, cost, tags, service) in enumerate(lines):
            period = day.replace(day=1)
            period_end = (period + timedelta(days=32)).replace(day=1)
            writer.writerow([cost, cost, currency, f"{period}T00:00:00Z", f"{period_end}T00:00:00Z",
                             f"{day}T00:00:00Z", f"{day + timedelta(days=1)}T00:00:00Z", "Usage", service,
                             f"i-{number:06d}", "111122223333", "AWS", json.dumps(tags)])
    return folder


TEAMS = {  # team → (project, experiments, daily cost of the first experiment)
    "pretrain": ("llm-7b", ("7b-base", "7b-long-ctx"), 4200),
    "eval": ("harness", ("mmlu-sweep",), 600),
    "data": ("dedup", ("minhash-v2",), 900),
    "inference": ("serving", ("canary",), 1500),
    INJECTIONS[0]: (INJECTIONS[1], (FORMULAS[0],), 300),
}


def organisation_lines(day: date, days: int = 40) -> list[tuple[date, str, dict[str, str], str]]:
    """Daily FOCUS lines for a small ML organisation ending on `day`: weekly rhythm, a jump on the
    last day for pretrain, untagged spend, and tag values that try to inject markup and formulas."""
    lines = []
    for back in range(days):
        current = day - timedelta(days=back)
        rhythm = Decimal(1) - Decimal("0.15") * (current.weekday() >= 5)
        for team, (project, experiments, base) in TEAMS.items():
            for rank, experiment in enumerate(experiments):
                cost = Decimal(base) * rhythm / (rank + 1) * (Decimal("1.4") if back == 0 and team == "pretrain" else 1)
                tags = {"team": team, "project": project, "experiment": experiment}
                lines.append((current, format(cost.quantize(Decimal("0.01")), "f"), tags, "Amazon EC2"))
        lines.append((current, "250.00", {}, "Amazon S3"))  # untagged
    return lines


def org_config(root: Path, day: date = date(2026, 11, 29)):
    """A lake holding `organisation_lines`, a registered plan for llm-7b and open findings,
    some of whose owners and summaries try to inject markup."""
    from datetime import datetime, timezone

    from rules.base import Finding
    from service.core.config import parse_config
    from service.core.lake import Lake
    from service.planning.estimate import estimate, plan_inputs
    from service.findings.store import store_findings
    from service.ingest.billing import ingest
    from service.planning.plans import plan_from_estimate, register_plan

    export = focus_export(root / "export", organisation_lines(day))
    config = parse_config({"lake": str(root / "lake"),
                           "sources": [{"name": "focus-main", "kind": "focus", "location": str(export)}],
                           "budgets": [{"name": "pretrain-gpu", "dimension": "team", "value": "pretrain",
                                        "amount": 180000},
                                       {"name": "eval", "dimension": "team", "value": "eval", "amount": 50000}]})
    assert not ingest(config).failed
    lake = Lake(config.lake)
    plan = estimate(plan_inputs({"params": "7B", "tokens": "2T", "gpu": "H100", "gpus": 1024, "mfu": "0.35-0.45",
                                 "price_per_gpu_hour": "4"}), config)
    register_plan(lake, plan_from_estimate(plan, name="llm-7b-base", project="llm-7b", experiment=None,
                                           start="2026-11-28"))
    seen = datetime(2026, 11, 28, tzinfo=timezone.utc)
    store_findings(lake, [
        Finding(id="f1", rule="idle-gpu", severity="critical", resource_id="i-0abc", team="pretrain",
                project="llm-7b", category="waste", impact_usd=Decimal("1708.90"), monthly_waste_usd=Decimal("1708.90"), summary="p5.48xlarge idle for 4 h",
                first_seen=seen, last_seen=seen),
        Finding(id="f2", rule="checkpoint-sprawl", severity="warning", resource_id=f"s3://ckpt/{INJECTIONS[1]}/",
                team=INJECTIONS[0], category="waste", impact_usd=Decimal("312.40"), monthly_waste_usd=Decimal("312.40"), summary=f"{INJECTIONS[0]} keeps 40 checkpoints",
                first_seen=seen, last_seen=seen),
    ])
    return config
