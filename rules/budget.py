"""budget: a finding for each budget whose warning line its actual or forecast spend crossed.

Budgets live in the config's `budgets:` section (service/core/config_budgets.py); this
rule only has the common settings:

```yaml
rules:
  budget:
    enabled: true
    critical_monthly_usd: 1000
```

Flags: per budget, the highest line crossed by month-to-date actual spend, and the
highest line crossed by the month-end forecast (if the budget watches `forecast`).
Severity: actual ≥ 100% critical, actual below 100% warning; forecast ≥ 100% warning,
forecast below 100% info. `monthly_waste_usd` is the overrun beyond the budget (actual, or
forecast for forecast findings), 0 below the budget. Ignores: other currencies than
the budget's, and budgets with no attributed spend in the trailing weeks.

Forecast (weekday-aware run rate): month-to-date actual + for each remaining day of the
month (the rest of today counted pro rata) the mean spend of the same weekday over the
trailing 28 full days; weekdays without data fall back to the trailing 7-day mean, then to
the month-to-date daily mean. The band uses the 20th and 80th percentiles of the trailing
28 daily values as the rate for the remaining days (widened to include the point forecast).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from decimal import Decimal

from rules.base import Finding, Rule, RuleContext, money, register
from service.core.config_budgets import BudgetConfig

TRAILING_DAYS = 28


@dataclass(frozen=True)
class Forecast:
    actual: Decimal
    forecast: Decimal
    low: Decimal
    high: Decimal
    days_left: Decimal


def month_bounds(now: datetime) -> tuple[datetime, datetime]:
    start = datetime(now.year, now.month, 1)
    end = datetime(now.year + (now.month == 12), now.month % 12 + 1, 1)
    return start, end


def _percentile(values: list[Decimal], fraction: Decimal) -> Decimal:
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def forecast_month(daily: Mapping[date, Decimal], now: datetime) -> Forecast:
    """Month-end forecast from attributed spend per day (naive UTC `now`)."""
    start, end = month_bounds(now)
    today = now.date()
    actual = sum((cost for day, cost in daily.items() if start.date() <= day <= today), Decimal(0))
    # Days since the series began count, those without spend as 0; earlier days are unknown.
    first = min(daily, default=today)
    observed = {day: daily.get(day, Decimal(0))
                for day in (today - timedelta(days=n) for n in range(1, TRAILING_DAYS + 1)) if day >= first}
    last_week = [cost for day, cost in observed.items() if day >= today - timedelta(days=7)]
    elapsed_days = max((now - start) / timedelta(days=1), 1 / 24)
    fallback = (sum(last_week, Decimal(0)) / len(last_week) if last_week
                else actual / Decimal(str(elapsed_days)))

    def rate(day: date) -> Decimal:
        same = [cost for d, cost in observed.items() if d.weekday() == day.weekday()]
        return sum(same, Decimal(0)) / len(same) if same else fallback

    rest_of_today = Decimal(str((datetime.combine(today + timedelta(days=1), datetime.min.time()) - now)
                                / timedelta(days=1)))
    remaining = [(today, rest_of_today)] + [
        (today + timedelta(days=n), Decimal(1)) for n in range(1, (end.date() - today).days)]
    projection = sum((rate(day) * weight for day, weight in remaining), Decimal(0))
    days_left = sum((weight for _, weight in remaining), Decimal(0))
    values = list(observed.values()) or [fallback]
    low = actual + min(_percentile(values, Decimal("0.2")) * days_left, projection)
    high = actual + max(_percentile(values, Decimal("0.8")) * days_left, projection)
    return Forecast(actual, actual + projection, low, high, days_left)


def highest_line(budget: BudgetConfig, spend: Decimal) -> Decimal | None:
    crossed = [line for line in budget.lines if spend >= budget.amount * line]
    return crossed[-1] if crossed else None


@register
class BudgetRule(Rule):
    name = "budget"

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        if not ctx.budgets or ctx.daily_spend is None:
            return []
        now = ctx.until
        start, _ = month_bounds(now)
        findings = []
        for budget in ctx.budgets:
            daily = ctx.daily_spend(budget.dimension, budget.value, budget.currency,
                                    min(start, now - timedelta(days=TRAILING_DAYS + 1)), now)
            if not daily:
                continue
            outlook = forecast_month(daily, now)
            for kind in budget.on:
                spend = outlook.actual if kind == "actual" else outlook.forecast
                line = highest_line(budget, spend)
                if line is not None:
                    findings.append(self._finding(budget, kind, line, spend, outlook))
        return findings

    def _finding(self, budget: BudgetConfig, kind: str, line: Decimal, spend: Decimal, outlook: Forecast) -> Finding:
        over_budget = line >= 1
        severity = ("critical" if over_budget else "warning") if kind == "actual" else (
            "warning" if over_budget else "info")
        pct = (spend * 100 / budget.amount).quantize(Decimal("0.1"))
        verb = "has spent" if kind == "actual" else "is forecast to spend"
        summary = (f"{budget.dimension} {budget.value} {verb} {budget.currency} {spend:,.2f} this month, "
                   f"{pct}% of its {budget.currency} {budget.amount:,.2f} budget {budget.name} "
                   f"(line {line * 100:.0f}%, {outlook.days_left:.1f} days left)")
        finding = self.finding(
            resource_id=f"budget:{budget.name}", key=f"{kind}:{line}", severity=severity,
            monthly_waste_usd=max(spend - budget.amount, Decimal(0)), summary=summary,
            evidence={"budget": budget.name, "dimension": budget.dimension, "value": budget.value,
                      "kind": kind, "line": line, "amount": budget.amount, "currency": budget.currency,
                      "actual": money(outlook.actual), "forecast": money(outlook.forecast),
                      "forecast_low": money(outlook.low), "forecast_high": money(outlook.high),
                      "days_left": outlook.days_left.quantize(Decimal("0.1"))})
        return _owned(finding, budget)


def _owned(finding: Finding, budget: BudgetConfig) -> Finding:
    """A budget's owner is the value it budgets, on its own dimension."""
    if budget.dimension in ("team", "project", "experiment"):
        return replace(finding, **{budget.dimension: budget.value})
    return finding
