"""The `spend` group of the metric tops: USD spend of the `top_n` largest (team, project)
pairs and experiments per window, the rest under `other`, and each dimension's unallocated
share (families `spend` (team, project), `experiment` (experiment,), `unallocated` (dimension,)).

Finding the largest means summing every value of the window (a million experiments: a
million groups): DuckDB groups the rollups of the window by value; the lines cut by the
window's edge are prorated exactly, as `attribute` does; only the candidates for the top (ties
included) reach Python. With shared-cost rules a split needs every value's direct spend, so the
whole attribution runs in Python.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from decimal import Decimal

import pyarrow as pa

from service.attribution.compute import ROLLUP_VIEW, RollupSession, attributed_sums, prorate
from service.attribution.metric_top import USD, Top, windows
from service.attribution.sql import dim_col, window_sql
from service.core.config import Config
from service.core.timewindow import Window
from service.core.units import OTHER, top_keys

DIMENSIONS = ("team", "project", "experiment")
# family → the dimensions its labels are, in order
FAMILIES = {"spend": ("team", "project"), "experiment": ("experiment",)}


def spend_tops(session: RollupSession, config: Config, end: datetime) -> list[Top]:
    tops: list[Top] = []
    for name, window in windows(end).items():
        tops += WindowSums(session, config, window).tops(end, name)
    return tops


class WindowSums:
    """USD sums of one window by (team, project, experiment), kept in DuckDB."""

    TABLE = "tops_window_sums"
    PARTS = "tops_window_parts"

    def __init__(self, session: RollupSession, config: Config, window: Window):
        self.session, self.config, self.con = session, config, session.con
        self.top_n = config.service.top_n
        self.defaults = {d: config.attribution.dimensions[d].default.strip().lower() for d in DIMENSIONS}
        self.con.execute(f"DROP TABLE IF EXISTS {self.TABLE}")
        self.con.execute(f"DROP TABLE IF EXISTS {self.PARTS}")
        if config.attribution.shared:
            self._from_attribution(window)
        else:
            self._from_rollups(window)

    def _from_rollups(self, window: Window) -> None:
        """Inside the window DuckDB sums; the parts of lines cut by its edges are prorated
        exactly (`prorate`, as `attribute` does) and added to the same groups."""
        since, until = (moment.astimezone(timezone.utc).replace(tzinfo=None) for moment in (window.since, window.until))
        sql = window_sql(ROLLUP_VIEW, DIMENSIONS, "billed", "total", since, until, explain=False, per_partition=False)
        names = "period, edge_start, edge_end, currency, shared, d0, d1, d2, amount"
        self.con.execute(f"CREATE TEMP TABLE {self.PARTS} AS SELECT * FROM ({sql.text}) AS w({names}) "
                         f"WHERE currency = '{USD}'", sql.params)
        self.con.execute(f"CREATE TEMP TABLE {self.TABLE} AS SELECT d0, d1, d2, sum(amount) AS amount "
                         f"FROM {self.PARTS} WHERE edge_start IS NULL AND amount IS NOT NULL GROUP BY d0, d1, d2")
        cut: dict[tuple[str, ...], Decimal] = defaultdict(Decimal)
        for edge_start, edge_end, *values, amount in self.con.execute(
                f"SELECT edge_start, edge_end, d0, d1, d2, amount FROM {self.PARTS} "
                "WHERE edge_start IS NOT NULL AND amount IS NOT NULL").fetchall():
            [(_, part)] = prorate(amount, edge_start, edge_end, max(edge_start, since), min(edge_end, until), "total")
            cut[tuple(values)] += part
        self.con.execute(f"DROP TABLE {self.PARTS}")
        self._add_rows(cut)

    def _from_attribution(self, window: Window) -> None:
        sums = defaultdict(Decimal)
        for (_, currency, _, values, _), amount in attributed_sums(
                self.con, self.config.attribution, DIMENSIONS, "billed", "total", window, False, False).items():
            if currency == USD:
                sums[values] += amount
        self.con.execute(f"CREATE TEMP TABLE {self.TABLE} (d0 VARCHAR, d1 VARCHAR, d2 VARCHAR, amount DECIMAL(38,12))")
        self._add_rows(sums)

    def _add_rows(self, sums: dict[tuple[str, ...], Decimal]) -> None:
        if not sums:
            return
        rows = pa.table({"d0": [k[0] for k in sums], "d1": [k[1] for k in sums], "d2": [k[2] for k in sums],
                         "amount": pa.array(list(sums.values()), type=pa.decimal128(38, 12))})
        self.con.register("tops_cut_rows", rows)
        self.con.execute(f"INSERT INTO {self.TABLE} SELECT d0, d1, d2, amount FROM tops_cut_rows")
        self.con.unregister("tops_cut_rows")

    def tops(self, anchor: datetime, window: str) -> list[Top]:
        total, *placed_nowhere = self.con.execute(
            f"SELECT sum(amount), sum(amount) FILTER (WHERE d0 = $1), sum(amount) FILTER (WHERE d1 = $2), "
            f"sum(amount) FILTER (WHERE d2 = $3) FROM {self.TABLE}",
            [self.defaults[d] for d in DIMENSIONS]).fetchone()
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
        """The `top_n` largest label tuples (as spelled) and `other`, as `fold_top` folds them:
        DuckDB ranks the groups; only the candidates (the top and its ties) reach Python."""
        group = ", ".join(f"d{DIMENSIONS.index(d)}" for d in dims)
        candidates = self.con.execute(
            f"SELECT {group}, sum(amount) AS cost, count(*) OVER () AS groups FROM {self.TABLE} GROUP BY {group} "
            "QUALIFY rank() OVER (ORDER BY sum(amount) DESC) <= $1", [self.top_n]).fetchall()
        if not candidates:
            return {}
        spell = self._spellings(dims, candidates)
        values = {tuple(spell.get((d, v), v) for d, v in zip(dims, row[:-2])): row[-2] for row in candidates}
        kept = {key: values[key] for key in top_keys(values, self.top_n)}
        if candidates[0][-1] > len(kept):  # more groups than kept: the rest is `other`
            other = (OTHER,) * len(dims)
            kept[other] = kept.get(other, Decimal(0)) + total - sum(kept.values(), Decimal(0))
        return kept

    def _spellings(self, dims: tuple[str, ...], rows: list[tuple]) -> dict[tuple[str, str], str]:
        """(dimension, lowercase value) → the most common spelling, for the candidates only."""
        best: dict[tuple[str, str], tuple[int, str]] = {}
        for i, dim in enumerate(dims):
            keys = sorted({row[i] for row in rows})
            for key, spelling, lines in self.con.execute(
                    f"SELECT lower({dim_col(dim)}), {dim_col(dim)}, sum(lines) FROM {ROLLUP_VIEW} "
                    f"WHERE list_contains($1, lower({dim_col(dim)})) GROUP BY ALL", [keys]).fetchall():
                rank = (-int(lines), spelling)
                if (dim, key) not in best or rank < best[(dim, key)]:
                    best[(dim, key)] = rank
        return {k: v[1] for k, v in best.items()}
