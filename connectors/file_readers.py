"""The DuckDB table function an export file is opened with (read_parquet, read_json), its
path and options bound as parameters, never pasted into SQL text, and the columns of what it
reads (connectors.exportfile.open_table)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from service.core.errors import duckdb_error


def file_reader(con: duckdb.DuckDBPyConnection, function: str, path: Path | list[str], options: dict[str, object],
                uri: str) -> duckdb.DuckDBPyRelation:
    """`SELECT * FROM function(path, option = value, ...)` with the path and values bound."""
    named = "".join(f", {name} = ?" for name in options)
    try:
        return con.sql(f"SELECT * FROM {function}(?{named})", params=[path if isinstance(path, list) else str(path), *options.values()])
    except duckdb.Error as exc:
        raise duckdb_error(exc, "cannot read the file", where=uri,
                           hint="check that it is a complete, UTF-8 export file") from None


def columns_of(relation: duckdb.DuckDBPyRelation) -> dict[str, tuple[str, duckdb.DuckDBPyType]]:
    """A relation's columns by lowercase name: (name as read, type)."""
    return {name.lower(): (name, kind) for name, kind in zip(relation.columns, relation.types)}
