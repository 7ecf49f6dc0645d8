"""The runs a plan counts, each attempt at the cost its actual counts of it: the section's failures,
later runs and outside runs read these (service/report/sections/plans.py).

A plan of a narrower scope takes the spend its scope holds from its start (plan_windows.takers,
taken_days: out of the plan's actual, dollar by dollar, each in the taker's window from its start to
counted_until). Its attempts go with the dollars: each attempt of a taker's scope is read again in
that window, and what it cost there is taken off its cost here. An attempt crossing the taker's start
(a job restarted at 22:00, failed at 02:00, a run's plan starting at midnight) keeps its cost before
that start, so its failure counts that part in the plan's failures and the rest in the taker's, where
it stayed whole in the plan's and counted twice. An attempt all taken costs nothing here; a run all
taken is left out (its failures and cost are the taker's); a run partly taken keeps its taken attempts
at no cost, so the failed-reruns rule still sees the re-run of an attempt the plan counts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from decimal import Decimal

from rules.context import RunCost, RunCosts
from service.core.timewindow import Window
from service.planning.plans import Plan
from service.report.plan_failures import COST_COLUMN, of_plan, plan_runs
from service.report.plan_windows import counted_until, takers

Taken = dict[tuple[str, str, datetime | None], tuple[Decimal, Decimal]]  # (run, job, start) → cost, GPU-hours


def counted_runs(lookup: RunCosts | None, plan: Plan, plans: Sequence[Plan], until: datetime
                 ) -> Sequence[RunCost] | None:
    """The runs with a cost in the plan's window to `until` (plan_runs': None without job records), each
    attempt's cost and GPU-hours less what plans of a narrower scope take of them (module docstring)."""
    runs = plan_runs(lookup, plan, until)
    taking = [(other, other.start, min(counted_until(other, plans)[0], until)) for other in takers(plan, plans, until)]
    if runs is None or lookup is None or not taking:
        return runs
    taken = _taken(lookup, taking, sorted({plan.start, until, *(t for _, *pair in taking for t in pair)}))
    kept = []
    for run in runs:
        attempts = []
        for attempt in run.attempts:
            cost, hours = taken.get((run.run, attempt.job, attempt.start), (Decimal(0), Decimal(0)))
            attempts.append(replace(attempt, cost=attempt.cost - cost, gpu_hours=None if attempt.gpu_hours is None
                                    else attempt.gpu_hours - hours))
        if any(attempt.cost or (run.run, attempt.job, attempt.start) not in taken for attempt in attempts):
            kept.append(replace(run, attempts=tuple(attempts)))
    return kept


def _taken(lookup: RunCosts, taking: list[tuple[Plan, datetime, datetime]], cuts: list[datetime]) -> Taken:
    """The cost and GPU-hours of each attempt the `taking` plans (each with its window) count, read in
    each span between `cuts` where one counts: an attempt of several spans adds up."""
    taken: Taken = defaultdict(lambda: (Decimal(0), Decimal(0)))
    for since, to in zip(cuts, cuts[1:]):
        active = [other for other, start, end in taking if start <= since and to <= end]
        if not active:
            continue
        for run in lookup(Window(since, to), COST_COLUMN):
            for attempt in run.attempts:
                if any(of_plan(other, attempt.owner or run.owner, run.run) for other in active):
                    key = (run.run, attempt.job, attempt.start)
                    cost, hours = taken[key]
                    taken[key] = (cost + attempt.cost, hours + (attempt.gpu_hours or Decimal(0)))
    return dict(taken)
