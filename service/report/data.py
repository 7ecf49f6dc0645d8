"""Gather the numbers of a daily report from the lake: one function per section.

Sections whose data source is not part of this build say so instead of showing numbers.
Nothing here reads the clock: every time is derived from the report day or read from the
lake, so the same lake and day give the same report.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal

from service.core.config import Config
from service.core.coverage import data_end
from service.core.lake import Lake
from service.core.timewindow import day_start, iso_utc
from service.core.units import amounts_text, titled
from service.ingest.freshness import SourceFreshness, source_freshness
from service.planning.plans import Plan, load_plans
from service.report.sections.bills import bills_section
from service.report.sections.budgets import budgets_section
from service.report.sections.commitments import commitments_section
from service.report.sections.clusters import clusters_section
from service.report.sections.findings import anomalies_section, unallocated_causes, waste_section
from service.report.model import Chart, Column, Headline, Report, Section, Table
from service.report.sections.spend import PlanActual, SpendReport

CENT = Decimal("0.01")
PLAN_CHARTS = 3  # plans drawn; the table lists them all
PLAN_CHART_DAYS = 120


def gather(config: Config, lake: Lake, day: date) -> Report:
    until = day_start(day) + timedelta(days=1)
    spend = SpendReport(config, lake, day)
    headlines, spend_by = spend.spend_section()
    unallocated = unallocated_section(spend, lake, config.report.top)
    headlines += [Headline(titled("Unallocated, team, month to date", row["currency"]), row["currency"] or "",
                           row["share_pct"], None, None, kind="percent")
                  for row in unallocated.tables[0].rows if row["dimension"] == "team" and row["share_pct"] is not None]
    sections = [
        spend_by,
        bills_section(lake, day),
        spend.trend_section(),
        spend.experiments_section(),
        *clusters_section(config, lake, day, config.report.top),
        waste_section(lake, config.report.top),
        budgets_section(config, lake, day),
        commitments_section(config, lake, day),
        plans_section(lake, day, spend.plan_actual),
        anomalies_section(lake, config.report.top),
        unallocated,
        freshness_section(config, lake, until),
    ]
    return Report(day=day, month_start=day.replace(day=1), headlines=headlines, sections=sections,
                  notes=coverage_notes(lake, day) + estimated_notes(lake, day) + unbilled_notes(lake, day))


def coverage_notes(lake: Lake, day: date) -> list[str]:
    """A sentence when the day lies outside the lake's billing data: before its first billing
    period nothing is missing (no `ingest` would add it), and past its end the day's and the
    month's figures are not in yet, so a drop against the days before is no drop in spend."""
    periods = [e.billing_period for e in lake.ledger() if lake.counts(e.source) and e.totals]
    if periods and f"{day:%Y-%m}" < min(periods):
        return [f"The lake's billing data starts with {min(periods)}: there is no bill for {day:%B %Y} to report."]
    end = data_end(lake)
    if end is not None and end < day_start(day) + timedelta(days=1):
        return [f"The lake's billing data ends at {end:%Y-%m-%d %H:%M} UTC: spend after it is not in yet, so this "
                "day's and this month's figures are incomplete, and no change against earlier days is shown (it "
                "would be no change in spend)."]
    return []


def estimated_notes(lake: Lake, day: date) -> list[str]:
    """A sentence per source whose bill for the report's month has no invoice id yet: its
    figures are estimates that may still change until the provider closes the month."""
    period = day.strftime("%Y-%m")
    sources = sorted(e.source for e in lake.ledger() if lake.counts(e.source) and e.billing_period == period
                     and e.totals and not e.final)
    if not sources:
        return []
    return [f"{day:%B %Y} is still estimated for {', '.join(sources)}: the bill has no invoice id yet, "
            "so these figures may change until the provider closes the month."]


def unbilled_notes(lake: Lake, day: date) -> list[str]:
    """A sentence naming the sources whose bill for the report's month has no billed cost (an
    amortized export): the headlines and spend tables, billed cost, show none of it."""
    period = day.strftime("%Y-%m")
    sources = sorted(e.source for e in lake.ledger() if lake.counts(e.source) and e.billing_period == period
                     and e.lacks("billed"))
    if not sources:
        return []
    return [f"{', '.join(sources)} delivered no billed cost for {day:%B %Y}, only amortized (effective) cost: "
            "the headlines and spend tables, billed cost as on the invoice, leave it out; Bills shows it. Point "
            "a source at the actual-cost export for the invoice's figures."]


def unallocated_section(spend: SpendReport, lake: Lake, top: int) -> Section:
    section = Section("unallocated", "Unallocated spend", tables=[spend.unallocated_table()])
    causes = unallocated_causes(lake, top)
    if isinstance(causes, Table):
        section.tables.append(causes)
    else:
        section.note = causes
    return section


