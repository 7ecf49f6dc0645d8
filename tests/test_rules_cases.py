"""Every rule's YAML cases (tests/rules/<rule>.yml): input rows per table, the rule's
config, and the findings expected — all run by this one parametrised test.

Rules that read what the service computes state it in the case: `daily_spend` (direct
spend per day, as service/attribution/lines.py gives it; a row with `from`/`to` repeats
over those days), `budgets` (each budget with its month's outlook, as service/findings
computes it) and `plans` (registered plans)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from rules.base import configure, finding_id
from rules.context import DETAIL, DailySpend, PlannedWindow, RuleContext
from rules.engine import evaluate
from service.core.config import ConfigLoader
from service.core.config_budgets import BudgetConfig
from service.core.lake import Lake
from service.core.timewindow import parse_instant, parse_window
from tests.rules_lake import build_lake

CASES = Path(__file__).resolve().parent / "rules"


def cases():
    for path in sorted(CASES.glob("*.yml")):
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=ConfigLoader)  # as configs read: `on:` is a key
        for case in doc["cases"]:
            yield pytest.param(doc["rule"], case, id=f"{path.stem}: {case['name']}")


def daily_rows(case: dict) -> list[tuple[str | None, DailySpend]]:
    """(dimension or None for any, row) for each day a `daily_spend` entry covers."""
    rows = []
    for entry in case.get("daily_spend", []):
        entry = dict(entry)
        dimension = entry.pop("dimension", None)
        first = date.fromisoformat(str(entry.pop("from", entry.get("day"))))
        last = date.fromisoformat(str(entry.pop("to"))) if "to" in entry else first + timedelta(days=1)
        entry.pop("day", None)
        fields = {"project": "unallocated", "experiment": "unallocated", "service": None, "account": None,
                  "region": None, "usage_type": None, "resource": None, "charge_category": "Usage",
                  "line_item_type": "Usage", "uncovered_tag_keys": (), "currency": "USD", **entry}
        fields["uncovered_tag_keys"] = tuple(fields["uncovered_tag_keys"])
        fields["cost"] = Decimal(str(fields["cost"]))
        rows += [(dimension, DailySpend(day=first + timedelta(days=n), **fields)) for n in range((last - first).days)]
    return rows


@dataclass(frozen=True)
class StatedOutlook:
    actual: Decimal
    forecast: Decimal
    low: Decimal
    high: Decimal
    days_left: Decimal


@dataclass(frozen=True)
class StatedBudget:
    budget: BudgetConfig
    outlook: StatedOutlook
    left_out: tuple = ()  # the scope's spend in other currencies, as a case states it


def stated_budgets(case: dict) -> list[StatedBudget]:
    budgets = []
    for entry in case.get("budgets", []):
        forecast = entry["forecast"]  # the band defaults to the forecast itself
        outlook = {k: Decimal(str(entry.pop(k, forecast))) for k in ("actual", "forecast", "low", "high")}
        outlook["days_left"] = Decimal(str(entry.pop("days_left", 10)))
        left_out = tuple((currency, Decimal(str(cost))) for currency, cost in entry.pop("left_out", {}).items())
        budgets.append(StatedBudget(BudgetConfig.model_validate(entry), StatedOutlook(**outlook), left_out))
    return budgets


def context(case: dict, lake: Lake, now: datetime) -> RuleContext:
    rows = daily_rows(case)

    def direct_daily(dimension: str, since: datetime, until: datetime,
                     by: Collection[str] = DETAIL, along: Collection[str] = ()) -> list[DailySpend]:
        # what the service does not group by is not there: a rule reading a field it did not ask for fails here
        dropped = {f: () if f == "uncovered_tag_keys" else None for f in DETAIL if f not in by}
        return [replace(r, **dropped) for d, r in rows
                if d in (None, dimension) and since.date() <= r.day < until.date()]

    budgets = stated_budgets(case)
    plans = [PlannedWindow(p["name"], p["project"], p.get("experiment"), datetime.fromisoformat(str(p["start"])),
                           datetime.fromisoformat(str(p["end"])), Decimal(str(p["amount"])))
             for p in case.get("plans", [])]
    return RuleContext(con=lake.query(), window=parse_window(case.get("window", "7d"), now=now),
                       direct_daily=direct_daily if "daily_spend" in case else None,
                       budget_outlooks=lambda: budgets, plans=plans)


@pytest.mark.parametrize(("rule_name", "case"), list(cases()))
def test_rule_case(tmp_path, capsys, rule_name, case):
    now = parse_instant(str(case["now"]))
    lake = Lake(tmp_path / "lake")
    build_lake(lake, case.get("tables", {}), now.date())
    (rule,) = [r for r in configure({rule_name: case.get("config") or {}}) if r.name == rule_name]
    ctx = context(case, lake, now)

    files_before = sorted(p for p in lake.root.rglob("*") if p.is_file())
    fresh, (outcome,) = evaluate([rule], ctx)
    assert capsys.readouterr() == ("", ""), "rules never print"
    assert sorted(p for p in lake.root.rglob("*") if p.is_file()) == files_before, "rules never write"
    assert outcome.status == case.get("outcome", "ok"), outcome.message
    found = {f.id: f for f in fresh.get(rule_name, [])}
    expected = {finding_id(rule_name, str(e["resource_id"]), e["key"]): e for e in case.get("expected", [])}
    assert sorted((f.resource_id, f.summary) for i, f in found.items() if i not in expected) == [], "unexpected"
    assert sorted((e["resource_id"], e["key"]) for i, e in expected.items() if i not in found) == [], "missing"
    for fid, want in expected.items():
        got = found[fid]
        assert got.severity == want["severity"], got.summary
        assert got.category == rule.category, got.summary
        assert {"monthly_waste_usd", "impact_usd"} & set(want), f"{fid}: state the money the finding carries"
        for money_field in ("monthly_waste_usd", "impact_usd"):
            if money_field in want:
                assert getattr(got, money_field) == (None if want[money_field] is None else
                                                     Decimal(str(want[money_field]))), got.summary
        if got.category == "waste":  # a waste rule's impact is its monthly waste
            assert got.monthly_waste_usd == got.impact_usd, got.summary
        if "summary" in want:
            assert got.summary == want["summary"]
        for key, value in (want.get("evidence") or {}).items():
            assert got.evidence[key] == value, f"evidence.{key} of {got.resource_id}"
