"""What evaluating each run cost: the parts of jobs of job type `eval` whose `parent_run` names
the run (a Slurm comment's `parent_run=llama-405b-r1`, a pod label, a jobs file's `parent_run`
column, through the dimension's tag keys and rules as any job dimension; core.config_clusters).

    EvalCosts(config, spell): .add(kind, values, dims, currency, amount) per placed part (clusters.py), .costs()
    by_parent(costs) -> {(run lower case, currency): cost};  naming(costs, run) -> the EvalCosts naming it
    unshown(costs, runs, shown, every_run) -> (warnings, notes): what no row's eval_cost holds

The eval jobs stay their own runs, with their own cost: a run's `eval_cost` stands beside its
`cost`, never in it, and no total adds it (each of those dollars is already an eval run's).
A job whose parent_run is the dimension's default (it names none) evaluates no run; an eval run
naming itself is no eval of its own (its cost is its row's already), which a note says.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from service.core.config_attribution import AttributionConfig
from service.core.folding import folded
from service.core.suggest import ranked, suggestion
from service.core.units import amounts_text, currency_text

EVAL = "eval"  # the job type whose jobs' cost goes to the run they name
PARENT = "parent_run"
DIMS = ("run", PARENT, "job_type")  # what a placed part must carry to be counted
NAMED = 3  # eval runs a note names, the rest counted
PARENTS_SHOWN = 5  # parent_run values naming no run warned of one by one, the rest in one line
RUNS_SHOWN = 5  # run ids such a warning lists when none is close (as run_story's unknown run)


@dataclass(frozen=True)
class EvalCost:
    parent: str  # the run evaluated, as the parts spell it
    run: str  # the eval jobs' own run
    currency: str | None
    cost: Decimal

    @property
    def own(self) -> bool:
        """An eval run naming itself: its cost is its own row's `cost`, not its eval_cost too."""
        return folded(self.parent) == folded(self.run)

    def to_json(self) -> dict:
        return {"run": self.run, "currency": self.currency, "cost": format(self.cost, "f")}


class EvalCosts:
    """The eval parts of a window, summed per (run evaluated, eval run, currency)."""

    def __init__(self, config: AttributionConfig, spell: Mapping[tuple[str, str], str]):
        self.counted = PARENT in config.dimensions  # with `clusters:` (core.config_attribution)
        self.default = folded(config.dimensions[PARENT].default) if self.counted else ""
        self.spell = spell
        self.sums: dict[tuple[str, str, str | None], Decimal] = defaultdict(Decimal)

    def add(self, kind: str, values: Sequence[str | None], dims: Sequence[str], currency: str | None,
            amount: Decimal) -> None:
        """One placed part (clusters._placed: `kind` job or idle, its `values` of `dims`)."""
        if kind != "job" or not self.counted:
            return
        at = {d: values[dims.index(d)] for d in DIMS}
        parent = at[PARENT]
        if folded(at["job_type"] or "") != EVAL or not parent or folded(parent) == self.default:
            return
        self.sums[(self._spelled(PARENT, parent), self._spelled("run", at["run"] or ""), currency)] += amount

    def _spelled(self, dim: str, value: str) -> str:
        return self.spell.get((dim, value), value)

    def costs(self) -> tuple[EvalCost, ...]:
        """Each (run evaluated, eval run, currency) and its cost, the costliest first per currency."""
        return tuple(sorted((EvalCost(parent, run, currency, cost) for (parent, run, currency), cost
                             in self.sums.items()), key=lambda e: (e.currency or "~", -e.cost, e.parent, e.run)))


def by_parent(evals: Sequence[EvalCost]) -> dict[tuple[str, str | None], Decimal]:
    """(run evaluated, lower case; currency) → what its eval jobs cost (an eval run naming itself: none)."""
    out: dict[tuple[str, str | None], Decimal] = defaultdict(Decimal)
    for cost in evals:
        if not cost.own:
            out[(folded(cost.parent), cost.currency)] += cost.cost
    return dict(out)


def naming(evals: Sequence[EvalCost], run: str) -> tuple[EvalCost, ...]:
    """The eval runs' costs naming `run` (any case), itself not among them."""
    return tuple(cost for cost in evals if folded(cost.parent) == folded(run) and not cost.own)


def unshown(evals: Sequence[EvalCost], runs: Mapping[str, str], shown: Mapping[str, Collection[str | None]],
            every_run: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What of `evals` no row's eval_cost holds, said: (warnings, notes). `runs`: each run of the
    window with a row (lower case → as spelt); `shown`: those the answer shows → their rows'
    currencies; `every_run`: every run asked (not one run's story), so a parent_run naming none is told.
    - warnings: a parent_run that no run of the window is (a misspelt or renamed run, or one whose
      jobs ran outside the window), its eval runs' cost and the closest run ids, one a line;
    - notes: a run's eval runs in a currency it has no row in (its cost in USD, an eval billed in
      EUR: eval_cost is in its row's currency), the amount; an eval run naming itself."""
    parents: dict[str, list[EvalCost]] = defaultdict(list)
    for cost in evals:
        parents[folded(cost.parent)].append(cost)
    warnings, notes = [], []
    ghosts = {parent: costs for parent, costs in parents.items() if parent not in runs}
    known = list(runs.values())
    for parent, costs in list(ghosts.items())[:PARENTS_SHOWN] if every_run else ():
        named = costs[0].parent
        closest = suggestion(named, known, "run ids", first=ranked(named, known), shown=RUNS_SHOWN)
        warnings.append(f"eval jobs name parent_run {named!r}, which no run of the window is (a misspelt or renamed "
                        f"run, or one whose jobs ran outside the window): their {_cost_of(costs)} is in no run's "
                        f"eval_cost; {closest}")
    if every_run and len(ghosts) > PARENTS_SHOWN:
        rest = [cost for costs in list(ghosts.values())[PARENTS_SHOWN:] for cost in costs]
        warnings.append(f"{len(ghosts) - PARENTS_SHOWN} more parent_run values name no run of the window: their eval "
                        f"runs' {_amounts(rest)} is in no run's eval_cost")
    for parent, currencies in sorted(shown.items()):  # by run id: the same notes in the same order
        apart = [cost for cost in parents.get(parent, ()) if not cost.own and cost.currency not in currencies]
        if apart:
            notes.append(f"eval runs naming run {runs[parent]} cost {_cost_of(apart)}, a currency {runs[parent]} "
                         f"has no row in (its rows: {', '.join(sorted(currency_text(c) for c in currencies))}): its "
                         "eval_cost, in its row's currency, leaves that out")
        own = [cost for cost in parents.get(parent, ()) if cost.own]
        if own:
            notes.append(f"eval run {runs[parent]} names itself as its parent_run: its {_amounts(own)} is its own "
                         "cost, not its eval_cost too")
    return tuple(warnings), tuple(notes)


def _amounts(costs: Sequence[EvalCost]) -> str:
    """`EUR 200.00, USD 40.00`: their sum per currency."""
    sums: dict[str | None, Decimal] = defaultdict(Decimal)
    for cost in costs:
        sums[cost.currency] += cost.cost
    return amounts_text(sums.items())


def _cost_of(costs: Sequence[EvalCost]) -> str:
    """`USD 20.00 (evghost)`: their sum per currency and the eval runs, the first NAMED of them by name."""
    runs = list(dict.fromkeys(cost.run for cost in costs))
    more = f" and {len(runs) - NAMED} more" if len(runs) > NAMED else ""
    return f"{_amounts(costs)} ({', '.join(runs[:NAMED])}{more})"
