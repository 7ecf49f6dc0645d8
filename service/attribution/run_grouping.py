"""The runs' rows as `spendlake runs` shows them: those whose last job's state `--state` names
(`kept_by_state`; one run it leaves out says so in its story, `state_noted`), grouped by `by`, the
costliest group first and the costliest row first in each, `top` per group with the rest folded
into one `other` row, and the totals per group and currency of all of them (`arranged`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from decimal import Decimal

from service.attribution.run_figures import StoryFigures
from service.attribution.run_inputs import VALUES
from service.attribution.run_query import RunsQuery
from service.attribution.run_result import GPU_HOURS_QUANTUM, OTHER, RunRow, RunsResult, RunTotal
from service.attribution.run_story import RunStory


def kept_by_state(query: RunsQuery, rows: list[RunRow]) -> tuple[list[RunRow], tuple[str, ...]]:
    """The rows whose last job's state `--state` names (all without it), and the last states it did not name."""
    left_out = tuple(sorted({r.state.upper() for r in rows if r.state} - set(query.states))) if query.states else ()
    return [r for r in rows if not query.states or (r.state or "").upper() in query.states], left_out


def state_noted(story: RunStory | None, query: RunsQuery, rows: list[RunRow], kept: list[RunRow]) -> RunStory | None:
    """One run that `state` leaves out says so and how its last job ended (an empty answer alone
    reads as a run without jobs), and shows none of its jobs, as it shows no row."""
    if story is None or kept or not rows:
        return story
    ended = " and ".join(sorted({r.state or "no state" for r in rows}))
    return replace(story, jobs=(), instances=(), figures=StoryFigures(), evals=(), notes=(
        *story.notes, f"run {rows[0].run!r} is left out by the state filter ({' or '.join(query.states)}): its last "
        f"job ended {ended}"))


def arranged(query: RunsQuery, rows: list[RunRow], overbooked: int) -> RunsResult:
    """Groups costliest first, the rows in each too; `top` per group with the rest as `other`; totals."""
    groups: dict[tuple, list[RunRow]] = defaultdict(list)
    for row in rows:
        groups[row.group(query.by)].append(row)
    kept, totals = [], []
    for group in sorted(groups, key=lambda g: (_costliest(groups[g]), tuple(v or "" for v in g))):
        members = sorted(groups[group], key=lambda r: (r.currency or "~", -r.cost, r.run))
        per_currency: dict[str | None, list[RunRow]] = defaultdict(list)
        for row in members:
            per_currency[row.currency].append(row)
        for currency, these in per_currency.items():
            totals.append(RunTotal(group, currency, len(these), sum(r.jobs for r in these),
                                   sum((r.exact_hours for r in these), Decimal(0)).quantize(GPU_HOURS_QUANTUM),
                                   sum((r.cost for r in these), Decimal(0))))
            if query.top is None or len(these) <= query.top:
                kept += these
                continue
            kept += these[:query.top]
            rest = these[query.top:]
            values = {d: None for d in VALUES} | {d: v for d, v in zip(query.by, group) if d != "state"}
            held = sum((r.exact_hours for r in rest), Decimal(0))
            kept.append(RunRow(OTHER, values, sum(r.jobs for r in rest), sum(r.restarts for r in rest), None,
                               held.quantize(GPU_HOURS_QUANTUM),
                               sum((r.cost for r in rest), Decimal(0)), currency,
                               group[query.by.index("state")] if "state" in query.by else None, None, None, None,
                               sum((r.priced_hours or Decimal(0) for r in rest), Decimal(0)), len(rest), held,
                               sum((r.eval_cost for r in rest), Decimal(0))))
    return RunsResult(query, tuple(kept), tuple(totals), overbooked=overbooked)


def _costliest(rows: list[RunRow]) -> tuple[str, Decimal]:
    """A group's place: its cost in its first currency (as its rows come, those without one last),
    the larger first; amounts of two currencies are not compared."""
    sums: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        sums[row.currency or "~"] += row.cost
    return min((currency, -cost) for currency, cost in sums.items())
