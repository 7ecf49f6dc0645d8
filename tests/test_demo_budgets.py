"""The demo's budgets work on any day of any month (issue 15): one crossed (this month, or
on a month's first day the month just closed) and one forecast to cross; where the bill begins
within the month, both forecast to cross (a budget a few days cross is a sliver of a month's)."""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta
from decimal import Decimal

import pytest
from click.testing import CliRunner

from service.cli.demo_org import run_demo
from service.cli.main import cli
from service.core.lake import Lake
from service.findings.budgets import budget_status, early_in_month
from service.findings.forecast import month_bounds

pytestmark = pytest.mark.slow

# (the bill's last day; the demo's "now" is the next midnight)
LAST_DAYS = {"the 1st": date(2026, 10, 31), "the 3rd": date(2026, 11, 2), "the 15th": date(2026, 11, 14),
             "the last day": date(2026, 11, 29)}


@pytest.mark.parametrize("when", sorted(LAST_DAYS))
def test_demo_shows_one_crossed_and_one_forecast_budget_on(when, tmp_path, monkeypatch):
    last_day = LAST_DAYS[when]
    # the bill holds the month judged whole (in a month's first days, the month before too)
    now = datetime.combine(last_day + timedelta(days=1), time())
    first = month_bounds(now)[0]
    start = (month_bounds(first - timedelta(days=1))[0] if early_in_month(now) else first).date()
    result = run_demo(tmp_path / "d", days=(last_day - start).days + 1, seed=3, start=start)
    statuses = {s.budget.name: s for s in budget_status(Lake.of(result.config), result.config, result.as_of)}
    assert set(statuses) == {"pretrain-monthly", "eval-monthly"}, result.config.budgets
    pretrain, eval_ = statuses["pretrain-monthly"], statuses["eval-monthly"]
    if early_in_month(result.as_of):  # early in a month: the month just closed was crossed
        assert pretrain.last_month.status == "exceeded" and pretrain.status == "forecast to exceed"
        # sized from a month's spend, not from a day or two of it (3,306% on a 2nd, before)
        assert pretrain.last_month.used_ratio < 2 and pretrain.forecast_ratio < 2
    else:
        assert pretrain.status == "exceeded"
    closed = eval_.outlook.days_left == 0  # data ending on the 1st at 00:00 judges the month it closes
    assert eval_.status == ("past 80%" if closed else "forecast to exceed")
    assert eval_.outlook.actual < eval_.budget.amount
    monkeypatch.setattr("service.core.timewindow.utc_now", lambda: result.as_of)
    monkeypatch.setattr("service.findings.budgets.utc_now", lambda: result.as_of)
    shown = CliRunner().invoke(cli, ["--config", str(result.config_path), "budgets", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    rows = {row["budget"]: row for row in json.loads(shown.output.split("\nwarning:")[0])}
    assert rows["eval-monthly"]["status"] == ("past 80%" if closed else "forecast to exceed")
    if early_in_month(result.as_of):
        assert rows["pretrain-monthly"]["last_month"]["status"] == "exceeded"


def test_a_demo_of_three_days_forecasts_pretrain_at_125_percent_of_a_budget_sized_from_its_forecast(tmp_path):
    """walk46: `spendlake demo --days 3` (December 3rd to 5th) sized pretrain's monthly budget at 80% of
    3 days' spend, $201,938, then forecast the month at $2,423,619.09: 1,200.2%, a figure that says nothing.
    The bill begins within the month: the budget is 80% of the month-end forecast, which is the month
    to date plus, for each of the 26 days left, the mean of its weekday's days (Thursday to Saturday
    the 3rd to 5th) or, for the other weekdays, of the 3 days."""
    result = run_demo(tmp_path / "d", days=3, seed=7, start=date(2026, 12, 3))
    [pretrain] = [s for s in budget_status(Lake.of(result.config), result.config, result.as_of)
                  if s.budget.name == "pretrain-monthly"]
    shown = CliRunner().invoke(cli, ["--config", str(result.config_path), "attribute", "--since", "2026-11-07",
                                     "--until", "2026-12-06", "--by", "team", "--where", "team=pretrain",
                                     "--granularity", "day", "--format", "json"])  # the forecast's days
    daily = {row["period"]: Decimal(row["cost"]) for row in json.loads(shown.output)["rows"]}
    thursday, friday, saturday = daily["2026-12-03"], daily["2026-12-04"], daily["2026-12-05"]
    # December 6th to 31st: 4 Thursdays, 3 Fridays, 3 Saturdays and 16 other days
    forecast = pretrain.outlook.actual + 4 * thursday + 3 * friday + 3 * saturday + 16 * sum(daily.values()) / 3
    assert len(daily) == 3 and pretrain.outlook.days_left == 26
    assert pretrain.outlook.forecast.quantize(Decimal("0.01")) == forecast.quantize(Decimal("0.01"))
    assert pretrain.budget.amount == (forecast * Decimal("0.8")).quantize(Decimal("1"))
    row = pretrain.to_json()
    assert row["forecast_pct"] == "125.0" and row["status"] == "forecast to exceed", row  # was 1200.2, exceeded
    assert Decimal(row["used_pct"]) < 20 and pretrain.last_month is None


def test_a_forecast_past_a_warning_line_is_not_ok_and_warns():
    from decimal import Decimal

    from service.core.config import parse_config
    from service.findings.budgets import BudgetStatus, MonthOutcome
    from service.findings.forecast import Forecast

    [budget] = parse_config({"budgets": [{"name": "eval", "dimension": "team", "value": "eval", "amount": "100",
                                          "lines": [0.8, 1.0]}]}).budgets
    status = BudgetStatus(budget, Forecast(Decimal(50), Decimal(81), Decimal(70), Decimal(90), Decimal(10)), "2026-11")
    assert status.status == "forecast past 80%"  # was "ok"
    assert "forecast to reach 81.0% of USD 100.00 by the month's end, past its 80% line" in status.warning
    crossed = BudgetStatus(budget, Forecast(Decimal(85), Decimal(95), Decimal(90), Decimal(99), Decimal(3)), "2026-11",
                           MonthOutcome("2026-10", Decimal(120), Decimal(100)))
    assert crossed.status == "past 80%" and crossed.warning is None  # the actual already crossed it
    assert crossed.to_json()["last_month"] == {"month": "2026-10", "actual": "120.00", "used_pct": "120.0",
                                               "status": "exceeded"}
