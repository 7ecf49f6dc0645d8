"""What an export file's path and footer tell without reading its rows (connectors.exportfile opens the rows).

- `hive_partitions`: the `key=value` folders above a file (`SubAccountId=…/`), the columns a
  Hive-partitioned export writes only into its folder names.
- `parquet_periods`: a Parquet file's billing period from its footer.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from pathlib import Path, PurePosixPath
from urllib.parse import unquote


def parquet_periods(path: Path, column: str) -> list[str] | None:
    """The one billing period (UTC month) of a Parquet file whose `column` (a top-level
    timestamp or date, case-insensitive) has min/max statistics and no nulls in every row
    group, all in one month: a read of the footer instead of the rows. None otherwise (no
    statistics, nulls, text, several months, no rows): the caller reads the rows."""
    from pyarrow import ArrowException, parquet as pq  # loaded to read, not to configure or query
    try:
        meta = pq.read_metadata(path)
    except (OSError, ArrowException):
        return None  # reading the rows reports what is wrong with the file
    paths = [meta.schema.column(i).path.lower() for i in range(meta.num_columns)]
    if paths.count(column.lower()) != 1:
        return None
    index = paths.index(column.lower())
    months: set[str] = set()
    for group in range(meta.num_row_groups):
        if meta.row_group(group).num_rows == 0:
            continue
        stats = meta.row_group(group).column(index).statistics
        if stats is None or not stats.has_min_max or not stats.has_null_count or stats.null_count:
            return None
        for value in (stats.min, stats.max):
            if isinstance(value, datetime) and value.tzinfo is not None:
                value = value.astimezone(timezone.utc)
            elif not isinstance(value, date):  # a datetime is a date too
                return None
            months.add(value.strftime("%Y-%m"))
    return sorted(months) if len(months) == 1 else None


# How Hive writers name a NULL partition value (Spark and Hive; DuckDB).
HIVE_NULLS = ("__HIVE_DEFAULT_PARTITION__", "NULL")


def hive_partitions(uri: str) -> list[tuple[str, str | None]]:
    """The `key=value` folders of a file's path (S3 key or local path), values URL-decoded
    and kept as text (no guessing: `SubAccountId=000123` stays `000123`); a key given twice
    (in any case) takes the deepest folder's value."""
    found: dict[str, tuple[str, str | None]] = {}
    for folder in PurePosixPath(uri.removeprefix("s3://")).parent.parts:
        key, equals, value = folder.partition("=")
        if equals and key:
            found.pop(key.lower(), None)
            found[key.lower()] = (key, None if value in HIVE_NULLS else unquote(value))
    return list(found.values())
