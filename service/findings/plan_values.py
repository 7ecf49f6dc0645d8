"""A plan's project, experiment and run against the lake's cost lines, which plan vs actual matches
folded, as `attribute --where` does: each value spelt as the lines carry it, and what no line
carries, alone or together, whose $0 actual is no saving (a misspelt value, or an experiment or
a run of another project)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from service.attribution import attribute
from service.core.config import Config
from service.core.coverage import data_end, snapshot_data_end
from service.core.folding import composed, folded
from service.core.lake import Lake
from service.core.snapshot import Snapshot
from service.core.timewindow import Window
from service.planning.plans import Plan

SHOWN = 5  # the experiment's projects named


def lake_window(lake: Lake, snapshot: Snapshot | None = None) -> Window | None:
    """From the first billing period's start to where the lake's data ends (in `snapshot`'s lake
    state when given); None without a bill."""
    if snapshot is None:
        end, periods = data_end(lake), sorted(e.billing_period for e in lake.ledger())
    else:
        end, periods = snapshot_data_end(lake, snapshot), sorted(c.entry.billing_period for c in snapshot.checks
                                                                 if c.entry)
    if end is None or not periods:
        return None
    since = datetime.strptime(periods[0], "%Y-%m").replace(tzinfo=timezone.utc)
    return Window(since, max(end, since + timedelta(hours=1)))


def as_billed(lake: Lake, config: Config, plan: Plan) -> tuple[Plan, list[str]]:
    """`plan` with its project, experiment and run (`--run`: attribute's run dimension, job records'
    ids) each spelt as the lines carrying it spell it
    (`PRETRAIN` as `pretrain`; a bill written both ways, composed), and a sentence for each
    value no line carries yet (with the closest ones) or, each carried, for an experiment or run no
    line carries with the project (`_apart`). The plan as given while the lake holds no bill."""
    window = lake_window(lake)
    if window is None:
        return plan, []
    spelt, problems, projects = {}, [], {}
    for dim, value in (("project", plan.project), ("experiment", plan.experiment), ("run", plan.run)):
        if value is None:
            continue
        by = (dim,) if dim == "project" else (dim, "project")
        result = attribute(lake, config, window, by=by, where={dim: (value,)})
        spelt[dim] = _spelling([row.values[dim] for row in result.rows], value)
        problems += [f"no cost line in the lake carries {dim} {value!r} yet; {hint}" for _, _, hint in result.unmatched]
        projects[dim] = {row.values["project"] for row in result.rows}
    plan = replace(plan, project=spelt["project"], experiment=spelt.get("experiment"), run=spelt.get("run"))
    apart = None if problems else next(filter(None, (_apart(plan, dim, found) for dim, found in projects.items()
                                                     if dim != "project")), None)
    return plan, problems + ([f"no cost line in the lake carries {apart[1]} yet; {apart[2]}"] if apart else [])


def unpaired(lake: Lake, config: Config, plan: Plan,
             snapshot: Snapshot | None = None) -> tuple[str, str, str] | None:
    """(dimension, what, why) when no line of the lake carries the plan's experiment (or run) with
    its project, though lines carry each: `experiment 'sft-chat-v5' with project 'llama-70b'`, `run
    'r2' with project 'llm'` (its jobs carry another project); read in `snapshot` (a command's) when
    given."""
    window = lake_window(lake, snapshot)
    for dim in ("experiment", "run"):
        if getattr(plan, dim) is None or window is None:
            continue
        result = attribute(lake, config, window, by=("project",), where={dim: (getattr(plan, dim),)},
                           snapshot=snapshot)
        apart = None if result.unmatched else _apart(plan, dim, {row.values["project"] for row in result.rows})
        if apart:
            return apart
    return None


def _apart(plan: Plan, dim: str, projects: set[str]) -> tuple[str, str, str] | None:
    """(dim, what, why) when `projects`, those the lines of the plan's experiment or run (`dim`)
    carry, lack its project."""
    if not projects or folded(plan.project) in {folded(p) for p in projects}:
        return None
    listed, value = sorted(projects), getattr(plan, dim)
    return (dim, f"{dim} {value!r} with project {plan.project!r}",
            f"{dim} {value}'s lines carry project {', '.join(listed[:SHOWN])}"
            + (", ..." if len(listed) > SHOWN else ""))


def _spelling(values: list[str], typed: str) -> str:
    """A bill written both ways holds the value composed and decomposed: the composed one, as
    typed would be; `typed` when no line carries it."""
    return min(values, key=lambda v: (v != composed(v), v), default=typed)
