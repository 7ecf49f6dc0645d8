"""Ranked attribution: the few largest groups of a window and per-currency totals, with the
groups kept in DuckDB (the daily report's top experiments and unallocated shares: a million
experiments are summed and ranked there). What reaches Python: the candidates for the top
(ties included), one row per currency, and the groups of charge periods cut by the window's
edges (prorated exactly, as `attribute` prorates them; none in a window of whole days of
hourly and daily lines).

The sums are `attribute`'s to the last decimal: the same SQL (per partition, the same
dimensions), charge periods cut by the window prorated per row as `attribute` prorates
them, shared costs split by `attributed_sums`. A split needs every value's direct spend, so
with shared rules (or on Spark) the sums are made in Python and then ranked in DuckDB.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timezone
from decimal import Decimal

from service.attribution.sessions import read_sessions, sql_dims
from service.attribution.compute import ROLLUP_VIEW, RollupSession, attributed_sums, prorate
from service.attribution.needs import Needs
from service.attribution.window_sql import window_sql
from service.core.config import Config
from service.core.connection import isolated_connection
from service.core.folding import folded
from service.core.lake import Lake
from service.core.timewindow import Window

COST = "billed"
_tables = itertools.count()


@dataclass(frozen=True)
class RankedGroup:
    """One group of the top: its values as shown, and for each detail dimension its one value
    across the group's lines (as shown), or None when the group spans several."""

    values: dict[str, str]
    currency: str | None
    cost: Decimal
    details: dict[str, str | None]


@dataclass(frozen=True)
class Ranked:
    top: list[RankedGroup]
    totals: dict[str | None, Decimal]  # currency → the window's total, as `attribute(by=by)` totals it


@dataclass(frozen=True)
class DefaultShare:
    currency: str | None
    default_cost: Decimal  # on the values `attribute(by=(dim,))` shows as the dimension's default
    total: Decimal


def top_groups(lake: Lake, config: Config, window: Window, by: Sequence[str], details: Sequence[str], top: int) -> Ranked:
    """The `top` groups of `by` (per currency, ranked across currencies as `attribute(by=by +
    details)` rows summed per group would rank: cost descending, then shown values, then
    currency), each with its detail dimensions, and the window's totals per currency."""
    def answer(session: RollupSession | None) -> Ranked:
        if session is None:
            return Ranked([], {})
        with WindowGroups(session, config, window, (*by, *details)) as groups:
            return Ranked(groups.top(tuple(by), tuple(details), top), groups.totals())
    return read_sessions(lake, config.attribution, config.engine, answer,
                         Needs(sql_dims(config.attribution, (*by, *details), {}), (COST,)))


def default_shares(lake: Lake, config: Config, window: Window, dims: Sequence[str]) -> dict[str, list[DefaultShare]]:
    """Per dimension and currency (in currency order): the cost `attribute(by=(dim,))` shows
    on the dimension's default value, and its total."""
    def answer(session: RollupSession | None) -> dict[str, list[DefaultShare]]:
        shares: dict[str, list[DefaultShare]] = {}
        for dim in dims if session is not None else ():
            default = config.attribution.dimensions[dim].default
            with WindowGroups(session, config, window, (dim,)) as groups:
                key = folded(default)
                shown = session.spellings_of(dim, [key]).get(key, key) == default
                on_default = groups.cost_of(dim, key) if shown else {}
                shares[dim] = [DefaultShare(currency, on_default.get(currency, Decimal(0)), total)
                               for currency, total in sorted(groups.totals().items(), key=lambda i: i[0] or "")]
        return shares
    return read_sessions(lake, config.attribution, config.engine, answer,
                         Needs(sql_dims(config.attribution, tuple(dims), {}), (COST,)))


