"""Plans vs actual: each registered plan's planned spend to the end of a day against the USD
attributed to its project (or experiment, or run) since its start, less what a later plan of a
narrower scope counts from its start (each dollar is in one plan's actual: plan_windows.py) and a
second run not registered that job records tell (service/report/plan_later_runs.py). The report's
section "Plans vs actual" (plans.csv), `spendlake plans` and `/api/v1/plans` are all this one
computation.

With several billing sources the data ends where the earliest of them does, among those with
data after the plan's start whose lines carry its project (and experiment): a lagging source's
recent spend is not in yet, so the plan and the actual are both taken to then; a source that
stopped, or never held the plan's spend, does not hold it back (with no line of the plan's yet,
every source with data after its start does: nothing tells where its spend will come from).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from decimal import Decimal

from service.attribution import HELD_TABLES, AttributionResult, attribute, run_costs_lookup
from service.core.config import Config
from service.core.coverage import data_begins, empty_lake_error, snapshot_data_through
from service.core.lake import Lake
from service.core.snapshot import Snapshot, read_consistently
from service.core.timewindow import Window, day_start, iso_utc, minute_text
from service.core.units import amounts_text
from service.findings.plan_values import unpaired
from service.planning.estimate import Span
from service.planning.plans import Plan, load_plans
from service.report.plan_counted_runs import counted_runs
from service.report.plan_failures import failures_note, plan_failures
from service.report.plan_later_runs import judged, later_days, later_runs, later_runs_note
from service.report.plan_outside import outside_note
from service.report.plan_windows import (counted_until, overlaps, priced_until, scope_text, scope_where, superseded,
                                         superseded_note, taken_days, taken_note)
from service.report.model import Chart, Column, Section, Table

CENT = Decimal("0.01")
PLAN_CHARTS = 3  # plans drawn; the table lists them all
PLAN_CHART_DAYS = 120
COLUMNS = (
    Column("plan", "plan"), Column("project", "project"), Column("experiment", "experiment"),
    Column("start", "start", "time"), Column("end", "end", "time"),
    Column("planned_to_date_low", "plan to date", "money", to="planned_to_date_high"),
    Column("planned_to_date_high", "plan to date high", "money", in_html=False),
    Column("actual_to_date", "actual", "money"), Column("status", "status"),
    Column("planned_total_low", "plan total", "money", to="planned_total_high"),
    Column("planned_total_high", "plan total high", "money", in_html=False),
    # the scope's USD spend after the planned end (None before it), not in the actual: the note says it on the page
    Column("after_end", "after planned end", "money", in_html=False),
    # what its estimate allowed for failures, and what failed attempts run again spent in its window (None
    # without job records): service/report/plan_failures.py; the note says it where the actual share is above
    Column("planned_failure_overhead", "failure overhead planned", in_html=False),
    Column("planned_failure_pct", "failures planned", "percent", in_html=False),
    Column("failed_actual", "failed and run again", "money", in_html=False),
    Column("failed_pct", "failed and run again share", "percent", in_html=False),
    # the USD of runs not registered begun after its run's end, out of the actual (None: none set apart, or no job
    # records): service/report/plan_later_runs.py; the note names them
    Column("later_runs", "later runs set apart", "money", in_html=False),
    # the USD of its scope plans of a narrower scope count from their start, out of the actual (None: none):
    # service/report/plan_windows.py; the note names them
    Column("later_plans", "later plans' spend", "money", in_html=False),
    Column("run", "run"),  # the run the plan follows (`estimate --register NAME --run RUN`), else None
)  # plans.csv's, and `spendlake plans`'s; the page and its table (cli/plans.py) show each low and high as one range
NO_PLANS = "No plans registered: `spendlake estimate --register NAME --project P --start DATE`."

# a plan's USD per day, what no cost line carries (the dimension, the note's sentence), its spend in
# other currencies (plan_actual)
PlanActual = tuple[dict[date, Decimal], tuple[tuple[str, str], ...], dict[str | None, Decimal]]
# where the lake's billing data begins, and where each billing source's ends (None: no usage line)
Coverage = tuple[datetime | None, dict[str, datetime | None]]


def data_ends(plan: Plan, data: Coverage, spent_in: Collection[str] = ()) -> tuple[datetime | None, str | None]:
    """Where the plan's data ends, and the source that ends it: the earliest end among the
    billing sources with data after the plan's start, of those `spent_in` (whose lines carry the
    plan's spend) when any is (None when none has)."""
    after = [(end, source) for source, end in data[1].items() if end is not None and end > plan.start]
    ends = sorted([pair for pair in after if pair[1] in spent_in] or after)
    return ends[0] if ends else (max((end for end in data[1].values() if end), default=None), None)


