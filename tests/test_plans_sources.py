"""A plan whose project spends on two billing sources, one of which lags: the plan is judged to
where the earlier source's data ends, not the latest (`coverage.snapshot_data_end`), where the
lagging source's recent spend is not in the actual yet."""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal

from attribution_helpers import config as lake_config, line, make_lake

from service.planning.estimate import Span
from service.planning.plans import Plan, register_plan
from service.report.sections.plans import plans_as_of

TAGS = {"project": "llm-7b"}


def daily(first: int, last: int) -> list[dict]:
    return [line(f"2026-11-{d:02d}T00:00:00", "100", end=f"2026-11-{d + 1:02d}T00:00:00", tags=TAGS)
            for d in range(first, last + 1)]


def test_a_plan_is_judged_to_the_end_of_its_lagging_sources_data_and_says_which(tmp_path):
    """aws is in to the 29th, gcp only to the 26th: as of the 28th the plan ($200 a day, $100 on each)
    read under plan ($1,500 against $1,800), gcp's last three days simply not in yet."""
    make_lake(tmp_path, daily(20, 28), source="aws")
    lake = make_lake(tmp_path, daily(20, 25), source="gcp", delivery="g1")
    register_plan(lake, Plan(name="run", project="llm-7b", experiment=None,
                             start=datetime(2026, 11, 20, tzinfo=timezone.utc),
                             run_hours=Span(Decimal(240), Decimal(240)), retention_days=0,
                             compute_cost=Span(Decimal(2000), Decimal(2000)),
                             storage_cost=Span(Decimal(0), Decimal(0)), inputs={}))
    found = plans_as_of(lake_config(lake=lake), lake, date(2026, 11, 28))
    (row,) = found.rows
    assert (row["planned_to_date_high"], row["actual_to_date"], row["status"]) == (
        Decimal("1800.00"), Decimal(1200), "on plan to data end")
    assert ("billing source gcp's data ends at 2026-11-26 00:00 UTC, the earliest of the sources with data since a "
            "plan's start, before the day's end: spend after it (of every source) is not in the actual yet, so a "
            "status '... to data end' sets it against the plan to then.") in found.notes, found.notes
