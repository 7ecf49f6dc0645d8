"""The cluster jobs a plan on an experiment leaves out: a plan registered on a project and an
experiment counts the spend whose lines carry both (service/report/sections/plans.py), so where
its run's jobs carry the run but not the experiment (a sacct comment `run=bert-r1`, no
`experiment=`), its actual holds only the experiment's other lines (its storage), reads under
plan, and nothing said so, while `spendlake runs --run bert-r1` gives the run's cost.

Where the lake has job records (`attribution.clusters`), the plans section names, for a plan with
an experiment, the runs with a cost in its window (`plan_runs`) whose attempts' cost carries its
project but another experiment, where the run is the plan's (named as its experiment or as the
plan) or the experiment is unknown (the experiment dimension's `default`: the jobs carry none),
and how to count them: register the plan on the run (`estimate --register NAME --run RUN`: its
actual is then the run's jobs' cost, whatever experiment they carry). A plan already on a run is
said nothing of: its scope is what it was told. A run of the project labelled with another known
experiment is another experiment's, and said nothing of; runs with no experiment not named as the
plan are said only where together they come to `TOGETHER_SHARE` of the plan's actual or more: the
demo's ad-hoc debug jobs of its plan's project (40 runs named by job id, USD 2,423 of an actual of
1.5M, 0.16%) are not its run. The costliest `NAMED` are named, the rest folded into "and N more
runs".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from decimal import Decimal
from shlex import quote

from rules.context import RunCost
from service.core.config import Config
from service.core.folding import folded
from service.core.units import amounts_text
from service.planning.plans import Plan
from service.report.plan_later_runs import TOGETHER_SHARE

NAMED = 3
OutsideRun = tuple[str, str, Decimal]  # the run, the experiment its jobs' cost carries, its USD of the plan's project


def outside_runs(runs: Sequence[RunCost] | None, plan: Plan, unknown: str, actual: Decimal) -> list[OutsideRun]:
    """Those of `runs` (plan_runs: None without job records) whose attempts of the plan's project carry
    another experiment than the plan's, where the run is the plan's or the experiment `unknown` (the
    dimension's default; those not the plan's run only where together they come to TOGETHER_SHARE of
    `actual`, the plan's USD actual), the costliest first; [] for a plan without an experiment or on a run."""
    if plan.experiment is None or plan.run is not None:
        return []
    project, experiment, unknown = folded(plan.project), folded(plan.experiment), folded(unknown)
    named = {experiment, folded(plan.name)}
    spent: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for run in runs or ():
        for attempt in run.attempts:
            owner = attempt.owner or run.owner
            carried = folded(owner.experiment)
            if (attempt.currency == "USD" and folded(owner.project) == project and carried != experiment
                    and (folded(run.run) in named or carried == unknown)):
                spent[run.run, owner.experiment] += attempt.cost
    unnamed = sum((cost for (run, _), cost in spent.items() if folded(run) not in named), Decimal(0))
    return sorted(((run, carried, cost) for (run, carried), cost in spent.items()
                   if cost and (folded(run) in named or unnamed >= actual * TOGETHER_SHARE)),
                  key=lambda item: (-item[2], item[0], item[1]))


def outside_note(config: Config, runs: Sequence[RunCost] | None, plan: Plan, actual: Decimal) -> str | None:
    """The sentence naming the runs the plan leaves out (outside_runs' of `runs`, plan_runs', `actual`
    its USD actual), and how to count them in the plan, else None."""
    unknown = config.attribution.dimensions["experiment"].default
    return _note(plan, outside_runs(runs, plan, unknown, actual), unknown)


def _note(plan: Plan, runs: list[OutsideRun], unknown: str) -> str | None:
    if not runs:
        return None
    named, rest = runs[:NAMED], runs[NAMED:]
    said = ", ".join(f"run {run} ({amounts_text([('USD', cost)])}, "
                     f"{'no experiment' if folded(carried) == folded(unknown) else f'experiment {carried}'})"
                     for run, carried, cost in named)
    more = f" and {len(rest)} more runs ({amounts_text([('USD', sum(c for *_, c in rest))])})" if rest else ""
    first = quote(named[0][0])
    return (f"plan {plan.name} counts project {plan.project}, experiment {plan.experiment} only: the cluster jobs of "
            f"{said}{more} in its window carry project {plan.project} but not experiment {plan.experiment}, so its "
            f"actual leaves them out (`spendlake runs --run {first}` gives their cost). Register the plan on its run "
            f"(`spendlake estimate ... --register {quote(plan.name)} --project {quote(plan.project)} --run {first} "
            f"--start {plan.start.date()}`): its actual is then the run's jobs' cost, whatever experiment they carry.")
