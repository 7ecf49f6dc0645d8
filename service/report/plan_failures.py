"""A plan's failures, planned against spent: what its estimate allowed for failures and restarts
(`estimate --failure-overhead`) beside what the runs of its project (and experiment) spent in its
window on failed attempts that were run again, as the failed-reruns rule (as `rules:` configures
it) counts them and `spendlake runs --run X` says them ("failed and run again"). The plans section
(service/report/sections/plans.py) adds them to each plan's row:

- planned_failure_overhead: the estimate's input as typed (`0.1`, `10%-20%`): extra compute over
  the training compute;
- planned_failure_pct: that overhead as a percent of the plan's total, the pessimistic scenario's
  (failure ÷ (1 + every overhead) of its compute, over its compute and storage): the most the plan
  allows for failures;
- failed_actual, failed_pct: the USD of the counted attempts in the plan's window (its actual's,
  to its planned end and retention, or the data's end), and its percent of the actual.

Only where the lake has job records: without `attribution.clusters`, or with no run of the
plan's project (and experiment) in its window, the actual figures are None and nothing is said.
A run whose jobs' cost carries several projects (or experiments), its owner `several`, counts
toward each plan its attempts' cost carries: each failed attempt as its own cost carries them
(JobAttempt.owner), as the plan's actual counts its jobs' cost (it was no plan's).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from rules.context import RunCost, RunCosts
from rules.failed_reruns import FailedReruns
from service.core.config import Config
from service.core.errors import UsageError
from service.core.folding import folded
from service.core.timewindow import Window
from service.core.units import share_of
from service.planning.estimate import PlanInputs, plan_inputs
from service.planning.plans import Plan

TENTH = Decimal("0.1")
COST_COLUMN = "BilledCost"  # the actual's (attribute's default cost, billed)


@dataclass(frozen=True)
class PlanFailures:
    planned_overhead: str | None  # the estimate's failure overhead as typed; None: a plan without inputs
    planned_share: Decimal | None  # of the plan's total, the pessimistic scenario's (exact)
    actual: Decimal | None  # USD of the failed attempts run again; None: no job records of the plan's
    share: Decimal | None  # of the plan's actual (exact)
    runs: tuple[str, ...] = ()  # the runs with counted attempts, the costliest first

    def row(self) -> dict:
        """The plans row's keys (percents to a tenth)."""
        return {"planned_failure_overhead": self.planned_overhead,
                "planned_failure_pct": _pct(self.planned_share), "failed_actual": self.actual,
                "failed_pct": _pct(self.share)}

    def exceeded(self) -> bool:
        return self.share is not None and self.planned_share is not None and self.share > self.planned_share


def plan_runs(lookup: RunCosts | None, plan: Plan, until) -> Sequence[RunCost] | None:
    """The runs with a cost in `plan`'s window to `until` (the actual's end), every scope's; `lookup`:
    the section's run_costs_lookup, on its snapshot (None: no job records, and so None)."""
    return None if lookup is None or until <= plan.start else lookup(Window(plan.start, until), COST_COLUMN)


def plan_failures(config: Config, runs: Sequence[RunCost] | None, plan: Plan, actual: Decimal) -> PlanFailures:
    """`plan`'s failures (module docstring) in its window, `actual` its USD actual there; `runs`: plan_runs."""
    inputs = _inputs(plan.inputs)
    planned = None if inputs is None else _planned_share(plan, inputs)
    typed = None if inputs is None else plan.inputs.get("failure_overhead", "0")
    if runs is None:
        return PlanFailures(typed, planned, None, None)
    rule = FailedReruns.configured(config.rules)
    spent: dict[str, Decimal] = {}
    for run in runs:
        # the run's attempts of the plan's scope (all of them but in a run of several projects): the rule
        # reads every attempt of the run, a re-run of another project's attempt being a re-run all the same
        if any(of_plan(plan, attempt.owner or run.owner, run.run) for attempt in run.attempts):
            spent[run.run] = sum((a.cost for a in rule.rerun_failures(run.attempts)
                                  if of_plan(plan, a.owner or run.owner, run.run)), Decimal(0))
    if not spent:
        return PlanFailures(typed, planned, None, None)
    total = sum(spent.values(), Decimal(0))
    return PlanFailures(typed, planned, total, share_of(total, actual, Decimal("1e-12")),
                        tuple(run for run, cost in sorted(spent.items(), key=lambda item: -item[1]) if cost))


def failures_note(plan: Plan, failures: PlanFailures) -> str | None:
    """The sentence for a plan whose failed re-runs took a larger share of its actual than its
    estimate allowed for failures, else None."""
    if not failures.exceeded():
        return None
    allowed = (f"above the {_pct(failures.planned_share)}% of its total its estimate allowed for failures "
               f"(--failure-overhead {failures.planned_overhead})" if failures.planned_share else
               "where its estimate allowed nothing for failures (no --failure-overhead)")
    return (f"plan {plan.name}: failed attempts run again (the failed-reruns rule's count) cost USD "
            f"{failures.actual:,.2f} in its window, {_pct(failures.share)}% of its actual, {allowed}: "
            f"`spendlake runs --run {shlex.quote(failures.runs[0])}`"
            f"{f' (and {len(failures.runs) - 1} more runs)' if len(failures.runs) > 1 else ''} tells which attempts.")


def _inputs(stored: Mapping | None) -> PlanInputs | None:
    """The estimate's inputs as registered (a plan written before they were kept, or hand-edited: None)."""
    try:
        return plan_inputs(dict(stored)) if stored else None
    except UsageError:  # a hand edit the plans file's check let through: nothing the plan allowed can be told
        return None


def _planned_share(plan: Plan, inputs: PlanInputs) -> Decimal | None:
    """Failure ÷ (1 + every overhead) of the pessimistic compute, over its total."""
    overhead = inputs.debug_overhead.high + inputs.eval_overhead.high + inputs.failure_overhead.high
    total = plan.total_cost.high
    if not total:
        return None
    return inputs.failure_overhead.high / (1 + overhead) * plan.compute_cost.high / total


def of_plan(plan: Plan, owner, run: str) -> bool:
    """Whether `owner` (a run's or an attempt's) of `run` is in the plan's scope, its values folded as the actual
    matches them: the plan's run too, for a plan on a run (`--run`)."""
    return folded(owner.project) == folded(plan.project) and (
        plan.experiment is None or folded(owner.experiment) == folded(plan.experiment)) and (
        plan.run is None or folded(run) == folded(plan.run))


def _pct(share: Decimal | None) -> Decimal | None:
    return None if share is None else (share * 100).quantize(TENTH)
