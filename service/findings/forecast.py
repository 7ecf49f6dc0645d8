"""The month-end forecast of a budget's spend (weekday-aware run rate).

Month-to-date actual + for each remaining day of the month (the rest of today counted pro
rata) the mean spend of the same weekday over the trailing 28 full days; weekdays without
data fall back to the trailing 7-day mean, then to the month-to-date daily mean. The band
uses the 20th and 80th percentiles of the trailing 28 daily values as the rate for the
remaining days (widened to include the point forecast).

service/findings/budgets.py computes it per budget; `spendlake budgets`, the metrics, the
report and the `budget` rule (through its RuleContext) all read those numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from service.core.timewindow import month_start

TRAILING_DAYS = 28


@dataclass(frozen=True)
class Forecast:
    actual: Decimal
    forecast: Decimal
    low: Decimal
    high: Decimal
    days_left: Decimal


def month_bounds(now: datetime) -> tuple[datetime, datetime]:
    """The month judged at `now`: the one holding the instant just before it, as `mtd` reads
    it (service/core/timewindow.py), so data ending on the 1st at 00:00 judges the month it
    closes, not a new month without spend."""
    start = month_start(now)
    end = datetime(start.year + (start.month == 12), start.month % 12 + 1, 1, tzinfo=start.tzinfo)
    return start, end


def history_start(now: datetime) -> datetime:
    """Where the spend a forecast at `now` reads begins: the month's start, or the trailing
    days before `now` when they reach further back."""
    return min(month_bounds(now)[0], now - timedelta(days=TRAILING_DAYS + 1))


def _percentile(values: list[Decimal], fraction: Decimal) -> Decimal:
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def forecast_month(daily: Mapping[date, Decimal], now: datetime, actual: Decimal | None = None) -> Forecast:
    """Month-end forecast from attributed spend per day (naive UTC `now`); `actual`: the
    month to date as one window attributes it, else the days of `daily` in the month summed."""
    start, end = month_bounds(now)
    today = now.date()
    if actual is None:
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

    # The rest of today, up to the month's end: none when `now` closes the month.
    rest_of_today = Decimal(str((min(datetime.combine(today + timedelta(days=1), datetime.min.time()), end) - now)
                                / timedelta(days=1)))
    remaining = [(today, rest_of_today)] + [
        (today + timedelta(days=n), Decimal(1)) for n in range(1, (end.date() - today).days)]
    projection = sum((rate(day) * weight for day, weight in remaining), Decimal(0))
    days_left = sum((weight for _, weight in remaining), Decimal(0))
    values = list(observed.values()) or [fallback]
    low = actual + min(_percentile(values, Decimal("0.2")) * days_left, projection)
    high = actual + max(_percentile(values, Decimal("0.8")) * days_left, projection)
    return Forecast(actual, actual + projection, low, high, days_left)
