"""Budgets: month-to-date actual and forecast (service/findings/forecast.py) for every
configured budget.

`budget_status(lake, config, now)` is what `spendlake budgets`, the metrics collector and
the `budget` rule (through its RuleContext) read; the report reads `budget_statuses` for
its day. Spend comes from attribution, so it ties out to `spendlake attribute`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal

from service.attribution import attribute
from service.core.config import Config
from service.core.config_budgets import BudgetConfig
from service.core.lake import Lake
from service.core.timewindow import Window, utc_now
from service.core.units import naive_utc
from service.findings.forecast import Forecast, forecast_month, history_start

DailySpendLookup = Callable[[str, str, str, datetime, datetime], dict[date, Decimal]]


def daily_spend_lookup(lake: Lake, config: Config) -> DailySpendLookup:
    """daily_spend(dimension, value, currency, since, until) → {day: attributed billed cost}."""

    def daily_spend(dimension: str, value: str, currency: str, since: datetime, until: datetime) -> dict[date, Decimal]:
        window = Window(since.replace(tzinfo=timezone.utc), until.replace(tzinfo=timezone.utc))
        result = attribute(lake, config, window, by=(dimension,), where={dimension: [value]}, granularity="day")
        spend: dict[date, Decimal] = {}
        for row in result.rows:
            if row.currency == currency and row.period is not None:
                spend[row.period] = spend.get(row.period, Decimal(0)) + row.cost
        return spend

    return daily_spend


@dataclass(frozen=True)
class BudgetStatus:
    budget: BudgetConfig
    outlook: Forecast

    @property
    def used_ratio(self) -> Decimal:
        return self.outlook.actual / self.budget.amount

    @property
    def forecast_ratio(self) -> Decimal:
        return self.outlook.forecast / self.budget.amount

    @property
    def status(self) -> str:
        if self.outlook.actual >= self.budget.amount:
            return "exceeded"
        if self.outlook.forecast >= self.budget.amount:
            return "forecast to exceed"
        line = self.budget.highest_line(self.outlook.actual)
        return f"past {line * 100:.0f}%" if line is not None else "ok"

    def to_json(self) -> dict:
        b, o = self.budget, self.outlook
        return {"budget": b.name, "dimension": b.dimension, "value": b.value, "currency": b.currency,
                "amount": _money(b.amount), "actual": _money(o.actual), "forecast": _money(o.forecast),
                "forecast_low": _money(o.low), "forecast_high": _money(o.high),
                "used_pct": _pct(self.used_ratio), "forecast_pct": _pct(self.forecast_ratio),
                "days_left": format(o.days_left.quantize(Decimal("0.1")), "f"), "status": self.status,
                "lines": [format(line, "f") for line in b.lines]}


def _money(value: Decimal) -> str:
    return format(value.quantize(Decimal("0.01")), "f")


def _pct(ratio: Decimal) -> str:
    return format((ratio * 100).quantize(Decimal("0.1")), "f")


def budget_statuses(lake: Lake, config: Config, since: datetime, until: datetime, at: datetime) -> list[BudgetStatus]:
    """Every budget's outlook at `at` from its spend per day over [since, until) (naive UTC)."""
    lookup = daily_spend_lookup(lake, config)
    return [BudgetStatus(b, forecast_month(lookup(b.dimension, b.value, b.currency, since, until), at))
            for b in config.budgets]


def budget_status(lake: Lake, config: Config, now: datetime | None = None) -> list[BudgetStatus]:
    now = naive_utc(now or utc_now())
    return budget_statuses(lake, config, history_start(now), now, now)
