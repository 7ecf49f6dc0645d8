"""Budgets: month-to-date actual and forecast (service/findings/forecast.py) for every
configured budget.

`budget_status(lake, config, now)` is what `spendlake budgets`, the metrics collector and
the `budget` rule (through its RuleContext) read; the report reads `budget_statuses` for
its day. A month's actual is one attribution of the month's window (the call `spendlake
attribute --since mtd --where DIM=VALUE` makes, shared costs split over the month's direct
spend), so the two agree to the cent; the spend per day (`--granularity day`) gives only the
forecast's rate for the days left. All of them are answered from one read of the lake.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

from service.attribution import AttributionQuery, AttributionResult, api_parameter, attribute_queries, lacking_cost
from service.core.config import Config
from service.core.config_budgets import BudgetConfig
from service.core.coverage import data_end, snapshot_data_end
from service.core.folding import folded
from service.core.lake import Lake
from service.core.snapshot import Snapshot
from service.core.timewindow import Window, iso_utc, month_text, utc_now
from service.core.units import amounts_text, currency_text, money_text, naive_utc
from service.findings.forecast import Forecast, forecast_month, history_start, month_bounds

Spend = dict[tuple[str, str | None, date | None], Decimal]


def _query(config: Config, dimension: str, cost: str, values: list[str], since: datetime, until: datetime,
           granularity: str) -> AttributionQuery:
    """The attribution of every budget of a dimension and cost over [since, until) (naive UTC),
    per day or month (`granularity="month"`: its first day), each value's as `--where` alone
    gives it."""
    window = Window(since.replace(tzinfo=timezone.utc), until.replace(tzinfo=timezone.utc))
    return AttributionQuery(window, (dimension,), {dimension: tuple(values)}, cost,
                            granularity=granularity).validated(config.attribution, naming=api_parameter)


def _spend(result: AttributionResult) -> tuple[Spend, dict[str, tuple[str, bool]]]:
    """(folded value, currency, day or None) → attributed cost of each value in `result`;
    and the values no cost line of the lake carries (folded), with their closest known values
    and whether one of those nearly spells it (a likely typo)."""
    [dimension] = result.by
    spend: Spend = {}
    for row in result.rows:
        key = (folded(row.values[dimension]), row.currency, row.period)
        spend[key] = spend.get(key, Decimal(0)) + row.cost
    return spend, {folded(value): (hint, (dim, value) in result.typos) for dim, value, hint in result.unmatched}


FIRST_DAYS = 7  # the last closed month's outcome is shown in the month's first days


def judged_month(at: datetime) -> str:
    """YYYY-MM of the month budgets judge at `at` (forecast.month_bounds: as `mtd` reads it)."""
    return month_text(month_bounds(at)[0])


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
    # the scope's month-to-date spend in other currencies than the budget's: never converted, so left out
    left_out: tuple[tuple[str | None, Decimal], ...] = ()
    # the closest values when no cost line of the lake carries the budget's value
    unmatched: str | None = None
    typo: bool = False  # one of them nearly spells it: counting nothing, not spending nothing yet
    # `source period` of the deliveries of the months read with no line of the budget's cost (an Azure
    # actual-cost export has no effective cost): their spend counts as 0 (attribute's note says it too)
    lacking: tuple[str, ...] = ()
    no_data: bool = False  # no usage of the lake reaches into the month: its 0 is data not in, not no spend

    @property
    def used_ratio(self) -> Decimal:
        return self.outlook.actual / self.budget.amount

    @property
    def forecast_ratio(self) -> Decimal:
        return self.outlook.forecast / self.budget.amount

    @property
    def status(self) -> str:
        """exceeded / forecast to exceed (100%), then the highest warning line crossed by the
        actual (`past 80%`) or, failing that, by the forecast (`forecast past 80%`), else ok; `no
        spend yet` for a value no cost line carries and no known value nearly spells (a new team); `no
        data`, first, for a month the lake holds no usage of (an empty lake: its `ok` at 0% was no data)."""
        if self.no_data:
            return "no data"
        if self.no_spend_yet:
            return "no spend yet"
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
                f"{money_text(b.amount, b.currency)} by the month's end, past its {line * 100:.0f}% line")

    @property
    def left_out_text(self) -> str:
        """The scope's spend in other currencies, as read (`EUR 250.00, GBP 12.00`); '' for none."""
        return amounts_text(self.left_out)

    @property
    def lacking_note(self) -> str | None:
        """One sentence naming the deliveries whose spend the budget's cost counts as 0."""
        if not self.lacking:
            return None
        b = self.budget
        other = "effective" if b.cost == "billed" else "billed"
        return (f"budget {b.name} ({b.dimension} {b.value}) counts {b.cost} cost: {', '.join(self.lacking)} delivered "
                f"no {b.cost} cost, only {other} cost: counted as 0 here; `cost: {other}` counts it")

    @property
    def left_out_note(self) -> str | None:
        """One sentence naming the spend in other currencies that the budget does not count."""
        if not self.left_out:
            return None
        b = self.budget
        return (f"budget {b.name} ({b.dimension} {b.value}) counts {b.currency} spend only: {self.left_out_text} "
                "spent this month is left out (currencies are never converted)")

    @property
    def no_spend_yet(self) -> bool:
        """The budget's value is on no cost line and no known value nearly spells it: budgets
        are set before the spend starts."""
        return self.unmatched is not None and not self.typo

    @property
    def unmatched_warning(self) -> str | None:
        """One sentence when the budget's value is on no cost line and a known value nearly spells
        it: its 0% is no spend counted, not none spent."""
        return self._unmatched_sentence("counts nothing") if self.unmatched is not None and self.typo else None

    @property
    def no_spend_note(self) -> str | None:
        """One sentence for a budget with no spend yet, with the known values, should it be a typo after all."""
        return self._unmatched_sentence("has no spend yet") if self.no_spend_yet else None

    def _unmatched_sentence(self, what: str) -> str:
        b = self.budget
        return f"budget {b.name} {what}: no cost line of the lake has {b.dimension} {b.value}; {self.unmatched}"

    def to_json(self) -> dict:
        b, o = self.budget, self.outlook
        return {"budget": b.name, "month": self.month, "dimension": b.dimension, "value": b.value, "cost": b.cost,
                "currency": b.currency,
                "amount": _money(b.amount), "actual": _money(o.actual), "forecast": _money(o.forecast),
                "forecast_low": _money(o.low), "forecast_high": _money(o.high),
                "used_pct": _pct(self.used_ratio), "forecast_pct": _pct(self.forecast_ratio),
                "days_left": format(o.days_left.quantize(Decimal("0.1")), "f"), "status": self.status,
                "lines": [format(line, "f") for line in b.lines],
                "last_month": self.last_month.to_json() if self.last_month else None,
                "left_out": [{"currency": currency, "actual": _money(cost)} for currency, cost in self.left_out]}


