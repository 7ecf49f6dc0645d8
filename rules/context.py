"""What a rule sees: the owners, spends, plans and run costs the service fills in, the
Protocols it implements them behind, and the `RuleContext` carrying them, so a rule imports
nothing of the service's implementation (rules/base.py holds the rule and its findings)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Protocol

from service.core.config_budgets import BudgetConfig
from service.core.timewindow import Window
from service.core.units import naive_utc

UNALLOCATED = "unallocated"


@dataclass(frozen=True)
class Owner:
    team: str = UNALLOCATED
    project: str = UNALLOCATED
    experiment: str = UNALLOCATED


@dataclass(frozen=True)
class DailySpend:
    """Direct spend of one day on one group of cost lines (the service sums the lines; see
    service/attribution/lines.py for what direct spend leaves out and why)."""

    value: str  # the asked dimension's value
    project: str  # where a registered plan names it (the planned-run check), else ''
    experiment: str  # where a registered plan names it with its project, else ''
    service: str | None
    account: str | None
    region: str | None
    usage_type: str | None
    resource: str | None
    charge_category: str | None
    line_item_type: str | None
    uncovered_tag_keys: tuple[str, ...]  # tag keys on the lines that no dimension's alias reads
    day: date | None  # None, as each detail field, when the rule did not ask for it (`DirectDaily`'s `by`)
    currency: str | None
    cost: Decimal
    unallocated: bool = False  # `value` is the dimension's `default`: nothing placed these lines
    run: str = ""  # the run (lower case) where a registered plan on a run names it with its project, else ''
    idle: str | None = None  # the cluster whose idle these lines are (hours no job used); None: not idle, or not asked
    job: bool | None = None  # these lines are cluster jobs' parts (their values the jobs'); None: not asked


@dataclass(frozen=True)
class PlannedWindow:
    """A registered plan (service/planning/plans.py): spend of `project` (and `experiment`, and `run`
    when set) in [start, end) up to `amount` (the pessimistic total) is expected."""

    name: str
    project: str
    experiment: str | None
    start: datetime  # naive UTC
    end: datetime
    amount: Decimal
    run: str | None = None  # a plan on a run (`--run`): that run's spend only (DailySpend.run)


@dataclass(frozen=True)
class JobAttempt:
    """One job record (attempt) of a run on a shared GPU cluster, as `spendlake runs --run` shows it."""

    job: str  # the job id as the scheduler shows it
    state: str | None  # its final state as attribution's job_state spells it (None while it runs)
    start: datetime | None  # naive UTC; None for a part without a job record (an EKS pod)
    end: datetime | None  # None while it runs
    gpu_hours: Decimal | None  # inside the window
    cost: Decimal  # its allocated cost in the window
    currency: str | None  # None: it reached no billed instance (cost 0)
    work: tuple | None = None  # what it does (service.core.job_states.work_of); None: not told
    owner: Owner | None = None  # what its cost carries, its run's owner where that is `several`; None: no cost


@dataclass(frozen=True)
class RunCost:
    """A run of the shared GPU clusters in a window: its attempts in start order and its owner,
    the values its jobs' cost carries (`several` where its jobs differ)."""

    run: str
    owner: Owner
    attempts: tuple[JobAttempt, ...]


class Rows(Protocol):
    def fetchall(self) -> list[tuple[Any, ...]]: ...


class LakeSql(Protocol):
    """Read-only SQL over the lake's tables (a `Lake.query()` DuckDB connection): `?` or
    `$name` parameters bound by a list or a dict."""

    def execute(self, query: str, parameters: Sequence[Any] | Mapping[str, Any] | None = None) -> Rows: ...


class OwnerLookup(Protocol):
    """Resource ids → their owners; ids the bill does not name are absent."""

    def __call__(self, resource_ids: Sequence[str], /) -> Mapping[str, Owner]: ...


DETAIL = ("service", "account", "region", "usage_type", "resource", "uncovered_tag_keys", "day", "idle", "job")