def attributed(config: Config, lake: Lake, plan: Plan, until: datetime,
               snapshot: Snapshot | None = None) -> AttributionResult | None:
    """The plan's project (and experiment) per day from its start to `until` (None: not started),
    read in `snapshot` (the section's) when given; its `spent_in` names the billing sources whose
    lines carry the plan's spend."""
    if plan.start >= until:
        return None
    return attribute(lake, config, Window(plan.start, until), by=("project",), where=scope_where(plan),
                     granularity="day", snapshot=snapshot)


def plan_actual(config: Config, lake: Lake, plan: Plan, until, result: AttributionResult | None = None,
                snapshot: Snapshot | None = None) -> PlanActual:
    """USD attributed to the plan's project (and experiment) per day, from its start to `until`
    (`result`: `attributed` to `until`, already read; else read in `snapshot`, the section's, when
    given); what no cost line of the lake carries, as
    (dimension, sentence): its project or experiment (with the closest known values), or, with no
    spend since its start, its experiment with its project (an experiment of another project): each
    reads $0, no saving; and its spend in other currencies, which a USD plan never counts (nothing
    is converted)."""
    result = attributed(config, lake, plan, until, snapshot) if result is None else result
    if result is None:
        return {}, (), {}
    daily: dict[date, Decimal] = defaultdict(Decimal)
    left_out: dict[str | None, Decimal] = defaultdict(Decimal)
    for row in result.rows:
        if row.currency == "USD":
            daily[row.period] += row.cost
        else:
            left_out[row.currency] += row.cost
    unmatched = tuple((dim, f"no cost line carries {dim} {value!r}; {hint}") for dim, value, hint in result.unmatched)
    apart = None if unmatched or result.rows else unpaired(lake, config, plan, snapshot)
    unmatched += ((apart[0], f"no cost line carries {apart[1]}; {apart[2]}"),) if apart else ()
    return dict(daily), unmatched, {currency: cost for currency, cost in left_out.items() if cost}


def plans_section(config: Config, lake: Lake, day: date) -> Section:
    """Each registered plan: its planned spend curve at the end of `day` against attributed spend,
    with a chart of both, cumulative per day, for the plans that have started (`_status`)."""
    return _section(config, lake, day, lake.snapshot(HELD_TABLES))[0]


def _after_end(config: Config, lake: Lake, plan: Plan, since: datetime, until: datetime,
               snapshot: Snapshot) -> dict[date, Decimal]:
    """The plan's project's (and experiment's) USD spend per day from where its actual ends
    (`since`: counted_until) to `until`, read in `snapshot` (the section's)."""
    result = attribute(lake, config, Window(since, until), by=("project",), where=scope_where(plan),
                       granularity="day", snapshot=snapshot)
    daily: dict[date, Decimal] = defaultdict(Decimal)
    for row in result.rows:
        if row.currency == "USD":
            daily[row.period] += row.cost
    return dict(daily)


def _status(plan: Plan, until: datetime, data: tuple[datetime | None, datetime | None], actual: Decimal,
            found: PlanActual, counted: datetime) -> str:
    """A plan's standing at `until`, honest where its USD actual says nothing: `not started` (its
    start is not before `until`); `unknown project` / `unknown experiment` (no cost line carries
    it, or the experiment with the project: a misspelt value, named with the closest ones in the
    note); `no data yet` (the lake's
    billing data ends at or before its start: its $0 is not a saving); `other currency` (it spent
    in other currencies only, never converted: named in the note); `nothing spent yet` (no spend
    since its start in the data there is: the run has not begun, no saving; said in the note; `nothing spent in its
    window` once past where its actual ends, `counted`); else over, under or on plan,
    against the lower and the higher of the two scenarios (mid-run both spend the GPUs' price an
    hour, so only storage, spread over runs of different lengths, parts them: by cents, either
    way; once the faster run ends the slower one's keeps rising), but `partial data` rather than under or on plan when it started before the
    lake's billing data begins (its spend before is not in the actual: said in the note). When
    the data (`data`: where it begins, and `data_ends`) ends before `until`, the actual holds
    spend to the data's end only: it is set against the plan to then, and the standing says so
    (`under plan to data end`). An actual ending at a later plan's start (counted_until) is set
    against the plan to then too."""
    (begins, ends), (daily, unmatched, left_out) = data, found
    if plan.start >= until:
        return "not started"
    if unmatched:
        return f"unknown {unmatched[0][0]}"
    if ends is None or ends <= plan.start:
        return "no data yet"
    if left_out and not daily:
        return "other currency"
    floor, ceiling = sorted(_cents(plan.planned_spend(min(until, ends, counted))))
    past = " to data end" if ends < until else ""
    if actual > ceiling:
        return f"over plan{past}"
    if begins is not None and plan.start < begins:
        return "partial data"
    if not daily:  # started, the data past its start, nothing spent: a run not begun (or, past what it prices,
        return "nothing spent yet" if until < counted else "nothing spent in its window"  # never), no saving
    return ("under plan" if actual < floor else "on plan") + past