def _money(value: Decimal) -> str:
    return format(value.quantize(Decimal("0.01")), "f")


def _pct(ratio: Decimal) -> str:
    return format((ratio * 100).quantize(Decimal("0.1")), "f")


def budget_statuses(lake: Lake, config: Config, since: datetime, until: datetime, at: datetime,
                    snapshot: Snapshot | None = None) -> list[BudgetStatus]:
    """Every budget's outlook at `at`: the actual over the month to `at` and how the month
    before ended, each month split as an attribution of it alone (`attribute --since mtd`),
    and the forecast's rate from the spend per day over [since, until) (naive UTC); read in
    `snapshot` (a command's: `rules run`'s) when given."""
    this_month, _ = month_bounds(at)
    previous = month_bounds(this_month - timedelta(days=1))[0]
    scopes = list(dict.fromkeys((b.dimension, b.cost) for b in config.budgets))
    queries = []
    for dimension, cost in scopes:
        values = list(dict.fromkeys(b.value for b in config.budgets if (b.dimension, b.cost) == (dimension, cost)))
        # the days (the forecast's rate), and both months in one query (each its own split, as
        # one over it alone)
        queries += [_query(config, dimension, cost, values, since, until, "day"),
                    _query(config, dimension, cost, values, previous, at, "month")]
    # every budget's attributions from one read: a period without a stored rollup is rolled up
    # from its raw lines once for all of them
    results = attribute_queries(lake, config, queries, snapshot=snapshot) if queries else []
    # per (dimension, cost): this month, the one before, (value, currency) → cost; the days; the unmatched
    spend: dict[tuple[str, str], tuple[dict, dict, Spend, dict[str, str]]] = {}
    for scope, days_result, months_result in zip(scopes, results[::2], results[1::2]):
        days, unmatched = _spend(days_result)
        months, _ = _spend(months_result)
        spend[scope] = tuple({(value, currency): cost for (value, currency, first), cost in months.items()
                              if first == start.date()} for start in (this_month, previous)) + (days, unmatched)
    end = data_end(lake) if snapshot is None else snapshot_data_end(lake, snapshot)
    no_data = end is None or naive_utc(end) <= this_month
    read = Window(previous if early_in_month(at) else this_month, at)  # the closed month is shown early in one
    lacking = _lacking_in_scope(lake, config, read, snapshot)
    statuses = []
    for b in config.budgets:
        month, closed, days, unmatched = spend[(b.dimension, b.cost)]
        value = folded(b.value)
        actual = month.get((value, b.currency), Decimal(0))
        last = closed.get((value, b.currency))
        daily = {day: cost for (v, currency, day), cost in days.items() if (v, currency) == (value, b.currency)}
        left_out = sorted(((currency, cost) for (v, currency), cost in month.items()
                           if v == value and currency != b.currency and cost), key=lambda pair: currency_text(pair[0]))
        statuses.append(BudgetStatus(b, forecast_month(daily, at, actual), month_text(this_month),
                                     MonthOutcome(month_text(previous), last, b.amount) if last is not None
                                     else None, tuple(left_out), *unmatched.get(value, (None, False)),
                                     lacking.get((b.dimension, value, b.cost), ()), no_data))
    return statuses