def plans_section(lake: Lake, day: date,
                  actual_of: Callable[[Plan], PlanActual]) -> Section:
    """Each registered plan: its planned spend curve at the report's end against attributed spend,
    with a chart of both, cumulative per day, for the plans that have started. A started plan
    whose project (or experiment) no cost line carries is `unknown project`, not under plan, with
    the closest values in the section's note."""
    until = day_start(day) + timedelta(days=1)
    plans = load_plans(lake)
    table = Table("plans", "Registered plans: planned and actual spend to the end of the day", [
        Column("plan", "plan"), Column("project", "project"), Column("experiment", "experiment"),
        Column("start", "start", "time"), Column("end", "end", "time"),
        Column("planned_to_date_low", "plan low", "money"), Column("planned_to_date_high", "plan high", "money"),
        Column("actual_to_date", "actual", "money"), Column("status", "status"),
        Column("planned_total_high", "plan total", "money"),
    ], markdown=(("plan", "project"), "status"))
    charts, unknown = [], []
    for plan in plans:
        to_date = plan.planned_spend(until)
        low, high = to_date.low.quantize(CENT), to_date.high.quantize(CENT)
        daily, unmatched, left_out = actual_of(plan)
        actual = sum(daily.values(), Decimal(0))
        unknown += [f"plan {plan.name}: no cost line carries {dim} {value!r}; {hint}."
                    for dim, value, hint in unmatched]
        if left_out:
            unknown.append(f"plan {plan.name} counts USD spend only: {amounts_text(left_out.items())} spent since "
                           "its start is left out (currencies are never converted).")
        table.rows.append({
            "plan": plan.name, "project": plan.project, "experiment": plan.experiment, "currency": "USD",
            "start": iso_utc(plan.start), "end": iso_utc(plan.end), "planned_to_date_low": low,
            "planned_to_date_high": high, "actual_to_date": actual,
            "status": f"unknown {unmatched[0][0]}" if unmatched else
                      "over plan" if actual > high else "under plan" if actual < low else "on plan",
            "planned_total_high": plan.total_cost.high,
        })
        if plan.start < until and len(charts) < PLAN_CHARTS:
            charts.append(_plan_chart(plan, day, daily))
    note = (" ".join(unknown) or None) if plans else \
        "No plans registered: `spendlake estimate --register NAME --project P --start DATE`."
    return Section("plans", "Plans vs actual", tables=[table] if plans else [], charts=charts, note=note)


def _plan_chart(plan: Plan, day: date, daily: dict[date, Decimal]) -> Chart:
    """Cumulative actual spend to the report day against the planned curve to the plan's end."""
    first, last = plan.start.date(), max(day, plan.end.date())
    days = [first + timedelta(days=i) for i in range(min((last - first).days + 1, PLAN_CHART_DAYS))]
    running, actual = Decimal(0), []
    for current in days:
        running += daily.get(current, Decimal(0))
        actual.append(running if current <= day else None)
    ends = [day_start(current) + timedelta(days=1) for current in days]
    planned = [plan.planned_spend(end) for end in ends]
    series: dict[str, list[Decimal | None]] = {"actual": actual}
    if any(p.low != p.high for p in planned):
        series |= {"planned (low)": [p.low for p in planned], "planned (high)": [p.high for p in planned]}
    else:
        series["planned"] = [p.low for p in planned]
    return Chart("lines", f"{plan.name}: cumulative spend vs plan (USD)", [d.isoformat() for d in days], series, "USD")


def freshness_section(config: Config, lake: Lake, until: datetime) -> Section:
    """Per configured source, billing and inventory (service/ingest/freshness.py): how far its
    data reaches, how far that lags the day's end, and whether within its freshness_hours.
    Data past the day's end shows as the day's end, and ingest runs that changed nothing
    leave no trace, so a later snapshot or an unchanged re-run leaves a past day's report as it was."""
    month = f"{until - timedelta(days=1):%Y-%m}"
    latest: dict[str, tuple[str, str]] = {}
    billing = {entry.source for entry in lake.ledger()}
    for entry in lake.ledger():
        if entry.billing_period > month:  # a bill of a later month was not there on the day
            continue
        period, ingested = latest.get(entry.source, ("", ""))
        latest[entry.source] = (max(period, entry.billing_period), max(ingested, entry.ingested_at))
    table = Table("freshness", "Data freshness per source", [
        Column("source", "source"), Column("kind", "kind"), Column("status", "status"),
        Column("latest_period", "latest period"), Column("data_through", "data through", "time"),
        Column("hours_behind", "hours behind", "count"), Column("freshness_hours", "limit (h)", "count"),
        Column("last_delivery", "last delivery committed", "time"), Column("last_error", "last error"),
    ], markdown=(("source",), "status"))
    for row in source_freshness(config, lake, until):
        period, ingested = latest.get(row.source, (None, None))
        through = None if row.data_through is None else min(row.data_through, until)
        before_its_data = row.source in billing and period is None  # its first bill is of a later month
        table.rows.append({
            "source": row.source, "kind": row.kind, "status": "no data" if before_its_data and row.state != "failing" else _status(row),
            "latest_period": period, "data_through": iso_utc(through) if through and not before_its_data else None,
            "hours_behind": None if before_its_data else row.hours_behind, "freshness_hours": row.freshness_hours,
            "last_delivery": ingested, "last_error": row.last_error,
        })
    note = None if table.rows else "No sources configured."
    return Section("freshness", "Data freshness", tables=[table] if table.rows else [], note=note)


def _status(row: SourceFreshness) -> str:
    """The source's state at the day's end, judged by its data alone (when it last ingested
    changes with every unchanged re-run and says nothing about the day)."""
    if row.state in ("failing", "no data", "not ingested"):
        return row.state
    return "stale" if row.data_stale else "ok"
