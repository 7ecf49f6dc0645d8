"""Metric tops: the spend a `/metrics` scrape shows, computed when the lake changes.

A scrape shows, for each window (24h, 7d, mtd, ending at the data's end: service.core.coverage),
the USD spend of the `top_n` largest (team, project) pairs and experiments with the rest summed
under `other`, and each dimension's unallocated share. Finding the largest means summing every
value of the window (a million experiments: a million groups), so the writers of the lake do it
once per lake state: `build_tops`, after the rollups, under the ingest lock. The answer is a
few hundred rows: `<lake>/metric_tops/source=all/config=<owner>/<data>.parquet`, where `owner`
is the attribution config and `top_n`, and `data` the ledger's deliveries and the inventory
tags attribution read, so the name says which lake state it describes. `read_tops` (the
scrape) reads that file; finding none for the lake's state, it computes the same rows for that
scrape only (`compute_tops`), writing nothing.

The sums are the attribution's (service/attribution/api.py): DuckDB groups the rollups of the
window by value; the lines cut by the window's edge are prorated exactly, as `attribute`
does; only the candidates for the top (ties included) reach Python. With shared-cost rules a
split needs every value's direct spend, so the whole attribution runs in Python.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from service.attribution.compute import ROLLUP_VIEW, RollupSession, attributed_sums, prorate
from service.attribution.rollup import ROLLUP_FORMAT, inventory_basis, inventory_latest
from service.attribution.sql import dim_col, window_sql
from service.core.config import Config
from service.core.coverage import data_end
from service.core.lake import Lake
from service.core.snapshot import Snapshot, read_consistently
from service.core.timewindow import Window, relative_window
from service.core.units import OTHER, top_keys

log = logging.getLogger(__name__)

TOPS_TABLE = "metric_tops"
TOPS_FORMAT = "1"  # bump when the file's columns or meaning change
USD = "USD"
DIMENSIONS = ("team", "project", "experiment")
WINDOWS = ("24h", "7d", "mtd")
# family → the dimensions its labels are, in order
FAMILIES = {"spend": ("team", "project"), "experiment": ("experiment",)}
SCHEMA = pa.schema([("anchor", pa.timestamp("us", tz="UTC")), ("family", pa.string()), ("window", pa.string()),
                    ("labels", pa.list_(pa.string())), ("value", pa.string())])


@dataclass(frozen=True)
class Top:
    """One sample: `family` is spend (team, project), experiment (experiment,), unallocated
    (dimension,) or anchor (no labels: the anchor was computed, whatever the lake holds)."""

    anchor: datetime
    family: str
    window: str
    labels: tuple[str, ...]
    value: Decimal


def windows(end: datetime) -> dict[str, Window]:
    """The metrics' windows, ending at `end` (the data's end): `mtd` is the month holding the
    data's last instant."""
    return {name: relative_window(name, end) for name in WINDOWS}


def metrics_anchor(lake: Lake, now: datetime) -> datetime:
    """Where the metrics' windows end: the lake's data end, or `now` for a lake without data."""
    return data_end(lake) or now


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tops_file(lake: Lake, config: Config, snapshot: Snapshot) -> Path:
    """Where the tops of `config` for the lake state `snapshot` (and today's inventory) are."""
    owner = _hash(f"{TOPS_FORMAT}|{config.attribution.fingerprint()}|{config.service.top_n}")
    deliveries = ";".join(sorted(f"{c.source}|{c.period}|{c.entry.delivery_id}|{c.entry.ingested_at}|{c.entry.rows}"
                                 for c in snapshot.checks))
    data = _hash(f"{ROLLUP_FORMAT}|{deliveries}|{inventory_basis(inventory_latest(lake))}")
    folder = lake.partition_file(TOPS_TABLE, [("source", "all"), ("config", owner)]).parent
    return folder / f"{data}.parquet"


def read_tops(lake: Lake, config: Config, now: datetime) -> list[Top]:
    """The tops the last build stored for this lake state, else computed now (in memory,
    nothing written)."""
    end = metrics_anchor(lake, now)
    try:
        table = pq.read_table(tops_file(lake, config, lake.snapshot()), filters=[("anchor", "=", end)])
    except FileNotFoundError:  # not built yet, or superseded since the snapshot: compute
        table = None
    if table is not None and table.num_rows:
        tops = [Top(row["anchor"], row["family"], row["window"], tuple(row["labels"]), Decimal(row["value"]))
                for row in table.to_pylist()]
    else:
        log.info("metrics: no stored tops for this lake state (the next ingest or `spendlake rollup` stores "
                 "them); computing them for this scrape")
        tops = compute_tops(lake, config, end)
    return [top for top in tops if top.family != "anchor"]


def build_tops(lake: Lake, config: Config) -> bool:
    """Store the tops of the lake's current state unless stored, and remove this config's tops
    of other states (a scrape that finds its file gone computes in memory). Call only while
    holding the ingest lock. True when they were computed."""
    snapshot = lake.snapshot()
    target = tops_file(lake, config, snapshot)
    owner = target.parent.name.split("=", 1)[1]
    end = data_end(lake)
    built = end is not None and not target.exists()
    if built:
        rows = [{"anchor": t.anchor, "family": t.family, "window": t.window, "labels": list(t.labels),
                 "value": format(t.value, "f")} for t in compute_tops(lake, config, end, snapshot)]
        con = lake.connect()
        try:
            lake.commit_snapshot(con, con.from_arrow(pa.Table.from_pylist(rows, schema=SCHEMA)), table=TOPS_TABLE,
                                 source="all", key="config", value=owner, version=target.stem)
        finally:
            con.close()
    lake.drop_versions(TOPS_TABLE, "all", "config", owner,
                       [f.stem for f in target.parent.glob("*.parquet") if f != target])
    return built


def compute_tops(lake: Lake, config: Config, end: datetime, snapshot: Snapshot | None = None) -> list[Top]:
    """The tops of the windows ending at `end`, from one state of the lake; writes nothing.
    The first row (family `anchor`) says they were computed, whatever the lake holds."""
    if snapshot is not None:
        return _compute(lake, config, end, snapshot)
    return read_consistently(lake, lambda snap: _compute(lake, config, end, snap))


def _compute(lake: Lake, config: Config, end: datetime, snapshot: Snapshot) -> list[Top]:
    tops = [Top(end, "anchor", "", (), Decimal(0))]
    if not snapshot.checks:
        return tops
    session = RollupSession(lake, config.attribution, snapshot)
    try:
        for name, window in windows(end).items():
            tops += _WindowSums(session, config, window).tops(end, name)
    finally:
        session.con.close()
    return tops


class _WindowSums:
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