def no_data_note(statuses: Sequence[BudgetStatus], at: datetime) -> str | None:
    """One sentence when the month the budgets judge at `at` holds no usage: their 0 is no data, not no
    spend. Early in a month the export may only be late (a month's first delivery can hold its fees and
    no usage for a day or more), where running the ingest alone was said."""
    if not statuses or not statuses[0].no_data:  # one month, one lake: all or none
        return None
    late = ", or wait for the export: early in a month its usage can come a day or more late"
    return (f"the lake holds no usage for {statuses[0].month}: every budget reads `no data` (its 0 is data not in "
            f"yet, not no spend); run `spendlake ingest`{late if early_in_month(at) else ''}")


def _lacking_in_scope(lake: Lake, config: Config, read: Window,
                      snapshot: Snapshot | None) -> dict[tuple[str, str, str], tuple[str, ...]]:
    """(dimension, folded value, cost) → `source period` of each delivery of `read`'s months with no
    line of the budget's cost (lacking_cost), of the sources whose lines its value holds in `read`
    (read at the other cost, which they carry): an Azure actual-cost export of team vision's
    storage is not named to a budget of team nlp. Asked only where some delivery lacks a cost."""
    lacking = {cost: lacking_cost(lake, cost, read) for cost in {b.cost for b in config.budgets}}
    keys = list(dict.fromkeys((b.dimension, b.value, b.cost) for b in config.budgets if lacking[b.cost]))
    queries = [_query(config, dimension, "effective" if cost == "billed" else "billed", [value], read.since,
                      read.until, "total") for dimension, value, cost in keys]
    results = attribute_queries(lake, config, queries, snapshot=snapshot) if queries else []
    return {(dimension, folded(value), cost): tuple(delivery for delivery in lacking[cost]
                                                   if delivery.rsplit(" ", 1)[0] in result.spent_in)
            for (dimension, value, cost), result in zip(keys, results)}


def budget_status(lake: Lake, config: Config, now: datetime | None = None,
                  snapshot: Snapshot | None = None) -> list[BudgetStatus]:
    """Every budget as of `now`, by default the data's end (service.core.coverage), else the
    clock; in `snapshot` when given (budget_statuses)."""
    now = naive_utc(now or data_end(lake) or utc_now())
    return budget_statuses(lake, config, history_start(now), now, now, snapshot)


NO_BUDGETS = "no budgets configured: add a `budgets:` section to the config (see README \"Budgets\")"


@dataclass(frozen=True)
class BudgetsAsOf:
    """`spendlake budgets` and `/api/v1/budgets`: every budget at `as_of`, and what is said beside them."""

    as_of: datetime  # UTC
    statuses: list[BudgetStatus]
    has_data: bool = True  # False: the lake holds no usage, `as_of` is the clock's (not where data ends)

    @property
    def said(self) -> list[tuple[str, str]]:
        """(`warning` or `note`, sentence), budget by budget, as the command says them on stderr."""
        said = [("note", note)] if (note := no_data_note(self.statuses, self.as_of)) else []
        for status in self.statuses:
            said += [("warning", text) for text in (status.unmatched_warning, status.warning) if text]
            said += [("note", text) for text in (status.no_spend_note, status.lacking_note, status.left_out_note)
                     if text]
        return said

    def to_json(self) -> dict:
        """The command's JSON rows, with the month judged, the moment and the sentences it says."""
        return {"month": judged_month(self.as_of), "as_of": iso_utc(self.as_of),
                "rows": [status.to_json() for status in self.statuses],
                "notes": [text for _, text in self.said] if self.statuses else [NO_BUDGETS]}


def budgets_as_of(lake: Lake, config: Config, now: datetime | None = None) -> BudgetsAsOf:
    """Every budget as of the data's end (as the rules and metrics see them), else `now` (the clock)."""
    end = data_end(lake)
    as_of = end or now or utc_now()
    return BudgetsAsOf(as_of, budget_status(lake, config, as_of), has_data=end is not None)
