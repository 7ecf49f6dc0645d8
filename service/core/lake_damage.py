"""Damage a DuckDB error does not name (bytes altered inside a data page): the lake's files
checked against their records, else read whole, until the damaged one is found and named
with the command that writes it again (service/cli/main.py, service/serve/app.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from service.core.errors import DataError, resource_error
from service.core.lake_file_errors import damaged_lake_file
from service.core.integrity import partition_error
from service.core.snapshot_ledger import snapshot_checks, snapshot_error
from service.core.snapshot_pins import KEPT

# DuckDB errors about the SQL, not the bytes read: no reason to hash the lake
NOT_DAMAGE = ("BinderException", "ParserException", "CatalogException", "InterruptException")


def unnamed_damage(lake, exc: BaseException) -> DataError | None:
    """For a DuckDB error that names no file (bytes altered inside a data page): the lake's
    files hashed against their records, the damaged ones named; then the other files (rollups,
    metric tops, snapshots written before records) read whole, the first that fails named with
    the command that writes it again; None when all are whole."""
    if type(exc).__module__ not in ("duckdb", "_duckdb") or resource_error(exc) is not None \
            or type(exc).__name__ in NOT_DAMAGE:
        return None
    try:
        checks = snapshot_checks(lake, deep=True)
        snapshots = [c for c in checks if not c.ok]
        if snapshots:
            return snapshot_error(snapshots)
        costs = [c for c in lake.cost_checks(deep=True) if not c.ok]
        if costs:
            return partition_error(costs)
        hashed = {Path(c.path) for c in checks if c.state == "ok"}
        return _unreadable(lake, [path for path in sorted(lake.root.glob("[a-z]*/source=*/*=*/*.parquet"))
                                  if path.parts[-4] != "costs" and path not in hashed
                                  and not path.name.startswith(KEPT)])  # a hashed snapshot's other name
    except (OSError, DataError):
        return None


def _unreadable(lake, files: Sequence[Path]) -> DataError | None:
    """The first of `files` DuckDB cannot read whole, named by damaged_lake_file."""
    with lake.connect() as con:
        for path in files:
            try:
                con.sql("SELECT * FROM read_parquet(?)", params=[str(path)]).to_arrow_table()  # every page decoded
            except Exception as each:  # noqa: BLE001 - any DuckDB error reading it is damage
                damaged = damaged_lake_file(each, str(path))
                if damaged is not None:
                    return damaged
    return None