class WindowGroups:
    """The window's billed cost grouped by currency and `dims` (lowercase values), in a DuckDB
    temporary table: the session's connection, or an in-memory one for a Spark session."""

    def __init__(self, session: RollupSession, config: Config, window: Window, dims: tuple[str, ...]):
        self.session, self.dims = session, dims
        self.local = session.local
        self.con = session.con if self.local else isolated_connection()
        self.table = f"window_groups_{next(_tables)}"
        self.columns = [f"d{i}" for i in range(len(dims))]
        computed = sql_dims(config.attribution, dims, {})
        if self.local and not config.attribution.shared:
            self._from_rollups(window, computed)
        else:
            self._from_sums(config, window, computed)

    def __enter__(self) -> WindowGroups:
        return self

    def __exit__(self, *_) -> None:
        self.con.execute(f"DROP TABLE IF EXISTS {self.table}")
        if not self.local:
            self.con.close()

    def _from_rollups(self, window: Window, computed: tuple[str, ...]) -> None:
        """Inside the window DuckDB sums; each row cut by its edges is prorated as
        `attribute` prorates it and added to its group."""
        since, until = (moment.astimezone(timezone.utc).replace(tzinfo=None) for moment in (window.since, window.until))
        sql = window_sql(ROLLUP_VIEW, computed, COST, "total", since, until, explain=False, per_partition=True)
        names = ", ".join(["period", "edge_start", "edge_end", "currency", "shared",
                           *(f"c{i}" for i in range(len(computed))), "source", "billing_period", "amount"])
        picked = ", ".join(f"c{computed.index(d)} AS {c}" for d, c in zip(self.dims, self.columns))
        parts = f"{self.table}_parts"
        self.con.execute(f"CREATE TEMP TABLE {parts} AS SELECT edge_start, edge_end, currency, {picked}, amount "
                         f"FROM ({sql.text}) AS w({names}) WHERE amount IS NOT NULL", sql.params)
        cols = ", ".join(self.columns)
        self.con.execute(f"CREATE TEMP TABLE {self.table} AS SELECT currency, {cols}, sum(amount) AS amount "
                         f"FROM {parts} WHERE edge_start IS NULL GROUP BY currency, {cols}")
        cut: dict[tuple, Decimal] = defaultdict(Decimal)
        for edge_start, edge_end, *key, amount in self.con.execute(
                f"SELECT edge_start, edge_end, currency, {cols}, amount FROM {parts} "
                "WHERE edge_start IS NOT NULL").fetchall():
            [(_, part)] = prorate(amount, edge_start, edge_end, max(edge_start, since), min(edge_end, until), "total")
            cut[tuple(key)] += part
        self.con.execute(f"DROP TABLE {parts}")
        self._insert(cut)

    def _from_sums(self, config: Config, window: Window, computed: tuple[str, ...]) -> None:
        sums = attributed_sums(self.session.con, config.attribution, computed, COST, "total", window, False,
                               per_partition=True)
        grouped: dict[tuple, Decimal] = defaultdict(Decimal)
        while sums:
            (_, currency, _, values, _), amount = sums.popitem()
            grouped[(currency, *(values[computed.index(d)] for d in self.dims))] += amount
        self.con.execute(f"CREATE TEMP TABLE {self.table} (currency VARCHAR, "
                         + "".join(f"{c} VARCHAR, " for c in self.columns) + "amount DECIMAL(38,12))")
        self._insert(grouped)

    def _insert(self, sums: dict[tuple, Decimal]) -> None:
        """Add the groups `sums` ((currency, *values) → amount) to the table, bound as lists, not
        as an Arrow table: pyarrow imports pandas for its first array built from Python objects
        (0.2 CPU s, 0.4 s of an ingest's metric tops, for the one or few groups cut by an edge)."""
        if not sums:
            return
        keys = list(sums)
        values = [[key[i] for key in keys] for i in range(len(self.columns) + 1)]
        amounts = [format(sums[key], "f") for key in keys]  # exact: text cast to the table's decimal
        lists = "".join(f"unnest(${i + 1}::VARCHAR[]), " for i in range(len(values)))
        amount = f"unnest(${len(values) + 1}::VARCHAR[])::DECIMAL(38,12)"
        self.con.execute(f"INSERT INTO {self.table} SELECT {lists}{amount}", [*values, amounts])

    def totals(self) -> dict[str | None, Decimal]:
        return dict(self.con.execute(f"SELECT currency, sum(amount) FROM {self.table} GROUP BY currency").fetchall())

    def cost_of(self, dim: str, key: str) -> dict[str | None, Decimal]:
        """Currency → the cost whose (lowercase) value of `dim` is `key`."""
        column = self.columns[self.dims.index(dim)]
        return dict(self.con.execute(f"SELECT currency, sum(amount) FROM {self.table} WHERE {column} = $1 "
                                     "GROUP BY currency", [key]).fetchall())

    def top(self, by: tuple[str, ...], details: tuple[str, ...], n: int) -> list[RankedGroup]:
        """DuckDB ranks the groups; the candidates (the top and its ties) are ranked here on
        their shown values, as `attribute` rows would be, and cut to `n`."""
        group = ", ".join(self.columns[self.dims.index(d)] for d in by)
        detail = "".join(f", count(DISTINCT {c}), min({c})" for c in (self.columns[self.dims.index(d)] for d in details))
        candidates = self.con.execute(
            f"SELECT {group}, currency, sum(amount){detail} FROM {self.table} GROUP BY {group}, currency "
            "QUALIFY rank() OVER (ORDER BY sum(amount) DESC) <= $1", [n]).fetchall()
        wanted: dict[str, set[str]] = defaultdict(set)
        for row in candidates:
            for dim, value in zip(by, row):
                wanted[dim].add(value)
            for i, dim in enumerate(details):
                if row[len(by) + 2 + 2 * i] == 1:
                    wanted[dim].add(row[len(by) + 3 + 2 * i])
        spell = {dim: self.session.spellings_of(dim, sorted(keys)) for dim, keys in wanted.items()}
        found = []
        for row in candidates:
            values = {dim: spell[dim].get(value, value) for dim, value in zip(by, row)}
            shown: dict[str, str | None] = {}
            for i, dim in enumerate(details):
                distinct, value = row[len(by) + 2 + 2 * i: len(by) + 4 + 2 * i]
                shown[dim] = spell[dim].get(value, value) if distinct == 1 else None
            found.append(RankedGroup(values, row[len(by)], row[len(by) + 1], shown))
        found.sort(key=lambda g: (-g.cost, tuple(g.values.values()), g.currency or ""))
        return found[:n]
