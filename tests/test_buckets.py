"""Buckets that add up (issue 15.2): a line whose charge period spans several days, weeks or
months is spread over them by the window's proration, so the periods sum to the window's
total, a day has one value whatever the window, and shared costs split per period."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from service.attribution.api import attribute
from service.attribution.compute import prorate
from service.core.timewindow import Window
from tests.attribution_helpers import config, line, make_lake

CENT = Decimal("0.01")


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def per_period(result, dim: str | None = None) -> dict:
    sums: dict = {}
    for row in result.to_json()["rows"]:
        key = (row["period"], row[dim]) if dim else row["period"]
        sums[key] = sums.get(key, Decimal(0)) + Decimal(row["cost"])
    return sums


def november_day(day: int) -> Decimal:
    """A whole November day's total: its daily line, 1/30 of the monthly fee and tax, and its
    share of the two-day line."""
    return Decimal(day) + Decimal(131) / 30 + {14: 12, 15: 24, 16: 12}.get(day, 0)


def total(result) -> Decimal:
    return sum((cost for _, cost, _ in result.totals), Decimal(0))


LINES = [
    line("2026-11-01 00:00", "100", end="2026-12-01 00:00", service="AWS Support (Business)"),  # monthly fee
    line("2026-11-01 00:00", "31", end="2026-12-01 00:00", category="Tax"),  # monthly tax
    *[line(f"2026-11-{d:02d} 00:00", str(d), end=f"2026-11-{d:02d} 23:00" if d < 30 else "2026-12-01 00:00",
           tags={"team": "nlp" if d % 3 else "cv"}) for d in range(1, 31)],  # one daily line a day
    line("2026-11-14 12:00", "48", end="2026-11-16 12:00", tags={"team": "cv"}),  # two days across three
]
SHARED = {"shared": [{"match": {"charge_category": "Tax"}, "split": "proportional", "by": "team"},
                     {"match": {"service": "AWS Support (Business)"}, "split": "even", "by": "team"}]}


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    return make_lake(tmp_path_factory.mktemp("buckets"), LINES)


@pytest.mark.parametrize("granularity", ["day", "week", "month"])
@pytest.mark.parametrize("window", [Window(utc(2026, 11, 10), utc(2026, 11, 17)),
                                    Window(utc(2026, 11, 3, 7), utc(2026, 11, 29, 13, 30)),
                                    Window(utc(2026, 10, 20), utc(2026, 12, 10))])
def test_periods_sum_to_the_window_total(lake, granularity, window):
    cfg = config(SHARED)
    whole = attribute(lake, cfg, window, by=("team",))
    split = attribute(lake, cfg, window, by=("team",), granularity=granularity)
    assert total(split) == total(whole)  # exactly, not just to the cent
    # a monthly line is on every day it covers, never piled on the window's first day
    if granularity == "day":
        days = per_period(split)
        for day in range(1, 31):
            if window.since <= utc(2026, 11, day) and utc(2026, 11, 1) + timedelta(days=day) <= window.until:
                assert days[f"2026-11-{day:02d}"].quantize(CENT) == november_day(day).quantize(CENT)


def test_a_day_has_one_value_whatever_the_window(lake):
    cfg = config(SHARED)
    windows = [Window(utc(2026, 11, 10), utc(2026, 11, 17)), Window(utc(2026, 11, 1), utc(2026, 12, 1)),
               Window(utc(2026, 11, 12), utc(2026, 11, 13)), Window(utc(2026, 11, 5, 6), utc(2026, 11, 20))]
    seen: dict[tuple, set] = {}
    for window in windows:
        for key, cost in per_period(attribute(lake, cfg, window, by=("team",), granularity="day"), "team").items():
            if key[0] not in (window.since.date().isoformat(),):  # a cut first day is a part of a day
                seen.setdefault(key, set()).add(cost.quantize(CENT))
    assert seen[("2026-11-13", "nlp")] and all(len(values) == 1 for values in seen.values())
    # and it equals the attribution of that day alone, shared splits included
    alone = attribute(lake, cfg, Window(utc(2026, 11, 15), utc(2026, 11, 16)), by=("team",))
    for row in alone.rows:
        assert seen[("2026-11-15", row.values["team"])] == {row.cost.quantize(CENT)}


def test_a_line_across_days_is_prorated_per_day(lake):
    days = per_period(attribute(lake, config(), Window(utc(2026, 11, 14), utc(2026, 11, 17)), by=("team",),
                                granularity="day"), "team")
    # cv on the 15th: 48 × 24/48 from the two-day line + the 15th's own daily line (15)
    assert days[("2026-11-15", "cv")] == Decimal("24") + 15
    assert days[("2026-11-14", "cv")] == Decimal("12") and days[("2026-11-16", "cv")] == Decimal("12")


def test_prorate_gives_the_rounding_remainder_to_the_largest_overlap():
    parts = prorate(Decimal("100"), datetime(2026, 11, 1), datetime(2026, 12, 1), datetime(2026, 11, 10),
                    datetime(2026, 11, 17), "day")
    assert len(parts) == 7 and sum(p for _, p in parts) == Decimal("23.333333333333")  # 100 × 7/30
    assert [p for _, p in parts][1:] == [Decimal("3.333333333333")] * 6  # the first day takes the remainder
    assert parts[0] == (date(2026, 11, 10), Decimal("3.333333333335"))
    cut = prorate(Decimal("1"), datetime(2026, 11, 1), datetime(2026, 11, 3), datetime(2026, 11, 1, 12),
                  datetime(2026, 11, 3), "day")
    assert cut == [(date(2026, 11, 1), Decimal("0.25")), (date(2026, 11, 2), Decimal("0.5"))]