def _cents(planned: Span) -> tuple[Decimal, Decimal]:
    """The planned spend's low and high in cents. An estimate's optimistic run never spends more
    than its pessimistic one (mid-run both spend the GPUs' price an hour): where a plan's stored
    figures' own rounding (one registered with its costs in cents) reads the low a cent above the
    high, both are the lower. (A plan whose optimistic run spends faster, which no estimate
    registers, keeps its low above its high.)"""
    low, high = planned.low.quantize(CENT), planned.high.quantize(CENT)
    return (high, high) if low - high == CENT else (low, high)


def _section(config: Config, lake: Lake, day: date, snapshot: Snapshot) -> tuple[Section, list[str]]:
    """The section, and the sentences of its note (`PlansAsOf.notes`), every figure read in
    `snapshot` (taken with HELD_TABLES: the tags and job records of its costs' lake state): the
    actuals, the spend after each plan's end, its failures and where the data begins and ends."""
    data: Coverage = (data_begins(lake, snapshot), snapshot_data_through(lake, snapshot))
    runs = run_costs_lookup(lake, config, snapshot)  # None without job records
    until = day_start(day) + timedelta(days=1)
    plans = load_plans(lake)
    # a plan on a run (`--run`) is told by job records: without attribution.clusters its row says so, and it takes none
    unread = [plan for plan in plans if plan.run is not None and "run" not in config.attribution.dimensions]
    plans = [plan for plan in plans if plan not in unread]
    table = Table("plans", "Registered plans: planned and actual spend to the end of the day", list(COLUMNS),
                  markdown=(("plan", "project"), "status"))
    charts, notes = [], []
    lagging: dict[datetime, str | None] = {}  # a data end before the day's end → the source ending it
    for plan in plans:
        low, high = _cents(plan.planned_spend(until))
        # which sources hold the plan's spend matters only where several have data since its start
        several_since = sum(end is not None and end > plan.start for end in data[1].values()) > 1
        whole = attributed(config, lake, plan, until, snapshot) if several_since else None
        ends, source = data_ends(plan, data, whole.spent_in if whole else ())
        if ends is not None and ends < until:
            lagging[ends] = source
        # the actual to where the data ends (a leading source's later spend set against the plan to then
        # would read as on plan what a lagging one has not delivered yet): read again only if it ends before
        to = until if ends is None or ends <= plan.start else min(until, ends)
        # the actual is what the plan prices, its run and its storage's retention, or to a later plan's start: the
        # scope's spend after (another run of the project, storage kept longer) is counted apart, never set against it
        counted, later = counted_until(plan, plans)
        in_window = min(to, counted)
        found = plan_actual(config, lake, plan, in_window, whole if in_window == until else None, snapshot)
        daily, unmatched, left_out = found
        actual = sum(daily.values(), Decimal(0))
        spent_after = _after_end(config, lake, plan, counted, to, snapshot) if to > counted else None
        after = None if spent_after is None else sum(spent_after.values(), Decimal(0))
        if superseded(plan, later):
            notes.append(superseded_note(plan, plans, after))
        elif after and later:
            notes.append(f"plan {plan.name}'s actual ends where plan {later.name} starts ({minute_text(counted)} UTC), "
                         f"a later run of {scope_text(later)} before the end of the storage it priced: "
                         f"{amounts_text([('USD', after)])} on {scope_text(plan)} since is not in its actual "
                         f"(after_end): from then plan {later.name}'s actual counts it (past where that ends, its "
                         "after_end).")
        elif after:
            notes.append(f"plan {plan.name} kept spending after its planned end ({minute_text(plan.end)} UTC"
                         f"{_retention(plan)}): {amounts_text([('USD', after)])} on {scope_text(plan)} since is not in "
                         "its actual (after_end).")
        notes += [f"plan {plan.name}: {sentence}" + ("" if sentence.endswith(".") else ".")  # a long list ends in "..."
                  for _, sentence in unmatched]
        # what plans of a narrower scope count from their start: out of its actual, each dollar in one (plan_windows)
        taken, each = taken_days(config, lake, plan, plans, in_window, snapshot) if plan.start < in_window else ({}, {})
        given = sum(taken.values(), Decimal(0)) or None
        if given:  # a day all taken stays, at 0: spent, by a later plan (not "nothing spent")
            daily = {d: cost - taken.get(d, Decimal(0)) for d, cost in daily.items()}
            found, actual, notes = (daily, unmatched, left_out), actual - given, notes + [taken_note(plan, each, plans)]
        in_runs = counted_runs(runs, plan, plans, in_window)  # None without job records
        # a second run not registered, begun after its run's end: out of its actual day by day (plan_later_runs.py)
        apart, begun = None, later_runs(in_runs, plan, plans)
        if judged(begun, actual):
            days = later_days(config, lake, plan, begun, Window(plan.start, in_window), snapshot, scope_where(plan))
            apart = sum(days.values(), Decimal(0))
            daily = {d: cost - days.get(d, Decimal(0)) for d, cost in daily.items() if cost != days.get(d)}
            found, notes = (daily, unmatched, left_out), notes + [later_runs_note(plan, begun, actual, apart)]
            actual, names = actual - apart, {run for run, *_ in begun}
            in_runs = [run for run in in_runs or () if run.run not in names]
        status = _status(plan, until, (data[0], ends), actual, found, counted)
        status = "superseded" if superseded(plan, later) and plan.start < until else status
        failures = plan_failures(config, in_runs, plan, actual)
        notes += [note] if (note := failures_note(plan, failures)) else []
        notes += [note] if (note := outside_note(config, in_runs, plan, actual)) else []
        if status == "nothing spent yet":
            notes.append(f"plan {plan.name}: nothing is spent on {scope_text(plan)} since its start "
                         f"({minute_text(plan.start)} UTC): its $0 is not a saving, the run has not begun.")
        elif status == "nothing spent in its window":
            # its window as counted: to a later plan's start where one cut it (counted_until), not what it priced
            to = (f"where plan {later.name} starts ({minute_text(counted)} UTC)" if later else
                  f"its planned end{_retention(plan)}")
            notes.append(f"plan {plan.name}: nothing was spent on {scope_text(plan)} from its start "
                         f"({minute_text(plan.start)} UTC) to {to}: its $0 is not a saving, the run did not run in "
                         "its window.")
        if left_out:
            notes.append(f"plan {plan.name} counts USD spend only: {amounts_text(left_out.items())} spent since "
                         "its start is left out (currencies are never converted).")
        if data[0] is not None and plan.start < min(data[0], until):
            notes.append(f"plan {plan.name} started before the lake's billing data begins ({minute_text(data[0])} "
                         "UTC): its actual counts from then.")
        table.rows.append({
            "plan": plan.name, "project": plan.project, "experiment": plan.experiment, "run": plan.run,
            "currency": "USD",
            "start": iso_utc(plan.start), "end": iso_utc(plan.end), "planned_to_date_low": low,
            "planned_to_date_high": high, "actual_to_date": actual,
            "status": status,
            # in cents, stored at DECIMAL(38,12): the run's range, which the plan to date shows only once the
            # faster run has ended (both spend the GPUs' price an hour whatever the MFU)
            "planned_total_low": plan.total_cost.low.quantize(CENT),
            "planned_total_high": plan.total_cost.high.quantize(CENT), "after_end": after, **failures.row(),
            "later_runs": apart, "later_plans": given,
        })
        if plan.start < until and len(charts) < PLAN_CHARTS:
            charts.append(_plan_chart(plan, day, daily, ends, counted, spent_after or {}))
    for plan in unread:
        low, high = _cents(plan.planned_spend(until))
        table.rows.append({"plan": plan.name, "project": plan.project, "experiment": plan.experiment, "run": plan.run,
                           "currency": "USD", "start": iso_utc(plan.start), "end": iso_utc(plan.end),
                           "planned_to_date_low": low, "planned_to_date_high": high,
                           "status": "no job records", "planned_total_low": plan.total_cost.low.quantize(CENT),
                           "planned_total_high": plan.total_cost.high.quantize(CENT)})
        notes.append(f"plan {plan.name} follows run {plan.run}, whose cost job records tell: the config has no "
                     "`clusters:` under `attribution:` (README: Shared GPU clusters), so its actual is not known.")
    table.rows.sort(key=lambda row: row["plan"])  # by name, as load_plans gives them
    notes += overlaps(plans)
    several = sum(end is not None for end in data[1].values()) > 1
    for ends, source in sorted(lagging.items()):
        whose = (f"billing source {source}'s data ends at {minute_text(ends)} UTC, the earliest of the sources "
                 "with a plan's spend (or data) since its start," if several and source else
                 f"the lake's billing data ends at {minute_text(ends)} UTC,")
        notes.append(f"{whose} before the day's end: spend after it{' (of every source)' if several else ''} is not in "
                     "the actual yet, so a status '... to data end' sets it against the plan to then.")
    if not plans and not unread:
        notes = [NO_PLANS]
    section = Section("plans", "Plans vs actual", tables=[table] if table.rows else [], charts=charts,
                      note=" ".join(notes) or None)
    return section, notes


