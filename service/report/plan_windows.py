"""Where each registered plan's actual is counted: from its start to the end of what it prices
(`priced_until`: its run and the retention its storage is paid for), or to the start of a later
plan covering its scope (`counted_until`); and the plans whose counted windows and scopes overlap,
both actuals counting that spend (`overlaps`). The plans section (sections/plans.py) reads them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from service.core.folding import folded
from service.core.timewindow import minute_text
from service.planning.plans import Plan


def priced_until(plan: Plan) -> datetime:
    """The end of what the plan prices (planned_spend's): its run's end and the retention its
    storage is paid for. Its actual counts to then (or to a later plan's start: counted_until), so
    a plan spent as planned, its storage kept the days it priced, reads on plan (the actual stopped
    at the run's end: under plan, the storage it priced "kept spending")."""
    return plan.end + timedelta(days=plan.retention_days)


def counted_until(plan: Plan, plans: Sequence[Plan]) -> tuple[datetime, Plan | None]:
    """Where the plan's actual ends, and the plan ending it: what it prices (`priced_until`), or
    the start of the first later plan whose scope covers its own (`covers`) starting at or after
    its run's end while it pays for storage: a second run of the project within the retention,
    whose actual counts the spend from then, where the first plan's counted it too, its compute
    read as the first run's (over plan). Its storage kept after then is in the later plan's actual;
    a later run not registered stays in this plan's (but where job records tell it: plan_later_runs.py
    sets it apart), and so does one of a narrower scope (an
    experiment of a project-wide plan: the rest of the project's spend is in no later actual; both
    count that experiment's, and overlaps says so)."""
    later = [other for other in plans if other is not plan and covers(other, plan)
             and plan.end <= other.start < priced_until(plan)]
    first = min(later, key=lambda other: (other.start, other.name), default=None)
    return (priced_until(plan), None) if first is None else (first.start, first)


def overlaps(plans: list[Plan]) -> list[str]:
    """A sentence for each two plans whose scopes and counted windows (from the start to
    counted_until: a narrower later plan within one's storage retention too) overlap: both actuals
    count that spend."""
    said = []
    for i, one in enumerate(plans):
        for other in plans[i + 1:]:
            since = max(one.start, other.start)
            until = min(counted_until(one, plans)[0], counted_until(other, plans)[0])
            experiments = {one.experiment, other.experiment} - {None}
            if same_scope(one, other) and since < until:
                experiment = f", experiment {sorted(experiments)[0]}" if experiments else ""
                said.append(f"plans {one.name} and {other.name} cover the same spend (project {one.project}"
                            f"{experiment} from {minute_text(since)} to {minute_text(until)} UTC): each one's actual "
                            "counts it.")
    return said


def covers(wide: Plan, plan: Plan) -> bool:
    """Whether all of the plan's spend is in `wide`'s scope: one project (in any case), and `wide`
    the whole project's or the plan's experiment."""
    return folded(wide.project) == folded(plan.project) and (
        wide.experiment is None or plan.experiment is not None and folded(wide.experiment) == folded(plan.experiment))


def same_scope(one: Plan, other: Plan) -> bool:
    """Whether some spend is in both plans' scopes: one project (in any case), and one experiment or
    the whole project."""
    experiments = {folded(e) for e in (one.experiment, other.experiment) if e is not None}
    return folded(one.project) == folded(other.project) and len(experiments) <= 1
