"""Rules and findings; the registry (service/core/registry.py) finds rules by kebab-case name.

A rule is one small class in its own module: a typed config model (the only place its
defaults live), the lake tables and columns it reads, and `evaluate(ctx) -> list[Finding]`.
It reads through the sandboxed DuckDB connection in the `RuleContext` and returns
findings; it never prints, writes or touches metrics. The engine (rules/engine.py) keeps
ids stable, tracks first/last seen and resolution; the service fills in owners.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from pydantic import Field, ValidationError

from service.core.config import Strict
from service.core.config_budgets import BudgetConfig
from service.core.errors import ConfigError
from service.core.registry import RULE_CATEGORIES, RULES, Configured
from service.core.timewindow import Window
from service.core.units import cents, naive_utc, usd  # noqa: F401 (usd: the rules' money format)
from service.core.validation import plain_errors

Severity = Literal["info", "warning", "critical"]
Status = Literal["open", "resolved", "acknowledged"]
SEVERITIES: tuple[Severity, ...] = ("info", "warning", "critical")
# What kind of money a finding is about, in the order they are listed. `waste` is spend that
# buys nothing (its `monthly_waste_usd` is what it costs a month); `overspend` is spend above
# a budget or an expectation; `ownership` is spend nobody owns. Waste totals never mix them.
Category = Literal["waste", "overspend", "ownership"]
CATEGORIES: tuple[Category, ...] = RULE_CATEGORIES  # the registry refuses a rule declaring another
UNALLOCATED = "unallocated"
NO_OWNER = ""  # a finding's owner its rule did not name: fill_owners names it (a team may be called `unallocated`)
HOURS_PER_MONTH = Decimal("730")  # 365 × 24 / 12, the convention of cloud price lists


@dataclass(frozen=True)
class Owner:
    team: str = UNALLOCATED
    project: str = UNALLOCATED
    experiment: str = UNALLOCATED


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One thing a rule found, on one resource. `id` = hash(rule, resource_id, key).

    `impact_usd` is the money at stake, as its rule's docstring defines it; `monthly_waste_usd`
    is set for `waste` findings only (and equals their impact), None for the other categories.
    """

    id: str
    rule: str
    category: Category
    severity: Severity
    resource_id: str
    team: str = NO_OWNER
    project: str = NO_OWNER
    experiment: str = NO_OWNER
    impact_usd: Decimal
    monthly_waste_usd: Decimal | None = None
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    status: Status = "open"
    acknowledged_at: datetime | None = None
    ack_reason: str | None = None

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"finding {self.id}: category {self.category!r} is not one of {', '.join(CATEGORIES)}")
        if (self.monthly_waste_usd is not None) != (self.category == "waste"):
            raise ValueError(f"finding {self.id}: monthly_waste_usd is for waste findings only, and every "
                             f"waste finding has one (category {self.category})")


def finding_id(rule: str, resource_id: str, key: str) -> str:
    """Stable across runs: the same rule, resource and key always give the same id."""
    digest = hashlib.sha256("\x1f".join((rule, resource_id, key)).encode()).hexdigest()
    return digest[:16]


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise TypeError(f"evidence value of type {type(value).__name__} is not JSON-able")


money = cents  # a finding's USD: rounded half-up to the cent (service.core.units)


def glob_regex(patterns: Sequence[str], *, path_component: bool = False) -> str:
    """Shell-style globs (`*`, `?`) → one RE2 alternation. In a path component `*` stops at `/`."""
    star, one = ("[^/]*", "[^/]") if path_component else (".*", ".")
    parts = ["".join(star if ch == "*" else one if ch == "?" else re.escape(ch) for ch in p) for p in patterns]
    return "(?:" + "|".join(parts) + ")"


class RuleConfig(Strict):
    """Settings every rule has. A rule's own model adds its thresholds with defaults."""

    enabled: bool = True
    critical_monthly_usd: Decimal = Field(default=Decimal("1000"), ge=0,
                                          description="findings with at least this much at stake (for waste: a month) are critical")


# ---- what a rule sees: small dataclasses the service fills, Protocols it implements ----

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


@dataclass(frozen=True)
class PlannedWindow:
    """A registered plan (service/planning/plans.py): spend of `project` (and `experiment` when set)
    in [start, end) up to `amount` (the pessimistic total) is expected."""

    name: str
    project: str
    experiment: str | None
    start: datetime  # naive UTC
    end: datetime
    amount: Decimal


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


