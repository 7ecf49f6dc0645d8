"""What evaluating each run cost: the parts of jobs of job type `eval` whose `parent_run` names
the run (a Slurm comment's `parent_run=llama-405b-r1`, a pod label, a jobs file's `parent_run`
column, through the dimension's tag keys and rules as any job dimension; core.config_clusters).

    EvalCosts(config, spell): .add(kind, values, dims, currency, amount) per placed part (clusters.py), .costs()
    by_parent(costs) -> {(run lower case, currency): cost};  naming(costs, run) -> the EvalCosts naming it

The eval jobs stay their own runs, with their own cost: a run's `eval_cost` stands beside its
`cost`, never in it, and no total adds it (each of those dollars is already an eval run's).
A job whose parent_run is the dimension's default (it names none) evaluates no run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from service.core.config_attribution import AttributionConfig
from service.core.folding import folded

EVAL = "eval"  # the job type whose jobs' cost goes to the run they name
PARENT = "parent_run"
DIMS = ("run", PARENT, "job_type")  # what a placed part must carry to be counted


@dataclass(frozen=True)
class EvalCost:
    parent: str  # the run evaluated, as the parts spell it
    run: str  # the eval jobs' own run
    currency: str | None
    cost: Decimal

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
    """(run evaluated, lower case; currency) → what its eval jobs cost."""
    out: dict[tuple[str, str | None], Decimal] = defaultdict(Decimal)
    for cost in evals:
        out[(folded(cost.parent), cost.currency)] += cost.cost
    return dict(out)


def naming(evals: Sequence[EvalCost], run: str) -> tuple[EvalCost, ...]:
    """The eval runs' costs naming `run` (any case)."""
    return tuple(cost for cost in evals if folded(cost.parent) == folded(run))
