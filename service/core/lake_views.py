"""The views a query reads the lake through (service/core/lake.py's `Lake.query`): `costs` over
a snapshot's verified partitions, and one per inventory table over its checked snapshots.
Paths are bound, never pasted."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import duckdb

from service.core import job_windows
from service.core.files import TABLE_RE
from service.core.integrity import damaged_table_error
from service.core.schema import COST_COLUMNS, cost_view_select
from service.core.snapshot import Snapshot
from service.core.snapshot_pins import Pinned
from service.core.snapshot_ledger import SnapshotLake, table_files, table_names


def cost_view(con: duckdb.DuckDBPyConnection, snapshot: Snapshot) -> None:
    """`costs` over the partitions of `snapshot` (the ledger's, verified, of the configured sources)."""
    groups: dict[tuple[str, ...], list[str]] = {}  # partitions by the columns their files hold
    for check in snapshot.checks:
        groups.setdefault(check.columns, []).append(str(check.path))
    if groups:
        con.sql(" UNION ALL ".join(
            f"SELECT {cost_view_select(columns)}, source, billing_period FROM read_parquet(?, "
            "hive_partitioning = true, hive_types = {'source': VARCHAR, 'billing_period': VARCHAR})"
            for columns in groups), params=list(groups.values())).create_view("costs")
    else:
        columns = ", ".join(f"CAST(NULL AS {kind}) AS {name}" for name, kind in COST_COLUMNS)
        con.execute(
            f"CREATE OR REPLACE VIEW costs AS SELECT {columns}, "
            "CAST(NULL AS VARCHAR) AS source, CAST(NULL AS VARCHAR) AS billing_period WHERE false"
        )


def table_views(lake: SnapshotLake, con: duckdb.DuckDBPyConnection, tables: Collection[str] | None = None,
                pinned: Mapping[str, tuple[Pinned, ...]] | None = None) -> None:
    """A view per inventory table (of `tables`, default every one) over the configured
    sources' snapshots, and `job_snapshots` from the job snapshots' records as checked; a table
    `pinned` holds (a snapshot's: service/core/snapshot_pins.py) over the files it holds, as
    they were when it was taken, not those there now."""
    pinned = pinned or {}
    job_files: list[tuple[str, dict | None]] = []
    for name in table_names(lake.root):  # a table folder removed whole is missed too
        if name == "costs" or not TABLE_RE.match(name) or (tables is not None and name not in tables):
            continue
        found = ([(p.path, p.record) for p in pinned[name]] if name in pinned
                 else table_files(lake, name))  # an inventory snapshot checked against its record
        job_files = found if name == "jobs" else job_files
        files = [path for path, _ in found]
        if files:
            try:
                con.sql("SELECT * FROM read_parquet(?, hive_partitioning = true, hive_types_autocast = false)",
                        params=[files]).create_view(name)
            except duckdb.Error as exc:  # a snapshot file cut short or altered: name it
                raise damaged_table_error(con, files, exc) from None
    job_windows.create_view(con, job_windows.snapshot_rows(job_files))