class DirectDaily(Protocol):
    """direct_daily(dimension, since, until, by, along) → direct spend per group of lines over
    [since, until) (naive UTC), grouped by the value, the plan's project, experiment and run, the charge
    category, line item type and currency, and the fields of `by` (of DETAIL; the others are None,
    `()` for the tag keys): the fewer, the fewer rows come back. Lines whose charge period is longer
    than a day (monthly fees) are left out. `along`: dimensions read next, summed in the same pass."""

    def __call__(self, dimension: str, since: datetime, until: datetime, /,
                 by: Collection[str] = DETAIL, along: Collection[str] = ()) -> Sequence[DailySpend]: ...


class RunCosts(Protocol):
    """run_costs(window, cost_column) → every run with a cost in the window, as `runs --cost` costs it."""

    def __call__(self, window: Window, cost_column: str, /) -> Sequence[RunCost]: ...


class HeldHours(Protocol):
    """held_hours(window, cost_column) → (ResourceId, hour start, naive UTC) of each clock hour of
    a shared cluster's instance in which jobs held some of its GPUs → the part of its cost
    allocation placed on those jobs (the rest, GPUs no job held, is the cluster's idle), of its
    USD usage lines alone (what idle-gpu bills: not a Savings Plan's negation credit)."""

    def __call__(self, window: Window, cost_column: str, /) -> Mapping[tuple[str, datetime], Decimal]: ...


class Outlook(Protocol):
    """A budget's month: spend so far and the month-end forecast with its band."""

    @property
    def actual(self) -> Decimal: ...
    @property
    def forecast(self) -> Decimal: ...
    @property
    def low(self) -> Decimal: ...
    @property
    def high(self) -> Decimal: ...
    @property
    def days_left(self) -> Decimal: ...


class BudgetOutlook(Protocol):
    """One configured budget and its outlook at the window's end."""

    @property
    def budget(self) -> BudgetConfig: ...
    @property
    def outlook(self) -> Outlook: ...
    @property
    def left_out(self) -> Sequence[tuple[str | None, Decimal]]: ...  # the scope's spend in other currencies


def _no_owners(resource_ids: Sequence[str], /) -> Mapping[str, Owner]:
    return {}


def _no_budgets() -> Sequence[BudgetOutlook]:
    return ()


@dataclass(frozen=True)
class RuleContext:
    """What a rule may see: read-only SQL over the lake, the window, and what the service
    computes for rules (owners, budget outlooks, direct daily spend, plans, run costs) behind the
    interfaces above, so a rule imports nothing of the service's implementation."""

    con: LakeSql
    window: Window
    owner_of: OwnerLookup = _no_owners
    # Every configured budget with its outlook at the window's end (the numbers `spendlake
    # budgets` shows); computed when a rule asks, so a run without the budget rule skips it.
    budget_outlooks: Callable[[], Sequence[BudgetOutlook]] = _no_budgets
    direct_daily: DirectDaily | None = None
    plans: Sequence[PlannedWindow] = ()
    run_costs: RunCosts | None = None  # None: no shared GPU clusters are configured
    held_hours: HeldHours | None = None  # likewise

    @property
    def now(self) -> datetime:
        return self.window.until

    @property
    def since(self) -> datetime:
        """Window start as a naive UTC timestamp, the lake's convention."""
        return naive_utc(self.window.since)

    @property
    def until(self) -> datetime:
        return naive_utc(self.window.until)

    @property
    def window_hours(self) -> Decimal:
        return Decimal(int(self.window.length.total_seconds())) / 3600

    def columns(self, table: str) -> set[str]:
        rows = self.con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]).fetchall()
        return {name for (name,) in rows}

    def latest(self, table: str) -> str:
        """SQL for the table's latest snapshot per source (inventory tables keep one
        partition per `snapshot_date`); the whole table when it has no snapshots."""
        if "snapshot_date" not in self.columns(table) or "source" not in self.columns(table):
            return f"(SELECT * FROM {table})"
        return (f"(SELECT * FROM {table} WHERE (source, snapshot_date) IN "
                f"(SELECT (source, max(snapshot_date)) FROM {table} GROUP BY source))")
