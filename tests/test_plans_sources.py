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


def daily(first: int, last: int, amount: str = "100", tags: dict = TAGS) -> list[dict]:
    return [line(f"2026-11-{d:02d}T00:00:00", amount, end=f"2026-11-{d + 1:02d}T00:00:00", tags=tags)
            for d in range(first, last + 1)]


def registered(lake, project: str, start_day: int, hours: int, name: str = "run") -> None:
    """A plan of $2,000 of compute over `hours` from November `start_day`."""
    register_plan(lake, Plan(name=name, project=project, experiment=None,
                             start=datetime(2026, 11, start_day, tzinfo=timezone.utc),
                             run_hours=Span(Decimal(hours), Decimal(hours)), retention_days=0,
                             compute_cost=Span(Decimal(2000), Decimal(2000)),
                             storage_cost=Span(Decimal(0), Decimal(0)), inputs={}))


def test_a_plan_is_judged_to_the_end_of_its_lagging_sources_data_and_says_which(tmp_path):
    """aws is in to the 29th, gcp only to the 26th: as of the 28th the plan ($200 a day, $100 on each)
    read under plan ($1,500 against $1,800), gcp's last three days simply not in yet."""
    make_lake(tmp_path, daily(20, 28), source="aws")
    lake = make_lake(tmp_path, daily(20, 25), source="gcp", delivery="g1")
    registered(lake, "llm-7b", 20, 240)
    found = plans_as_of(lake_config(lake=lake), lake, date(2026, 11, 28))
    (row,) = found.rows
    assert (row["planned_to_date_high"], row["actual_to_date"], row["status"]) == (
        Decimal("1800.00"), Decimal(1200), "on plan to data end")
    assert ("billing source gcp's data ends at 2026-11-26 00:00 UTC, the earliest of the sources with a plan's spend "
            "(or data) since its start, before the day's end: spend after it (of every source) is not in the actual yet, so a "
            "status '... to data end' sets it against the plan to then.") in found.notes, found.notes


def test_a_retired_source_holding_none_of_the_plans_spend_does_not_freeze_its_actual(tmp_path):
    """gcp stopped delivering on the 19th and held another project's spend only: the plan on llm-7b,
    all on aws (in to the 29th), was judged to gcp's end, $0 'under plan to data end', as if aws's
    spend since were not in yet; it is judged to aws's end, the source its lines are on: $900 of
    the $1,400 planned to the 28th."""
    make_lake(tmp_path, daily(20, 28), source="aws")
    lake = make_lake(tmp_path, daily(10, 18, "50", {"project": "bert"}), source="gcp", delivery="g1")
    registered(lake, "llm-7b", 15, 480)
    found = plans_as_of(lake_config(lake=lake), lake, date(2026, 11, 28))
    (row,) = found.rows
    assert (row["actual_to_date"], row["status"]) == (Decimal(900), "under plan"), row
    assert not any("data ends" in note for note in found.notes), found.notes


def test_a_retired_source_that_carried_some_of_the_plans_spend_still_ends_its_data_as_readme_says(tmp_path):
    """gcp stopped delivering on the 19th but carried llm-7b's spend ($50 a day from the 15th):
    nothing tells a retired source from a lagging one, so its end is still the plan's data end
    (README: such a source holds the plan back); the actual is gcp's $200 to then."""
    make_lake(tmp_path, daily(20, 28), source="aws")
    lake = make_lake(tmp_path, daily(10, 18, "50"), source="gcp", delivery="g1")
    registered(lake, "llm-7b", 15, 480)
    found = plans_as_of(lake_config(lake=lake), lake, date(2026, 11, 28))
    (row,) = found.rows
    assert (row["actual_to_date"], row["status"]) == (Decimal(200), "under plan to data end"), row
    assert any(note.startswith("billing source gcp's data ends at 2026-11-19 00:00 UTC") for note in found.notes)


def test_a_plan_whose_project_no_source_carries_yet_is_judged_as_before(tmp_path):
    """No line carries the plan's project since its start: the earliest end of the sources with data
    since then still ends it (nothing tells which source its spend will come from)."""
    make_lake(tmp_path, daily(20, 28), source="aws")
    lake = make_lake(tmp_path, [line("2026-11-21T00:00:00", "50", end="2026-11-22T00:00:00",
                                     tags={"project": "bert"})], source="gcp", delivery="g1")
    registered(lake, "gpt-9", 20, 240, name="later")
    found = plans_as_of(lake_config(lake=lake), lake, date(2026, 11, 28))
    (row,) = found.rows
    assert row["status"].endswith("to data end") or row["status"].startswith("unknown"), row
    assert any("billing source gcp's data ends at 2026-11-22 00:00 UTC" in note for note in found.notes), found.notes


def test_a_plan_on_several_sources_all_in_to_the_day_is_attributed_once(tmp_path, monkeypatch):
    """Which sources carry the plan's spend was a second attribution of its window beside its actual's,
    the same lines: with no source ending it before the day, one attribution gives both, same answer;
    a lagging source still needs the actual to its end, read again (the lagging test above)."""
    from service.report.sections import plans as plans_module

    make_lake(tmp_path, daily(20, 28), source="aws")
    lake = make_lake(tmp_path, daily(10, 18, "50", {"project": "bert"}), source="gcp", delivery="g1")
    registered(lake, "llm-7b", 15, 480)
    calls, attribute = [], plans_module.attribute
    monkeypatch.setattr(plans_module, "attribute", lambda *a, **k: calls.append(a[2]) or attribute(*a, **k))
    (row,) = plans_as_of(lake_config(lake=lake), lake, date(2026, 11, 28)).rows
    assert (row["actual_to_date"], row["status"]) == (Decimal(900), "under plan"), row
    assert len(calls) == 1, calls
