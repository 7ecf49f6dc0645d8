"""The answer of an attribution: rows, totals, how far the data it read reaches, and the
JSON contract of `spendlake attribute --format json` (service/attribution/api.py computes it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from service.core.output import cut
from service.core.snapshot import Snapshot
from service.core.timewindow import Window, iso_utc, past_the_data

if TYPE_CHECKING:
    from service.attribution.job_rules import IdleRule


@dataclass(frozen=True)
class Contribution:
    """How much of a row one way of deciding a dimension placed (for --explain)."""

    dimension: str
    how: str
    cost: Decimal
    # a job's part (`job:<id>`): its cluster and state, which tell apart two sources' same job id and
    # a requeued job's attempts (api.JOB_PART); None otherwise
    cluster: str | None = None
    job_state: str | None = None
    # a job's part: the record of its attempt (job_how), which tells apart attempts of one state
    record: str | None = None


@dataclass(frozen=True)
class AttributionRow:
    values: dict[str, str]  # dimension → value as shown
    currency: str | None
    cost: Decimal
    period: date | None = None
    previous_cost: Decimal | None = None
    explain: tuple[Contribution, ...] = ()

    @property
    def change(self) -> Decimal | None:
        return None if self.previous_cost is None else self.cost - self.previous_cost

    @property
    def change_pct(self) -> Decimal | None:
        if self.previous_cost is None or self.previous_cost == 0:
            return None
        return ((self.cost - self.previous_cost) * 100 / abs(self.previous_cost)).quantize(Decimal("0.01"))


@dataclass(frozen=True)
class AttributionResult:
    window: Window
    cost: str
    by: tuple[str, ...]
    granularity: str
    rows: tuple[AttributionRow, ...]
    totals: tuple[tuple[str | None, Decimal, Decimal | None], ...]  # (currency, cost, previous cost)
    compare: bool = False
    explain: bool = False
    lake_empty: bool = False
    sources: tuple[tuple[str, datetime | None], ...] = ()  # each billing source read and its data_through
    overbooked: int = 0  # shared clusters: instance-hours in the window whose jobs held more than they had
    # --where values the lake holds nowhere: (dimension, value, the closest known values)
    unmatched: tuple[tuple[str, str, str], ...] = ()
    # the (dimension, value) of `unmatched` that a known value nearly spells (suggest.near_miss):
    # likely typos, where the others may be values whose spend has not started
    typos: frozenset[tuple[str, str]] = frozenset()
    spent_in: frozenset[str] = frozenset()  # the billing sources whose lines the rows hold (of `where`)
    reserved: tuple[str, ...] = ()  # a `run` filter value that also holds a bucket (query.reserved_runs)
    # whether the window holds cost without `where`; None when the read kept only the lines it can match
    window_cost: bool | None = None
    # what the rows leave unsaid, and the days of the window before the lake's first bill
    # (answer_notes.with_notes; the table puts the latter in its coverage line)
    notes: tuple[str, ...] = ()
    unbilled: str | None = None
    # what may make the rows wrong (job rules no job meets, over-booked hours and their cause), said
    # as `warning:`; `quiet`: the rules no job of this window met but others did (a quiet day: -v only)
    warnings: tuple[str, ...] = ()
    quiet: tuple[str, ...] = ()
    # the lake state the rows were read in (DuckDB's; None: Spark's, or no bill): the job records the
    # warnings read are those it holds (Snapshot.tables), not a job source's later snapshot
    read_in: Snapshot | None = field(default=None, compare=False, repr=False)
    # the job-field rules of `by` no job record of the window meets, checked on the answer's own
    # connection (attribute_query's job_rules); None: not checked there (with_notes checks them)
    idle_rules: tuple[IdleRule, ...] | None = None
    # what the allocation assumes of the window's instances (instance_checks.py), checked with the
    # idle rules on the answer's connection (empty when not: with_notes opens no other to check)
    instance_warnings: tuple[str, ...] = ()
    # by run: why its runs may read $0 (a Savings Plan's, a Capacity Block's hours), read on the
    # answer's own connection (attribute_query's job_rules; run_cost_notes.py); with_notes says them
    run_notes: tuple[str, ...] = ()

    @property
    def data_through(self) -> datetime | None:
        """The latest data_through of the sources read: the end of the data in the lake."""
        return max((moment for _, moment in self.sources if moment is not None), default=None)

    @property
    def unreached(self) -> str | None:
        """How much of the window runs past the data's end (an `until` after it), said beside
        the rows as `unbilled` is: its hours hold no cost yet, not no spend. Of rows, or of a
        window wholly after the data, beside its notes' `no cost in the window`: where the data
        ends (another window without rows says why in its notes)."""
        after = self.data_through is not None and self.window.since >= self.data_through
        return past_the_data(self.window, self.data_through) if self.rows or after else None

    @property
    def previous(self) -> Window | None:
        """The window `--compare` set this one against (None without it)."""
        return previous_window(self.window, self.data_through) if self.compare else None

    def to_json(self) -> dict:
        rows = []
        for row in self.rows:
            item: dict = {**row.values, "currency": row.currency, "cost": _dec(row.cost)}
            if self.granularity != "total":
                item["period"] = row.period.isoformat() if row.period else None
            if self.compare:
                item.update(previous_cost=_dec(row.previous_cost), change=_dec(row.change),
                            change_pct=_dec(row.change_pct))
            if self.explain:
                item["explain"] = [{"dimension": c.dimension, "how": c.how, "cost": _dec(c.cost),
                                    **({"cluster": c.cluster, "job_state": c.job_state} if c.cluster or c.job_state
                                       else {}), **({"record": c.record} if c.record else {})} for c in row.explain]
            rows.append(item)
        totals = []
        for currency, cost, previous in self.totals:
            total: dict = {"currency": currency, "cost": _dec(cost)}
            if self.compare:
                total.update(previous_cost=_dec(previous), change=_dec(cost - (previous or 0)))
            totals.append(total)
        notes = [f"{dim}={cut(value)} matches nothing in the lake; {hint}" for dim, value, hint in self.unmatched] + [
            *self.reserved, *self.notes, *([self.unbilled] if self.unbilled else []),
            *([f"{self.unreached} (the data runs through {iso_utc(self.data_through)})"] if self.unreached else []),
            *self.warnings]
        compared = {"previous_since": iso_utc(self.previous.since), "previous_until": iso_utc(self.previous.until)
                    } if self.previous else {}
        return {"since": iso_utc(self.window.since), "until": iso_utc(self.window.until), **compared, "cost": self.cost,
                "by": list(self.by), "rows": rows, "totals": totals, "data_through": _iso(self.data_through),
                "sources": [{"source": name, "data_through": _iso(moment)} for name, moment in self.sources],
                # said in the answer, not only on a CLI's stderr (or in the table's coverage line)
                **({"notes": notes} if notes else {})}


def previous_window(window: Window, data_through: datetime | None) -> Window:
    """What `--compare` compares with: the span before the window as long as the data the
    window holds, so a window that runs past the data's end is not set against a full one."""
    if data_through is not None and window.since < data_through < window.until:
        return window.previous(data_through - window.since)
    return window.previous()


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else iso_utc(moment)


def _dec(value: Decimal | None) -> str | None:
    return None if value is None else format(value, "f")
