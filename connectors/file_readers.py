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


def json_reader(con: duckdb.DuckDBPyConnection, path: Path, uri: str) -> duckdb.DuckDBPyRelation:
    """read_json of a JSON-lines (or JSON array) file, its columns' types found from every line
    (sample_size -1) once, then given to the reader (`columns`) that the view is made of: a view
    of the sampling reader samples the whole file again at each statement that binds it (a
    gcp-billing ingest of JSON lines took 7x the CPU of one read). A file with a date or time column
    keeps the sampling reader: the format it detected (`10-01-2026`) is not given back."""
    options = {"format": "auto", "hive_partitioning": False}
    sampled = file_reader(con, "read_json", path, {**options, "sample_size": -1}, uri)
    if any(map(_has_time, sampled.types)):
        return sampled
    types = {name: str(kind) for name, kind in zip(sampled.columns, sampled.types)}
    given = file_reader(con, "read_json", path, {**options, "columns": types}, uri)
    return given if list(map(str, given.types)) == list(types.values()) else sampled


def _has_time(kind: duckdb.DuckDBPyType) -> bool:
    """A DATE, TIME or TIMESTAMP type, or one nested in a list, struct or map."""
    if kind.id.startswith(("date", "time")):
        return True
    return kind.id in ("list", "array", "struct", "map", "union") and any(
        _has_time(child) for _, child in kind.children if isinstance(child, duckdb.sqltypes.DuckDBPyType))
