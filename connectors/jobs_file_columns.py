"""jobs-file, column-wise (connectors/jobs_file.py reads with it first): a file's cells read a
block at a time into Arrow and stored in a DuckDB temporary table (within the writer's memory
limit, spilling beyond), texts stripped in Arrow and times parsed in SQL, and the cells a month repeats
(GPU counts, states, node lists, instance ids, labels, restarts) parsed once per distinct value
by the row reader's own parsers (connectors/jobs_file_values.py).

Whatever it cannot take exactly as the row reader would answers None, and the caller reads
that file again row by row, which fails (or warns) naming file, row, line and column: a row
pyarrow's CSV parser splits otherwise than the csv module (a quoted line break, a short row,
blanks), a value that does not parse, a row without a job id or a start, an end before the
start, a job listed twice. Only such files pay the row reader's time.

Numeric times (`time_format: seconds|milliseconds|microseconds`) are counted in SQL where the
answer is exact as Python's: integers and plain decimals (text, or Parquet DECIMALs) with no more
digits than a microsecond holds, within the years the row reader takes; other spellings
(exponents, more digits), floats and values it refuses are parsed in Python, once per distinct
value, which says what is wrong with a bad one.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import IO, Any
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa

from connectors.jobs_base import JOB_COLUMNS, jobs_schema, stored, with_values
from connectors.jobs_file_values import (EARLIEST, NOT_YET, PARENT_RUN, UNIX_EPOCH, BadValue, parse_gpus, parse_instance_ids,
                                         parse_instances, parse_labels, parse_nodes, parse_restarts, parse_state,
                                         parse_time)

# The characters str.isspace() takes (tests/test_jobs_file.py checks): SQL trims as strip() does.
WHITESPACE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
              "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
TIMES = ("start_time", "end_time", "submit_time")
DECIMAL_SCALE_DIGITS = 7  # 1,000,000: the most a count is scaled by to microseconds
# ISO 8601 as both datetime.fromisoformat and DuckDB's casts read it alike; other forms are parsed in Python
CLOCK = r"\d{4}-\d{2}-\d{2}[T ]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?"
WITH_OFFSET = rf"{CLOCK}(Z|[+-]([01]\d|2[0-3]):?[0-5]\d)"  # +01:00, or strftime %z's +0100
TIME_PARAMS = {"offset": WITH_OFFSET}
_SCHEMA = jobs_schema()
# column → its parser, for the columns whose values repeat: parsed once per distinct value
PER_VALUE: dict[str, Callable[[Any], Any]] = {
    "gpus": parse_gpus, "state": parse_state, "nodes": parse_nodes, "instance_ids": parse_instance_ids,
    "labels": lambda value: _pairs(parse_labels(value)), "restarts": parse_restarts, "instances": parse_instances}
KINDS = {"instances": pa.int64()}  # the parsed type of a column `jobs` lacks


@dataclass(frozen=True)
class CountedTimes:
    """Numeric times: `per_second` of them to a second (1, 1,000 or 1,000,000), counted from
    `origin` (naive UTC; None: the Unix epoch); `parse`: the row reader's parser of a time cell,
    for what SQL leaves to Python."""
    per_second: int
    origin: datetime | None
    parse: Callable[[Any], datetime | None]

    @property
    def digits(self) -> int:
        """The decimals of a unit a microsecond holds (6 of a second, 3 of a millisecond, 0)."""
        return len(str(1_000_000 // self.per_second)) - 1

    def params(self, text: bool) -> dict[str, Any]:
        """counted_us_sql's and counted_time_sql's: for text, the plain decimals SQL counts exactly
        (18 digits, and a microsecond's decimals at most) and the words meaning no time; the
        microseconds from the origin the row reader takes (from year 1, or 2000 when counting
        from 1970, to the end of 9999)."""
        start = self.origin or UNIX_EPOCH
        first = datetime.min if self.origin else EARLIEST
        words = {"count": r"[+-]?\d{1,18}" + (rf"(\.\d{{1,{self.digits}}})?" if self.digits else ""),
                 "not_yet": sorted(NOT_YET)}
        return (words if text else {}) | {
                "first_us": (first - start) // timedelta(microseconds=1),
                "last_us": (datetime.max - start) // timedelta(microseconds=1),
                "origin_us": (start - UNIX_EPOCH) // timedelta(microseconds=1)}


class NotColumnWise(Exception):
    """A file the row reader must read: it says what is wrong, if anything is."""


def csv_file_blocks(raw: IO[bytes], gzipped: bool, header: list[str], columns: dict[str, int],
                    has_header: bool = True) -> Iterator[pa.Table]:
    """The cells of `columns` (our name → index in `header`, the csv module's reading of the
    header, or the config's names when not `has_header`) as text, a block of rows at a time;
    NotColumnWise when pyarrow reads it otherwise."""
    import pyarrow.csv as pcsv

    return csv_blocks(gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw, header, columns,
                      pcsv.ParseOptions(newlines_in_values=False), has_header)


def parquet_blocks(table: pa.Table, columns: dict[str, int]) -> Iterator[pa.Table]:
    yield pa.table({ours: table.column(index) for ours, index in columns.items()})


def column_rows(con: duckdb.DuckDBPyConnection, blocks: Iterator[pa.Table], zone: ZoneInfo,
                default_cluster: str | None, file: int, parsers: dict[str, Callable[[Any], Any]] | None = None,
                counted: CountedTimes | None = None) -> str | None:
    """The name of a temporary table of `con` holding the rows of `blocks` (cells by our column
    names; `job_id+1`, ...: more parts of the job id) as `jobs` (record_id NULL) with `_row` (0,
    1, ... in the file), `_at` (NULL) and `_file`; None when the row reader must read the file.
    `parsers`: the source's own, over PER_VALUE's (its states, GPU unit); `counted`: its
    numeric times, if it has them."""
    read = None
    odd = counted.parse if counted else lambda value: parse_time(value, zone)
    try:
        read = _stored(con, blocks, zone, PER_VALUE | (parsers or {}), counted)
        for name in TIMES:
            if _has(con, read, f"{name}_odd"):
                _odd_times(con, read, name, odd)
        if (counted is None or counted.origin is None) and _before_2000(con, read):
            return None  # the row reader fails naming the row and column (jobs_file_values.not_before_2000)
        return _jobs(con, read, default_cluster, file)
    except (NotColumnWise, BadValue):
        return None
    finally:
        if read is not None:
            con.execute(f"DROP TABLE IF EXISTS {read}").fetchall()


def _stored(con: duckdb.DuckDBPyConnection, blocks: Iterator[pa.Table], zone: ZoneInfo,
            parsers: dict[str, Callable[[Any], Any]], counted: CountedTimes | None) -> str:
    """The cells stored a block at a time: texts stripped, times parsed where SQL reads them as
    Python would (`<column>_odd`: the rest), repeated cells parsed once per distinct value by
    `parsers` (PER_VALUE's columns)."""
    table, rows, memos = None, 0, {name: {} for name in parsers}  # type: ignore[var-annotated]
    try:
        for cells in blocks:
            sql, params, columns = _block(cells, zone, parsers, memos, counted)
            columns["_row"] = pa.array(range(rows, rows + cells.num_rows), type=pa.int64())
            rows += cells.num_rows
            table = stored(con, sql, params, into=table, cells=pa.table(columns))
    except (NotColumnWise, BadValue):
        if table is not None:
            con.execute(f"DROP TABLE {table}").fetchall()
        raise
    if table is None:
        raise NotColumnWise("no block")
    return table


def _block(cells: pa.Table, zone: ZoneInfo, parsers: dict[str, Callable[[Any], Any]],
           memos: dict[str, dict[Any, Any]], counted: CountedTimes | None = None
           ) -> tuple[str, dict[str, Any], dict[str, Any]]:
    utc = zone.key == "UTC"
    columns: dict[str, Any] = {}
    stripped, parsed = [], []  # the two layers of the query: texts (stripped in Arrow) read, then times parsed
    params: dict[str, Any] = {}
    for name in cells.column_names:
        column, quoted = cells.column(name), f'"{name}"'
        if name in parsers:
            kind = KINDS[name] if name in KINDS else _SCHEMA.field(name).type
            columns[name] = per_value(column, parsers[name], kind, memo=memos[name])
            stripped.append(quoted)
            parsed.append(quoted)
        elif name in TIMES and counted and (_is_text(column.type) or pa.types.is_integer(column.type)
                                            or _exact_decimal(column.type, counted)):
            columns[name] = stripped_text(column)
            text = _is_text(column.type)
            us = counted_us_sql(quoted, text, counted, decimal=pa.types.is_decimal(column.type))
            stripped += [quoted, f'{us} AS "{name}_us"']
            parsed += counted_time_sql(name, f"({quoted} = '' OR list_contains($not_yet, lower({quoted})))"
                                       if text else "false")
            params |= counted.params(text)
        elif name in TIMES and counted and not _is_moment(column.type):  # a float, a finer decimal: Python's
            columns[name] = column
            stripped.append(quoted)
            parsed += [f"CAST(NULL AS TIMESTAMP) AS {quoted}", f'{quoted} AS "{name}_odd"']
        elif name in TIMES and _is_text(column.type):
            columns[name] = stripped_text(column)
            stripped += [quoted, f'{fast_time_sql(quoted, utc)} AS "{name}_t"']  # read once, for both of time_sql
            parsed += time_sql(name, f"({quoted} = '' OR list_contains($not_yet, lower({quoted})))", utc,
                               fast=f'"{name}_t"')
            params |= {"not_yet": sorted(NOT_YET)} | TIME_PARAMS | ({"clock": CLOCK} if utc else {})
        elif name in TIMES:
            columns[name] = column
            stripped.append(quoted)
            parsed += _typed_time_sql(name, column.type, utc)
        else:
            if not (_is_text(column.type) or pa.types.is_integer(column.type)):
                raise NotColumnWise(name)  # str() of a float or a timestamp: as Python spells it
            columns[name] = stripped_text(column)  # an integer's text has no space to strip
            stripped.append(f"nullif(CAST({quoted} AS VARCHAR), '') AS {quoted}")
            if not name.startswith("job_id+"):
                parsed.append(quoted)
    parts = sorted((name for name in cells.column_names if name.startswith("job_id+")), key=lambda n: int(n[7:]))
    if parts:  # several columns make the job id, as the row reader's joined_id
        joined = ", ".join(f'"{name}"' for name in ["job_id", *parts])
        parsed[parsed.index('"job_id"')] = f"nullif(concat_ws('/', {joined}), '') AS \"job_id\""
    return (f"SELECT {', '.join(parsed)}, _row FROM (SELECT {', '.join(stripped)}, _row FROM {{cells}}) AS t", params,
            columns)


def _before_2000(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether a time of `table` is before EARLIEST (the row reader refuses it)."""
    early = " OR ".join(f'"{name}" < $earliest' for name in TIMES if _has(con, table, name))
    return bool(early) and con.execute(f"SELECT count(*) FROM {table} WHERE {early}",
                                       {"earliest": EARLIEST}).fetchall()[0][0] > 0


def _has(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    return column in [name for (name, *_) in con.sql(f"DESCRIBE {table}").fetchall()]


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _exact_decimal(kind: pa.DataType, counted: CountedTimes) -> bool:
    """A Parquet DECIMAL SQL counts exactly in microseconds: no more decimals than a microsecond
    holds, and room for the scaling within DuckDB's 38 digits (DECIMAL_SCALE_DIGITS more)."""
    return pa.types.is_decimal(kind) and kind.scale <= counted.digits and kind.precision + DECIMAL_SCALE_DIGITS <= 38


def _is_moment(kind: pa.DataType) -> bool:
    """A Parquet timestamp or date: itself, whatever time_format says."""
    return pa.types.is_timestamp(kind) or pa.types.is_date(kind)


def counted_us_sql(value: str, text: bool, counted: CountedTimes, decimal: bool = False) -> str:
    """The microseconds from the origin that `value` (SQL: stripped text, an integer, or a
    `decimal` one of _exact_decimal) counts, where SQL counts them exactly as the row reader (an
    integer; a plain decimal with no more digits than a microsecond holds); else NULL. Binds
    CountedTimes.params."""
    scale = 1_000_000 // counted.per_second
    if text:
        return (f"CASE WHEN regexp_full_match({value}, $count) THEN "
                f"CAST(try_cast({value} AS DECIMAL(38, {counted.digits})) * {scale} AS HUGEINT) END")
    if decimal:  # no more decimals than the scale takes away (_exact_decimal): the product is whole
        return f"CAST(CAST({value} AS DECIMAL(38, {counted.digits})) * {scale} AS HUGEINT)"
    return f"CAST({value} AS HUGEINT) * {scale}"


def counted_time_sql(name: str, unset: str) -> list[str]:
    """Over `name` and `<name>_us` (counted_us_sql): the time as naive UTC where the count is 0
    (no time, as the row reader reads it) or within the years it takes, and `<name>_odd`, the
    value left to Python (which reads the rest, or says what is wrong); `unset` (SQL): a text
    meaning no time. Binds CountedTimes.params."""
    column, count = f'"{name}"', f'"{name}_us"'
    counted = f"coalesce({count} = 0 OR {count} BETWEEN $first_us AND $last_us, false)"
    return [f"CASE WHEN {count} <> 0 AND {counted} THEN make_timestamp(CAST({count} + $origin_us AS BIGINT)) END "
            f"AS {column}",
            f"CASE WHEN {column} IS NOT NULL AND NOT {unset} AND NOT {counted} THEN {column} END AS \"{name}_odd\""]


def stripped_text(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A text column stripped as str.strip() does (WHITESPACE; in Arrow, ten times the speed of
    SQL's regex and trim); any other column as it is."""
    import pyarrow.compute as pc

    return pc.utf8_trim(column, characters=WHITESPACE) if _is_text(column.type) else column


def time_sql(name: str, unset: str, utc: bool, epoch: bool = False, fast: str | None = None) -> list[str]:
    """Over the stripped text column `name`: its time as naive UTC where SQL reads it as
    datetime.fromisoformat would (ISO 8601 with seconds, an offset, or none when the zone is
    UTC), and `<name>_odd`, the text left to Python; `unset` (SQL): a text meaning no time.
    Binds TIME_PARAMS, and `clock` when `utc`; `epoch`: whole seconds since 1970 matching the
    bound `$epoch` too. `fast`: a column holding fast_time_sql of it, read once for both."""
    column = f'"{name}"'
    fast = fast or fast_time_sql(column, utc, epoch)
    return [f"CASE WHEN {column} IS NOT NULL AND NOT {unset} THEN {fast} END AS {column}",
            f"CASE WHEN {column} IS NOT NULL AND NOT {unset} AND ({fast}) IS NULL THEN {column} END AS \"{name}_odd\""]


def fast_time_sql(column: str, utc: bool, epoch: bool = False) -> str:
    """The time of the stripped text `column` where SQL reads it exactly (time_sql), else NULL."""
    return (f"CASE WHEN regexp_full_match({column}, $offset) THEN try_cast({column} AS TIMESTAMPTZ) AT TIME ZONE "
            "'UTC' " + (f"WHEN regexp_full_match({column}, $clock) THEN try_cast({column} AS TIMESTAMP) " if utc
                        else "")
            + (f"WHEN regexp_full_match({column}, $epoch) THEN make_timestamp(CAST({column} AS BIGINT) * 1000000) "
               if epoch else "") + "END")


def _typed_time_sql(name: str, kind: pa.DataType, utc: bool) -> list[str]:
    """A Parquet timestamp or date column as naive UTC; a naive one in another zone left to Python."""
    column = f'"{name}"'
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        return [f"timezone('UTC', {column}) AS {column}"]
    if (pa.types.is_timestamp(kind) or pa.types.is_date(kind)) and utc:
        return [f"CAST({column} AS TIMESTAMP) AS {column}"]
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):  # naive, in the source's zone: Python's rules
        return [f"CAST(NULL AS TIMESTAMP) AS {column}", f"{column} AS \"{name}_odd\""]
    raise NotColumnWise(name)


def _odd_times(con: duckdb.DuckDBPyConnection, table: str, name: str, parse: Callable[[Any], Any]) -> None:
    """The `<name>_odd` cells of `table` parsed in Python, once per distinct value, into `name`."""
    odd = [value for (value,) in con.sql(f'SELECT DISTINCT "{name}_odd" FROM {table} '
                                         f'WHERE "{name}_odd" IS NOT NULL').fetchall()]
    if odd:
        values = pa.table({"odd": pa.array(odd), "time": pa.array([parse(value) for value in odd], pa.timestamp("us"))})
        with_values(con, table, f'UPDATE {{table}} SET "{name}" = v.time FROM {{values}} AS v '
                                f'WHERE {{table}}."{name}_odd" = v.odd', values)


def per_value(column: pa.ChunkedArray | pa.Array, parse: Callable[[Any], Any], kind: pa.DataType, nulls: bool = True,
              memo: dict[Any, Any] | None = None) -> pa.Array:
    """`parse` of each cell, called once per distinct value (`memo`: values parsed before, in
    other blocks of the file); BadValue as `parse`. `nulls`: cells without a value are parsed
    too (else they stay without one)."""
    try:
        whole = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        encoded = whole.dictionary_encode()
    except (pa.ArrowException, NotImplementedError):
        raise NotColumnWise("no distinct values to take") from None
    if nulls and column.null_count:
        parse(None)  # raises where the row reader would
    values = encoded.dictionary.to_pylist()
    if memo is None:
        parsed = [parse(value) for value in values]
    else:
        parsed = [memo[value] if value in memo else memo.setdefault(value, parse(value)) for value in values]
    return pa.array(parsed, type=kind).take(encoded.indices)


BLOCK_BYTES = 16 << 20  # of CSV text parsed at a time: a file's cells are never all in Arrow at once


def csv_blocks(stream: IO[bytes], header: list[str], wanted: dict[str, int], parse_options: Any,
               has_header: bool = True) -> Iterator[pa.Table]:
    """The cells of `wanted` (our name → its index in `header`, as the row reader read the
    header) as text, a block of rows at a time, the header row checked and left out (without
    `has_header`, the first line is a row); NotColumnWise when pyarrow reads the file otherwise."""
    import pyarrow.csv as pcsv

    names = [f"f{index}" for index in range(len(header))]
    try:
        reader = pcsv.open_csv(
            stream, read_options=pcsv.ReadOptions(autogenerate_column_names=True, block_size=BLOCK_BYTES),
            parse_options=parse_options, convert_options=pcsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()), include_columns=[names[i] for i in wanted.values()],
                strings_can_be_null=False, quoted_strings_can_be_null=False))
        first = has_header
        for batch in reader:
            cells = pa.table({ours: batch.column(names[index]) for ours, index in wanted.items()})
            if first:  # the header, as the row reader read it
                if not cells.num_rows or [cells.column(ours)[0].as_py() for ours in wanted] != [
                        header[index] for index in wanted.values()]:
                    raise NotColumnWise("another header")
                cells, first = cells.slice(1), False
            yield cells
        if first:
            raise NotColumnWise("no header")
    except (pa.ArrowException, OSError, EOFError, ValueError) as exc:  # the row reader says what is wrong
        raise NotColumnWise(str(exc)) from None


def _pairs(labels: dict[str, str] | None) -> list[tuple[str, str]] | None:
    return None if labels is None else list(labels.items())


def _jobs(con: duckdb.DuckDBPyConnection, table: str, default_cluster: str | None, file: int) -> str:
    """The `jobs` columns (record_id NULL) with what the row reader fills in, `_row`, `_at`
    (NULL: where a row is is said by the row reader) and `_file`, unless a row lacks a job id
    (or its id holds a control character) or a start, ends before it starts (an error, or clock skew said by row) or a job is listed
    twice (said with both rows): the row reader says those."""
    have = {name for (name, *_) in con.sql(f"DESCRIBE {table}").fetchall()}
    [(bad,)] = con.sql(
        f"SELECT count(*) FILTER (WHERE job_id IS NULL OR start_time IS NULL OR end_time < start_time "
        rf"OR regexp_matches(CAST(job_id AS VARCHAR), '[\x00-\x1f\x7f]')) "
        f"+ count(*) - count(DISTINCT ({'cluster' if 'cluster' in have else 'NULL'}, job_id, start_time)) "
        f"FROM {table}").fetchall()
    if bad:
        raise NotColumnWise("a row the row reader says something of")
    end = "end_time" if "end_time" in have else "NULL"
    values = {"record_id": "NULL", "scheduler": "'file'", "run_id": "coalesce(run_id, job_id)" if "run_id" in have
              else "job_id", "cluster": "coalesce(cluster, $cluster)" if "cluster" in have else "$cluster",
              "state": f"coalesce({'state' if 'state' in have else 'NULL'}, "
                       f"CASE WHEN {end} IS NULL THEN 'RUNNING' END)",
              "gpus": "gpus * coalesce(instances, 1)" if "instances" in have else "gpus"}
    if PARENT_RUN in have:  # the row reader's with_parent_run
        labels = "labels" if "labels" in have else "CAST(NULL AS MAP(VARCHAR, VARCHAR))"
        values["labels"] = (f"CASE WHEN {PARENT_RUN} IS NULL THEN {labels} ELSE map_concat(coalesce({labels}, "
                            f"MAP()), map_from_entries([('{PARENT_RUN}', {PARENT_RUN})])) END")
    columns = ", ".join(f'CAST({values.get(name, f"{quoted}" if name in have else "NULL")} AS {kind}) AS {quoted}'
                        for name, kind, quoted in ((name, kind, f'"{name}"') for name, kind in JOB_COLUMNS))
    return stored(con, f"SELECT {columns}, _row, CAST(NULL AS VARCHAR) AS _at, CAST({int(file)} AS INTEGER) AS _file "
                       f"FROM {table}", {"cluster": default_cluster})
