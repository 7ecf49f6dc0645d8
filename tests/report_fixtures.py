"""Shared by the report tests: a report whose labels try to inject markup, formulas and links."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

from service.report_model import Chart, Column, Headline, Report, Section, Table, unavailable

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


def focus_export(folder: Path, lines: list[tuple[date, str, dict[str, str], str]]) -> Path:
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
            writer.writerow([cost, cost, "USD", f"{period}T00:00:00Z", f"{period_end}T00:00:00Z",
                             f"{day}T00:00:00Z", f"{day + timedelta(days=1)}T00:00:00Z", "Usage", service,
                             f"i-{number:06d}", "111122223333", "AWS", json.dumps(tags)])
    return folder
