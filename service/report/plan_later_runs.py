"""The runs a plan's actual would count that began after its run's end: a second run of its
project (and experiment) started while the first one's storage is kept, not registered as a plan
of its own (service/report/sections/plans.py ends an actual at a later plan's start; a run not
registered it cannot tell by plans alone). Where the lake has job records (`attribution.clusters`),
the plans section sets them apart: their cost per day (`later_days`: attribute's, by run, over the
plan's window, as its actual is read) is taken out of the plan's actual and its chart, shown as
`later_runs`, and the note names them and how to set them against a plan of their own: register
the run (`spendlake estimate ... --register NAME --start DAY`) with the plan's scope or the whole
project's (a narrower one takes its scope's spend from its start: plan_windows.py). A run another
registered plan counts (`held`: a narrower later plan's, its scope and window holding the run's
attempts) is no run not registered: that plan takes it from its start (plan_windows.taken_days), not
set apart here; the note's "in no plan's actual" stays true.

A later run is one of the plan's scope whose every attempt with a cost in the plan's window
(`plan_runs`: to where its actual ends) started at or after its run's end: the plan's own run
going on past its planned end is its own. They make a second run (`judged`) where one comes to
`MIN_SHARE` of the plan's actual or more, or all together to `TOGETHER_SHARE` (a second run whose
jobs carry no run label reads as hundreds of runs named by job id); then all of them are set apart,
the note naming the costliest `NAMED` (those of `MIN_SHARE` or more, else the costliest) and folding
the rest into "and N more runs". A demo's ad-hoc jobs after the run (twenty runs named by job id, USD
1,196 of an actual of 800,000, 0.15%) are no second run: kept in the actual, and said nothing of.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timezone
from decimal import Decimal
from shlex import quote

from rules.context import JobAttempt, RunCost
from service.attribution import attribute
from service.core.config import Config
from service.core.folding import folded
from service.core.lake import Lake
from service.core.snapshot import Snapshot
from service.core.timewindow import Window, minute_text
from service.core.units import amounts_text
from service.planning.plans import Plan
from service.report.plan_failures import of_plan
from service.report.plan_windows import counted_until

MIN_SHARE = Decimal("0.01")  # of the plan's actual: a later run below it alone is no second run
TOGETHER_SHARE = Decimal("0.05")  # of the plan's actual: later runs below it together are no second run
NAMED = 3
LaterRun = tuple[str, datetime, Decimal]  # the run, its first attempt's start (naive UTC), its USD of the plan's scope


def later_runs(runs: Sequence[RunCost] | None, plan: Plan, plans: Sequence[Plan]) -> list[LaterRun]:
    """Those of `runs` (plan_runs: None without job records) that began after the plan's run's end, the
    costliest first, but those another of the registered `plans` counts (`held`): in its actual, taken
    out of this one's as that plan's (plan_windows.taken_days), not set apart as in no plan's. A plan on a
    run (`--run`) has none: its scope is that run, however late it goes on."""
    if plan.run is not None:
        return []
    ended = _naive(plan.end)
    found = []
    for run in runs or ():
        starts = [a.start for a in run.attempts if a.start is not None]
        ours = [a for a in run.attempts if a.currency == "USD" and of_plan(plan, a.owner or run.owner, run.run)]
        cost = sum((a.cost for a in ours), Decimal(0))
        if cost and starts and min(starts) >= ended and not held(run, ours, plan, plans):
            found.append((run.run, min(starts), cost))
    return sorted(found, key=lambda item: (-item[2], item[0]))


def held(run: RunCost, attempts: Sequence[JobAttempt], plan: Plan, plans: Sequence[Plan]) -> bool:
    """Whether a registered plan other than `plan` counts some of `attempts` (the run's): of its
    scope, and running in its window as counted (from its start to counted_until)."""
    for other in plans:
        if other is plan:
            continue
        since, until = _naive(other.start), _naive(counted_until(other, plans)[0])
        if any(of_plan(other, a.owner or run.owner, run.run) and a.start is not None and a.start < until
               and (a.end is None or a.end > since) for a in attempts):
            return True
    return False


def _naive(moment: datetime) -> datetime:
    """A plan's time as attempts' times are: naive UTC."""
    return moment.astimezone(timezone.utc).replace(tzinfo=None)


def judged(runs: list[LaterRun], actual: Decimal) -> bool:
    """Whether `runs` (later_runs') make a second run: one comes to MIN_SHARE of `actual` (the plan's with
    them) or more, or all together to TOGETHER_SHARE."""
    return any(cost >= actual * MIN_SHARE for *_, cost in runs) or bool(runs) and sum(
        (cost for *_, cost in runs), Decimal(0)) >= actual * TOGETHER_SHARE


def later_days(config: Config, lake: Lake, plan: Plan, runs: list[LaterRun], window: Window,
               snapshot: Snapshot, where: Mapping[str, tuple[str, ...]]) -> dict[date, Decimal]:
    """The USD per day of `runs` on the plan's scope (`where`) in `window`, read as its actual is
    (attribute, by run, in the section's `snapshot`): what is taken out of it."""
    names = {folded(run) for run, *_ in runs}
    result = attribute(lake, config, window, by=("run",), where=where, granularity="day", snapshot=snapshot)
    daily: dict[date, Decimal] = defaultdict(Decimal)
    for row in result.rows:
        if row.currency == "USD" and folded(row.values["run"]) in names:
            daily[row.period] += row.cost
    return dict(daily)


def later_runs_note(plan: Plan, runs: list[LaterRun], whole: Decimal, apart: Decimal) -> str:
    """The sentence naming `runs` (later_runs', `judged` against `whole`, the plan's actual with them),
    whose `apart` USD (later_days' sum) its actual leaves out: those of MIN_SHARE of `whole` or more
    (else the costliest) by name, NAMED at most, the rest folded."""
    named = [item for item in runs if item[2] >= whole * MIN_SHARE][:NAMED] or runs[:NAMED]
    rest = runs[len(named):]  # the costliest first: those named are its head
    said = ", ".join(f"run {run} ({amounts_text([('USD', cost)])}, from {minute_text(start)} UTC)"
                     for run, start, cost in named)
    more = f" and {len(rest)} more runs ({amounts_text([('USD', sum(c for *_, c in rest))])})" if rest else ""
    return (f"plan {plan.name}'s actual leaves out {said}{more}, begun after its run's end ({minute_text(plan.end)} "
            f"UTC) while it pays for storage: a later run not registered, {amounts_text([('USD', apart)])} in no "
            f"plan's actual (later_runs). Register it (`spendlake estimate ... --register NAME --project "
            f"{quote(plan.project)}{f' --experiment {quote(plan.experiment)}' if plan.experiment else ''} --start DAY`: "
            "its scope, or the whole project's) to set it against a plan of its own.")
