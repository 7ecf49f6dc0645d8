"""The `spend` group of the metric tops: USD spend of the `top_n` largest (team, project)
pairs and experiments per window, the rest under `other`, and each dimension's unallocated
share (families `spend` (team, project, folded), `experiment` (experiment, folded),
`unallocated` (dimension,)). `folded` is "" for a ranked value and "true" for the rest (`other`
of each label), so a team or experiment named `other` is not summed into it (as a run's).

Finding the largest means summing every value of the window (a million experiments: a
million groups): the window's groups are the report's (service/attribution/ranked.py:
DuckDB groups the rollups by value, the lines cut by the window's edges are prorated exactly,
as `attribute` does; with shared-cost rules the split runs in Python); only the candidates for
the top (ties included) reach Python.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from service.attribution.compute import RollupSession
from service.attribution.metric_top import USD, Top, windows
from service.attribution.ranked import WindowGroups
from service.core.config import Config
from service.core.folding import folded
from service.core.timewindow import Window
from service.core.units import OTHER, top_keys

DIMENSIONS = ("team", "project", "experiment")
# family → the dimensions its labels are, in order
FAMILIES = {"spend": ("team", "project"), "experiment": ("experiment",)}


def spend_tops(session: RollupSession, config: Config, end: datetime) -> list[Top]:
    tops: list[Top] = []
    for name, window in windows(end).items():
        with WindowSums(session, config, window) as sums:
            tops += sums.tops(end, name)
    return tops


class WindowSums:
    """USD sums of one window by (team, project, experiment): the window's groups as the
    report ranks them (`WindowGroups`, kept in DuckDB), read for one currency."""

    def __init__(self, session: RollupSession, config: Config, window: Window):
        self.session, self.top_n = session, config.service.top_n
        self.defaults = [folded(config.attribution.dimensions[d].default) for d in DIMENSIONS]
        self.groups = WindowGroups(session, config, window, DIMENSIONS)
        self.con, self.table = self.groups.con, self.groups.table

    def __enter__(self) -> WindowSums:
        return self

    def __exit__(self, *exc) -> None:
        self.groups.__exit__(*exc)

    def tops(self, anchor: datetime, window: str) -> list[Top]:
        filters = ", ".join(f"sum(amount) FILTER (WHERE d{i} = ${i + 2})" for i in range(len(DIMENSIONS)))
        total, *placed_nowhere = self.con.execute(
            f"SELECT sum(amount), {filters} FROM {self.table} WHERE currency = $1", [USD, *self.defaults]).fetchall()[0]
        if total is None:
            return []
        found = []
        for family, dims in FAMILIES.items():
            for labels, value in sorted(self._folded(dims, total).items()):
                found.append(Top(anchor, family, window, labels, value))
        if total > 0:
            for dim, amount in zip(DIMENSIONS, placed_nowhere):
                found.append(Top(anchor, "unallocated", window, (dim,), (amount or Decimal(0)) / total))
        return found

    def _folded(self, dims: tuple[str, ...], total: Decimal) -> dict[tuple[str, ...], Decimal]:
        """The `top_n` largest label tuples (as spelled, folded "") and the rest (`other`, ..., "true"):
        DuckDB ranks the groups; only the candidates (the top and its ties) reach Python."""
        group = ", ".join(f"d{DIMENSIONS.index(d)}" for d in dims)
        candidates = self.con.execute(
            f"SELECT {group}, sum(amount) AS cost, count(*) OVER () AS groups FROM {self.table} "
            f"WHERE currency = $2 GROUP BY {group} QUALIFY rank() OVER (ORDER BY sum(amount) DESC) <= $1",
            [self.top_n, USD]).fetchall()
        if not candidates:
            return {}
        spell = {dim: self.session.spellings_of(dim, sorted({row[i] for row in candidates}))
                 for i, dim in enumerate(dims)}
        values = {tuple(spell[d].get(v, v) for d, v in zip(dims, row[:-2])): row[-2] for row in candidates}
        kept = {(*key, ""): values[key] for key in top_keys(values, self.top_n)}
        if candidates[0][-1] > len(kept):  # more groups than kept: the rest is `other`
            kept[(*(OTHER,) * len(dims), "true")] = total - sum(kept.values(), Decimal(0))
        return kept