def _retention(plan: Plan) -> str:
    """The storage retention a plan prices past its run's end, as its notes name it."""
    return (f" and the {plan.retention_days} days' storage it priced, to {minute_text(priced_until(plan))} UTC"
            if plan.retention_days else "")


@dataclass(frozen=True)
class PlansAsOf:
    """The section's rows as plans.csv holds them (`COLUMNS`), and what is said beside them."""

    day: date
    registered: bool  # any plan at all
    rows: list[dict[str, Any]]
    notes: list[str]  # the sentences of the section's note, one each

    def to_json(self) -> dict[str, Any]:
        return {"as_of": self.day, "rows": self.rows, "notes": self.notes}


def plans_as_of(config: Config, lake: Lake, day: date) -> PlansAsOf:
    """`spendlake plans` and `/api/v1/plans`: the section's rows and notes, every plan's actual
    read from one state of the lake (an ingest committing meanwhile: read again). Plans but no
    bill: a DataError, as every actual would read $0, under plan."""
    return read_consistently(lake, lambda snapshot: _plans_on(config, lake, day, snapshot), HELD_TABLES)


def _plans_on(config: Config, lake: Lake, day: date, snapshot: Snapshot) -> PlansAsOf:
    section, notes = _section(config, lake, day, snapshot)
    rows = [{column.key: row.get(column.key) for column in COLUMNS} for table in section.tables for row in table.rows]
    if rows and not snapshot.checks:
        raise empty_lake_error(lake, nothing="no actual spend to set against the plans")
    return PlansAsOf(day, bool(rows), rows, notes)


