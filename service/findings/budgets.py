"""Budgets: month-to-date actual and forecast (service/findings/forecast.py) for every
configured budget.

`budget_status(lake, config, now)` is what `spendlake budgets`, the metrics collector and
the `budget` rule (through its RuleContext) read; the report reads `budget_statuses` for
its day. Spend comes from attribution per day, so it ties out to `spendlake attribute
--granularity day` (shared costs split over each day's direct spend; summed exactly, rounded
only when shown), not always to `--since mtd`, which splits them over the whole month.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

from service.attribution import attribute
from service.core.config import Config
from service.core.config_budgets import BudgetConfig
from service.core.coverage import data_end
from service.core.lake import Lake
from service.core.timewindow import Window, utc_now
from service.core.units import naive_utc
from service.findings.forecast import Forecast, forecast_month, history_start, month_bounds

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


FIRST_DAYS = 7  # the last closed month's outcome is shown in the month's first days


def judged_month(at: datetime) -> str:
    """YYYY-MM of the month budgets judge at `at` (forecast.month_bounds: as `mtd` reads it)."""
    return month_bounds(at)[0].strftime("%Y-%m")


def early_in_month(at: datetime) -> bool:
    """`at` lies in the first FIRST_DAYS days of the month judged (the 1st at 00:00 closes the
    month before: its last day, not a new month's first)."""
    return (at - timedelta(microseconds=1)).day <= FIRST_DAYS


@dataclass(frozen=True)
class MonthOutcome:
    """How a closed month ended against the budget."""

    month: str  # YYYY-MM
    actual: Decimal
    amount: Decimal

    @property
    def used_ratio(self) -> Decimal:
        return self.actual / self.amount

    @property
    def status(self) -> str:
        return "exceeded" if self.actual >= self.amount else "within"

    def to_json(self) -> dict:
        return {"month": self.month, "actual": _money(self.actual), "used_pct": _pct(self.used_ratio),
                "status": self.status}


@dataclass(frozen=True)
class BudgetStatus:
    budget: BudgetConfig
    outlook: Forecast
    month: str  # YYYY-MM judged
    last_month: MonthOutcome | None = None  # the month before, when the lake holds spend of it

    @property
    def used_ratio(self) -> Decimal:
        return self.outlook.actual / self.budget.amount

    @property
    def forecast_ratio(self) -> Decimal:
        return self.outlook.forecast / self.budget.amount

    @property
    def status(self) -> str:
        """exceeded / forecast to exceed (100%), then the highest warning line crossed by the
        actual (`past 80%`) or, failing that, by the forecast (`forecast past 80%`), else ok."""
        if self.outlook.actual >= self.budget.amount:
            return "exceeded"
        if self.outlook.forecast >= self.budget.amount:
            return "forecast to exceed"
        line = self.budget.highest_line(self.outlook.actual)
        if line is not None:
            return f"past {line * 100:.0f}%"
        line = self.budget.highest_line(self.outlook.forecast)
        return f"forecast past {line * 100:.0f}%" if line is not None else "ok"

    @property
    def warning(self) -> str | None:
        """One sentence when the forecast crosses a line the actual has not crossed yet."""
        line = self.budget.highest_line(self.outlook.forecast)
        if line is None or (self.budget.highest_line(self.outlook.actual) or 0) >= line:
            return None
        b = self.budget
        return (f"budget {b.name} ({b.dimension} {b.value}) is forecast to reach {_pct(self.forecast_ratio)}% of "
                f"{b.currency} {b.amount:,.2f} by the month's end, past its {line * 100:.0f}% line")

    def to_json(self) -> dict:
        b, o = self.budget, self.outlook
        return {"budget": b.name, "month": self.month, "dimension": b.dimension, "value": b.value, "currency": b.currency,
                "amount": _money(b.amount), "actual": _money(o.actual), "forecast": _money(o.forecast),
                "forecast_low": _money(o.low), "forecast_high": _money(o.high),
                "used_pct": _pct(self.used_ratio), "forecast_pct": _pct(self.forecast_ratio),
                "days_left": format(o.days_left.quantize(Decimal("0.1")), "f"), "status": self.status,
                "lines": [format(line, "f") for line in b.lines],
                "last_month": self.last_month.to_json() if self.last_month else None}


def _money(value: Decimal) -> str:
    return format(value.quantize(Decimal("0.01")), "f")


def _pct(ratio: Decimal) -> str:
    return format((ratio * 100).quantize(Decimal("0.1")), "f")


def budget_statuses(lake: Lake, config: Config, since: datetime, until: datetime, at: datetime) -> list[BudgetStatus]:
    """Every budget's outlook at `at` from its spend per day over [since, until) (naive UTC),
    and how the month before `at` ended (its spend is read too)."""
    lookup = daily_spend_lookup(lake, config)
    this_month, _ = month_bounds(at)
    previous = month_bounds(this_month - timedelta(days=1))[0]
    statuses = []
    for b in config.budgets:
        daily = lookup(b.dimension, b.value, b.currency, min(since, previous), until)
        closed = [cost for day, cost in daily.items() if previous.date() <= day < this_month.date()]
        last = MonthOutcome(previous.strftime("%Y-%m"), sum(closed, Decimal(0)), b.amount) if closed else None
        statuses.append(BudgetStatus(b, forecast_month({d: c for d, c in daily.items() if d >= since.date()}, at),
                                     this_month.strftime("%Y-%m"), last))
    return statuses


def budget_status(lake: Lake, config: Config, now: datetime | None = None) -> list[BudgetStatus]:
    """Every budget as of `now`, by default the data's end (service.core.coverage), else the clock."""
    now = naive_utc(now or data_end(lake) or utc_now())
    return budget_statuses(lake, config, history_start(now), now, now)