DETAIL = ("service", "account", "region", "usage_type", "resource", "uncovered_tag_keys", "day")


class DirectDaily(Protocol):
    """direct_daily(dimension, since, until, by, along) → direct spend per group of lines over
    [since, until) (naive UTC), grouped by the value, the plan's project and experiment, the charge
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


RuleConfigT = TypeVar("RuleConfigT", bound=RuleConfig)


class Rule(Configured[RuleConfigT]):
    """Subclass as `Rule[ItsConfig]` (that declares `config_model = ItsConfig`; a rule with no
    settings of its own has RuleConfig), set `name`, `category` and `inputs`, implement `evaluate`."""

    name: ClassVar[str]
    category: ClassVar[Category]  # what kind of money its findings are about (CATEGORIES)
    config_model: ClassVar[type[RuleConfig]] = RuleConfig
    # table → the columns the rule reads (service.core.schema has their types). A table
    # that is not in the lake yet skips the rule; a missing column is an error.
    inputs: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __init__(self, config: RuleConfigT | None = None):
        self.config = config if config is not None else self.config_model()

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        raise NotImplementedError

    def severity(self, monthly_usd: Decimal, default: Severity = "warning") -> Severity:
        return "critical" if monthly_usd >= self.config.critical_monthly_usd > 0 else default

    def finding(self, *, resource_id: str, key: str, severity: Severity, impact_usd: Decimal | int,
                summary: str, evidence: Mapping[str, Any]) -> Finding:
        """A finding of this rule's category; a waste rule's impact is its monthly waste."""
        impact = money(impact_usd)
        return Finding(
            id=finding_id(self.name, resource_id, key), rule=self.name, category=self.category, severity=severity,
            resource_id=resource_id, impact_usd=impact, monthly_waste_usd=impact if self.category == "waste" else None,
            summary=summary, evidence=json.loads(json.dumps(dict(evidence), default=_jsonable)),
        )

    @classmethod
    def stored_impact(cls, monthly_waste_usd: Decimal, evidence: Mapping[str, Any]) -> Decimal:
        """The impact of a finding stored before findings had one (its old `monthly_waste_usd`,
        which meant the same for every rule but unallocated-spend, which says otherwise)."""
        return monthly_waste_usd

    @classmethod
    def projected(cls, evidence: Mapping[str, Any]) -> bool:
        """Whether a waste finding's `monthly_waste_usd` is what it costs a month while it goes on
        (True) or a finished cost, counted once and never projected (a failed attempt, a Capacity Block)."""
        return True


def finished_cost(finding: Finding) -> bool:
    """A waste finding whose money is a finished cost, not a month's (its rule's `projected`)."""
    rule = registered().get(finding.rule)
    return finding.category == "waste" and rule is not None and not rule.projected(finding.evidence)


def waste_per(finding: Finding) -> str:
    """What a waste finding's money is per, as tables say it beside the amount."""
    return "once" if finished_cost(finding) else "a month"


# ---- the registry: entry-point group `spendlake.rules` (service/core/registry.py) ----------

def registered() -> dict[str, type[Rule]]:
    """Every installed rule by name. One whose package cannot be loaded is left out here
    (the registry logs why) and named by `configure` when the config sets it."""
    loaded, _ = RULES.load_all()
    return dict(sorted(loaded.items()))


def configure(raw: Mapping[str, Any], *, file: str = "<config>") -> list[Rule]:
    """Every registered rule with its validated config (the `rules:` section of the YAML).

    Errors carry dotted paths such as `rules.idle-gpu.sm_active_max_pct`; unknown rule
    names are rejected.
    """
    loaded, broken = RULES.load_all()
    known = dict(sorted(loaded.items()))
    errors = []
    for name in raw:
        if name in broken:
            errors.append(f"rules.{name}: {broken[name].message}")
        elif name not in known:
            errors.append(f"rules.{name}: unknown rule; known rules: {', '.join(known)}")
    rules = []
    for name, cls in known.items():
        section = raw.get(name) or {}
        if not isinstance(section, Mapping):
            errors.append(f"rules.{name}: must be a mapping of settings")
            continue
        try:
            rules.append(cls(cls.config_model.model_validate(section)))
        except ValidationError as exc:
            errors += [f"{path}: {message}" for path, message in plain_errors(
                exc, section, prefix=("rules", name),
                unknown_key="unknown key; see the rule's documented settings (`spendlake rules list`)")]
    if errors:
        raise ConfigError("; ".join(errors), where=file, hint="fix the config and run `spendlake config validate`")
    return rules
