"""The runs a plan's actual counts that began after its run's end: a second run of its project
(and experiment) started while the first one's storage is kept, not registered as a plan of its
own, whose spend the first plan's actual counts (service/report/sections/plans.py ends an actual at
a later plan's start; a run not registered it cannot tell). Where the lake has job records
(`attribution.clusters`), the plans section names them and their USD in its note, and how to set
them apart: register the run (`spendlake estimate ... --register NAME --start DAY`) with the plan's
scope or the whole project's (a narrower one does not end the plan's actual: sections/plans.py).

A later run is one of the plan's scope whose every attempt with a cost in the plan's window
(`plan_runs`: to where its actual ends) started at or after its run's end: the plan's own run
going on past its planned end is its own. The note names those that come to `MIN_SHARE` of the
plan's actual or more, the costliest `NAMED` by name, the rest folded into "and N more runs"; where
none does alone but all together come to `TOGETHER_SHARE` or more (a second run whose jobs carry no
run label reads as hundreds of runs named by job id), the costliest `NAMED` and the rest folded. A
demo's ad-hoc jobs after the run (twenty runs named by job id, USD 1,196 of an actual of 800,000,
0.15%) are no second run, and said nothing of.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from decimal import Decimal
from shlex import quote

from rules.context import RunCost
from service.core.timewindow import minute_text
from service.core.units import amounts_text
from service.planning.plans import Plan
from service.report.plan_failures import of_plan

MIN_SHARE = Decimal("0.01")  # of the plan's actual: a later run below it alone is no second run
TOGETHER_SHARE = Decimal("0.05")  # of the plan's actual: later runs below it together are no second run
NAMED = 3
LaterRun = tuple[str, datetime, Decimal]  # the run, its first attempt's start (naive UTC), its USD of the plan's scope


def later_runs(runs: Sequence[RunCost] | None, plan: Plan) -> list[LaterRun]:
    """Those of `runs` (plan_runs: None without job records) that began after the plan's run's end, the costliest first."""
    ended = plan.end.astimezone(timezone.utc).replace(tzinfo=None)  # attempts' times are naive UTC
    found = []
    for run in runs or ():
        starts = [a.start for a in run.attempts if a.start is not None]
        ours = [a for a in run.attempts if a.currency == "USD" and of_plan(plan, a.owner or run.owner)]
        cost = sum((a.cost for a in ours), Decimal(0))
        if cost and starts and min(starts) >= ended:
            found.append((run.run, min(starts), cost))
    return sorted(found, key=lambda item: (-item[2], item[0]))


def later_runs_note(plan: Plan, runs: list[LaterRun], actual: Decimal) -> str | None:
    """The sentence naming `runs` (later_runs'), where one comes to MIN_SHARE of `actual` or more, or all
    together to TOGETHER_SHARE, else None."""
    named = [item for item in runs if item[2] >= actual * MIN_SHARE][:NAMED]
    if not named and sum((cost for *_, cost in runs), Decimal(0)) >= actual * TOGETHER_SHARE:
        named = runs[:NAMED]  # the costliest first
    if not named:
        return None
    rest = runs[len(named):]  # the costliest first: those named are its head
    said = ", ".join(f"run {run} ({amounts_text([('USD', cost)])}, from {minute_text(start)} UTC)"
                     for run, start, cost in named)
    more = f" and {len(rest)} more runs ({amounts_text([('USD', sum(c for *_, c in rest))])})" if rest else ""
    return (f"plan {plan.name}'s actual counts {said}{more}, begun after its run's end ({minute_text(plan.end)} UTC) "
            f"while it pays for storage: a later run? Register it (`spendlake estimate ... --register NAME --project "
            f"{quote(plan.project)}{f' --experiment {quote(plan.experiment)}' if plan.experiment else ''} --start DAY`: "
            "its scope, or the whole project's) and this plan's actual ends where it starts.")
