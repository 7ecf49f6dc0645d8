"""Where each registered plan's actual is counted, so that each dollar is in one plan's actual:
the latest-started plan whose scope holds it, from that plan's start (on one start, the narrower
scope: an experiment's plan takes its experiment from a project-wide one, a run's plan its run from
an experiment's one; of two plans on one run from one start, the later registered:
`registered_later`). A plan's actual runs from its start to the end of what it prices
(`priced_until`: its run and the retention its storage is paid for), or to the start of a later
plan covering its scope (`counted_until`); a later plan of a narrower scope takes the spend it holds
from its start (`takers`, `taken_days`: out of the earlier plan's actual, the rest of the project's
spend kept). A plan on a run that a later registered one on it ends at its start counts nothing:
`superseded`. Only two plans of one scope but a run's starting together both count the same spend
(`overlaps` names them: two estimates of a project set side by side). The plans section
(sections/plans.py) reads them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal

from service.attribution import attribute
from service.core.config import Config
from service.core.folding import folded
from service.core.lake import Lake
from service.core.snapshot import Snapshot
from service.core.timewindow import Window, minute_text
from service.core.units import amounts_text
from service.planning.plans import Plan

NARROWING = ("experiment", "run")  # what a plan's scope may name within its project


def priced_until(plan: Plan) -> datetime:
    """The end of what the plan prices (planned_spend's): its run's end and the retention its
    storage is paid for. Its actual counts to then (or to a later plan's start: counted_until), so
    a plan spent as planned, its storage kept the days it priced, reads on plan (the actual stopped
    at the run's end: under plan, the storage it priced "kept spending")."""
    return plan.end + timedelta(days=plan.retention_days)


def counted_until(plan: Plan, plans: Sequence[Plan]) -> tuple[datetime, Plan | None]:
    """Where the plan's actual ends, and the plan ending it: what it prices (`priced_until`), or
    the start of the first later plan whose scope covers its own (`covers`) starting before then:
    a second run of the project (registered a day after its run began, or within the first one's
    storage retention), whose actual counts the spend from its start, where the first plan's
    counted it too (its compute read as the first run's, over plan). Its storage kept after then
    is in the later plan's actual; a later run not registered stays in this plan's (but where job
    records tell it: plan_later_runs.py sets it apart). A later plan of a narrower scope (an
    experiment of a project-wide plan) does not end it, as the rest of the project's spend is in no
    later actual: it takes its own scope's spend from its start (taken_days)."""
    later = [other for other in plans if other is not plan and covers(other, plan) and takes(other, plan)
             and other.start < priced_until(plan)]
    first = min(later, key=lambda other: (other.start, other.name), default=None)
    return (priced_until(plan), None) if first is None else (first.start, first)


def takes(later: Plan, plan: Plan) -> bool:
    """Whether `later` counts the spend both plans' scopes hold from its start rather than `plan`: it
    starts after it, or at the same time on a narrower scope (`narrower`), or on the same run
    registered later (`registered_later`): two plans on one run from one day (the run planned again
    under another name) counted its same dollars each."""
    return later.start > plan.start or later.start == plan.start and (
        narrower(later, plan) or plan.run is not None and covers(later, plan) and covers(plan, later)
        and registered_later(later, plan))


def registered_later(one: Plan, other: Plan) -> bool:
    """Whether `one` was registered after `other`: by when each was registered, a plan registered
    before plans recorded it (None) first; of two such, the one whose name sorts last."""
    def order(plan: Plan) -> tuple:
        return plan.registered is not None, plan.registered or plan.start, plan.name

    return order(one) > order(other)


def superseded(plan: Plan, later: Plan | None) -> bool:
    """Whether `later` (the plan ending the plan's actual: counted_until's) is one on its run from its
    start registered later (`takes`), which counts all it would: the plan's actual is empty."""
    return later is not None and later.start == plan.start


def narrower(one: Plan, other: Plan) -> bool:
    """Whether `one`'s scope is the narrower of two: `other` covers it and not the reverse, or, neither
    covering the other (a run and an experiment), it names the finer dimension (NARROWING's later one:
    a run's plan takes the run's lines of an experiment's plan)."""
    if covers(one, other) or covers(other, one):
        return covers(other, one) and not covers(one, other)
    return _depth(one) > _depth(other)


def _depth(plan: Plan) -> int:
    """How far down NARROWING the plan's scope names: 0 a project, 1 an experiment, 2 a run."""
    return max((i + 1 for i, dim in enumerate(NARROWING) if getattr(plan, dim)), default=0)


def takers(plan: Plan, plans: Sequence[Plan], until: datetime) -> list[Plan]:
    """The plans of a narrower (or partly shared) scope that take some of the plan's spend from their start,
    before `until` (where its actual ends): those covering it end its actual instead (counted_until)."""
    return [other for other in plans if other is not plan and same_scope(other, plan) and not covers(other, plan)
            and takes(other, plan) and other.start < until and counted_until(other, plans)[0] > other.start]


def taken_days(config: Config, lake: Lake, plan: Plan, plans: Sequence[Plan], until: datetime,
               snapshot: Snapshot) -> tuple[dict[date, Decimal], dict[str, Decimal]]:
    """The USD per day of the plan's scope, from its start to `until`, that its `takers` count (each in
    its window, from its start to counted_until), read as its actual is (attribute, in the section's
    `snapshot`), and the USD each taker takes: a dollar several hold is credited to the one counting
    it (`latest`), so the amounts add up to the day's; ({}, {}) when none takes any."""
    taking = takers(plan, plans, until)
    windows = {other.name: (other.start, min(counted_until(other, plans)[0], until)) for other in taking}
    cuts = sorted({plan.start, until, *(t for pair in windows.values() for t in pair if plan.start < t < until)})
    daily: dict[date, Decimal] = defaultdict(Decimal)
    each: dict[str, Decimal] = defaultdict(Decimal)
    for since, to in zip(cuts, cuts[1:]):
        active = [other for other in taking if windows[other.name][0] <= since and to <= windows[other.name][1]]
        if not active:
            continue
        by = ("project", *(dim for dim in NARROWING if any(getattr(other, dim) for other in active)))
        result = attribute(lake, config, Window(since, to), by=by, where=scope_where(plan), granularity="day",
                           snapshot=snapshot)
        for row in result.rows:
            holders = [other for other in active if _holds(other, row.values)]
            if row.currency == "USD" and holders and row.cost:
                daily[row.period] += row.cost
                for other in latest(holders):
                    each[other.name] += row.cost
    return dict(daily), dict(each)


def latest(holders: Sequence[Plan]) -> list[Plan]:
    """Those of the plans holding a dollar that count it: the one no other of them takes it from
    (`takes`: the latest-started, on one start the narrowest, on one run too the later registered); two
    only when of one scope but a run's and one start."""
    return [one for one in holders if not any(takes(other, one) for other in holders if other is not one)]


def taken_note(plan: Plan, each: Mapping[str, Decimal], plans: Sequence[Plan]) -> str:
    """The sentence naming what the plan's actual leaves out to each plan that takes it (`each`: taken_days')."""
    named = {other.name: other for other in plans}
    said = ", ".join(f"{amounts_text([('USD', cost)])} to plan {name} ({scope_text(named[name])}, from "
                     f"{minute_text(named[name].start)} UTC)" for name, cost in sorted(each.items(),
                                                                                        key=lambda i: (-i[1], i[0])))
    return (f"plan {plan.name}'s actual leaves out what plans of a narrower scope count from their start: {said} "
            "(later_plans). Each dollar is in one plan's actual: the latest-started one whose scope holds it (on one "
            "start, the narrower one's).")


def superseded_note(plan: Plan, plans: Sequence[Plan], after: Decimal | None) -> str:
    """The sentence for a `superseded` plan: the plan of its scope and start that counts its spend
    instead (the latest registered), and what that is to the day (`after`: its after_end)."""
    twins = [other for other in plans if other.start == plan.start and covers(other, plan) and covers(plan, other)]
    [counting] = latest(twins)
    spent = f": {amounts_text([('USD', after)])} spent on its scope since" if after else ""
    return (f"plan {plan.name}'s actual is empty: plan {counting.name}, of the same scope ({scope_text(plan)}) and "
            f"start ({minute_text(plan.start)} UTC) and registered later, counts its spend (after_end{spent}); each "
            f"dollar is in one plan's actual. Remove the plan not meant (`spendlake plans remove NAME`).")


def scope_text(plan: Plan) -> str:
    """The plan's scope as the notes name it."""
    return f"project {plan.project}" + "".join(f", {dim} {getattr(plan, dim)}" for dim in NARROWING
                                               if getattr(plan, dim))


def scope_where(plan: Plan) -> dict[str, tuple[str]]:
    """The plan's scope as attribute's `where`: its project, and its experiment and run when it names them."""
    return {"project": (plan.project,), **{dim: (getattr(plan, dim),) for dim in NARROWING if getattr(plan, dim)}}


def _holds(plan: Plan, values: Mapping[str, str]) -> bool:
    """Whether a cost row's `values` (attribute's, by the dimensions the plan names) are in the plan's scope."""
    return all(getattr(plan, dim) is None or folded(values[dim]) == folded(getattr(plan, dim))
               for dim in ("project", *NARROWING))


def overlaps(plans: list[Plan]) -> list[str]:
    """A sentence for each two plans whose scopes and counted windows (from the start to
    counted_until) overlap where neither takes the other's spend (`takes`: one scope but a run's and
    one start; of a run and an experiment starting together, the run's plan takes): both actuals
    count that spend."""
    said = []
    for i, one in enumerate(plans):
        for other in plans[i + 1:]:
            since = max(one.start, other.start)
            until = min(counted_until(one, plans)[0], counted_until(other, plans)[0])
            if same_scope(one, other) and not takes(one, other) and not takes(other, one) and since < until:
                shared = "".join(f", {dim} {min(values)}" for dim in NARROWING
                                 if (values := {getattr(one, dim), getattr(other, dim)} - {None}))
                said.append(f"plans {one.name} and {other.name} cover the same spend (project {one.project}"
                            f"{shared} from {minute_text(since)} to {minute_text(until)} UTC): each one's actual "
                            "counts it.")
    return said


def covers(wide: Plan, plan: Plan) -> bool:
    """Whether all of the plan's spend is in `wide`'s scope: one project (in any case), and each
    dimension `wide` names (its experiment, its run) named alike by the plan."""
    return folded(wide.project) == folded(plan.project) and all(
        getattr(wide, dim) is None or getattr(plan, dim) is not None
        and folded(getattr(wide, dim)) == folded(getattr(plan, dim)) for dim in NARROWING)


def same_scope(one: Plan, other: Plan) -> bool:
    """Whether some spend may be in both plans' scopes: one project (in any case), and no dimension
    both name with other values (one experiment or the whole project; one run or every run)."""
    return folded(one.project) == folded(other.project) and all(
        len({folded(v) for v in (getattr(one, dim), getattr(other, dim)) if v is not None}) <= 1 for dim in NARROWING)