def _plan_chart(plan: Plan, day: date, daily: dict[date, Decimal], ends: datetime | None, counted: datetime,
                after: dict[date, Decimal]) -> Chart:
    """Cumulative actual spend to the report day, or to the last day the lake's billing data
    `ends` in (after it the actual is not known, not flat), against the planned curve until it
    reaches the plan's total: the run's end, plus the retention its storage is paid for (an end
    at midnight is reached by the end of the day before: that day is the last). The actual stops
    where it is counted to (`counted`: counted_until); the scope's spend after it (`after`, per day:
    after_end's) goes on from the actual's last point as a line of its own, "after planned end",
    where the actual was drawn flat to the report day whatever was spent."""
    reached = priced_until(plan) - timedelta(microseconds=1)
    first, last = plan.start.date(), max(day, reached.date())
    stops = (counted - timedelta(microseconds=1)).date()  # the actual's last day
    days = [first + timedelta(days=i) for i in range(min((last - first).days + 1, PLAN_CHART_DAYS))]
    through = day if ends is None else min(day, (ends - timedelta(microseconds=1)).date())
    running, past, actual, beyond = Decimal(0), Decimal(0), [], []
    for current in days:
        running += daily.get(current, Decimal(0))
        past += after.get(current, Decimal(0))
        actual.append(running if current <= min(through, stops) else None)
        beyond.append(running + past if stops <= current <= through else None)
    day_ends = [day_start(current) + timedelta(days=1) for current in days]
    planned = [plan.planned_spend(end) for end in day_ends]
    series: dict[str, list[Decimal | None]] = {"actual": actual}
    if any(p.low != p.high for p in planned):
        series |= {"planned (low)": [p.low for p in planned], "planned (high)": [p.high for p in planned]}
    else:
        series["planned"] = [p.low for p in planned]
    if any(value is not None for current, value in zip(days, beyond) if current > stops):
        series["after planned end"] = beyond
    return Chart("lines", f"{plan.name}: cumulative spend vs plan (USD)", [d.isoformat() for d in days], series, "USD")
