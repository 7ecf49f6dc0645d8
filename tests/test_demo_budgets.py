"""The demo's budgets work on any day of any month (issue 15): one crossed (this month, or
on a month's first day the month just closed) and one forecast to cross."""

from __future__ import annotations

import json
from datetime import date, timedelta

import pytest
from click.testing import CliRunner

from service.cli.demo_org import run_demo
from service.cli.main import cli
from service.core.lake import Lake
from service.findings.budgets import budget_status, early_in_month

pytestmark = pytest.mark.slow

# (the bill's last day; the demo's "now" is the next midnight)
LAST_DAYS = {"the 1st": date(2026, 10, 31), "the 3rd": date(2026, 11, 2), "the 15th": date(2026, 11, 14),
             "the last day": date(2026, 11, 29)}


@pytest.mark.parametrize("when", sorted(LAST_DAYS))
def test_demo_shows_one_crossed_and_one_forecast_budget_on(when, tmp_path, monkeypatch):
    last_day = LAST_DAYS[when]
    days = 10
    result = run_demo(tmp_path / "d", days=days, seed=3, start=last_day - timedelta(days=days - 1))
    statuses = {s.budget.name: s for s in budget_status(Lake.of(result.config), result.config, result.as_of)}
    assert set(statuses) == {"pretrain-monthly", "eval-monthly"}, result.config.budgets
    pretrain, eval_ = statuses["pretrain-monthly"], statuses["eval-monthly"]
    if early_in_month(result.as_of):  # early in a month: the month just closed was crossed
        assert pretrain.last_month.status == "exceeded" and pretrain.status == "forecast to exceed"
        # sized from a month's spend, not from a day or two of it (3,306% on a 2nd, before)
        assert pretrain.last_month.used_ratio < 2
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
