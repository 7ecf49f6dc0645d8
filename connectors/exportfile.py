"""Opening plain export files (FOCUS, GCP billing, Azure cost details) in DuckDB.

Shared by the file-based connectors that have no manifest (connectors.folder_export):

- `open_table`: one file, or a run of Parquet files with one schema (`ParquetRun`), as a
  DuckDB FROM clause plus its column names and types. CSV is read as text (money columns as
  DECIMAL(38,18) by the CSV reader itself unless the connector keeps them text, so a bad value
  fails with the file, line and column, and what the lake's 12 decimals round away is known);
  Parquet and JSON keep their types. Hive folder names (`SubAccountId=…/`) above the file give
  the columns the file lacks, as text.
- SQL builders for exact money and UTC timestamps, which fail loudly with the file and column
  instead of turning a bad value into NULL (tags: connectors.tagsql).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import duckdb

from connectors.csvfile import RESAVED_ID_PROBLEM, csv_header, ident, read_csv, unless_resaved_id
from connectors.export_formats import looks_like
from connectors.file_facts import hive_partitions
from connectors.file_readers import columns_of, file_reader, json_reader
from connectors.storage import suffix_of
from service.core.errors import DataError, duckdb_error
from service.core.hidden_columns import FILE_INDEX, rounded_away_sql
from service.core.schema import MONEY

CSV_SUFFIXES = (".csv", ".csv.gz")
# CSV money as the reader parses it: 6 decimals more than the lake keeps, so what the lake's
# 12 round away is known (service.core.hidden_columns.rounded_away_sql); values below 1e20.
CSV_MONEY = "DECIMAL(38,18)"
PARQUET_SUFFIXES = (".parquet",)
JSON_SUFFIXES = (".json", ".jsonl", ".json.gz", ".jsonl.gz")
NOT_A_NUMBER = "not a number"
DECIMAL_RE = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")


def sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class Table:
    """One export file (or a ParquetRun) opened in DuckDB: its FROM clause and its columns."""

    uri: str  # a run's first file's
    source: str  # the name of a view over the file — a FROM item
    columns: dict[str, tuple[str, duckdb.DuckDBPyType]]  # lower-case name → (name, type)
    row_uri: str | None = None  # a run's: SQL of each row's file (its view has FILE_INDEX)
    # lower-case names of the columns whose empty text the reader already gives as NULL (a CSV's
    # fields read with '' among its null strings, quoted or not): `text` need not compare them
    blank_is_null: frozenset[str] = frozenset()

    @property
    def file_column(self) -> str:
        """What a SELECT over a run lists after its columns: each row's FILE_INDEX for the stager."""
        return f", {FILE_INDEX}" if self.row_uri else ""

    def name(self, *candidates: str) -> str | None:
        """The file's spelling of the first candidate column it has (case-insensitive)."""
        for candidate in candidates:
            if candidate.lower() in self.columns:
                return self.columns[candidate.lower()][0]
        return None

    def col(self, *candidates: str) -> str | None:
        return None if (name := self.name(*candidates)) is None else ident(name)

    def type_of(self, name: str) -> duckdb.DuckDBPyType:
        return self.columns[name.lower()][1]

    def text(self, name: str) -> str:
        """Column `name` as text, NULL where empty. The CSV reader's fields need no `nullif`: it
        reads an empty field, quoted or not, as NULL, and the comparison on every text column
        cost 0.5 CPU s per 1M lines of a FOCUS CSV (bench/README.md)."""
        as_text = f"CAST({ident(name)} AS VARCHAR)"
        return as_text if name.lower() in self.blank_is_null else f"nullif({as_text}, '')"

    def require(self, *names: str | tuple[str, ...], kind: str) -> None:
        """Each name (or tuple of alternatives) must be a column, else a DataError naming it, and
        what the file looks like when that is an export another kind than `kind` reads."""
        for name in names:
            alternatives = (name,) if isinstance(name, str) else name
            if self.name(*alternatives) is None:
                names = " or ".join(repr(a) for a in alternatives)
                found = looks_like((column for column, _ in self.columns.values()), (kind,))
                raise DataError(f"required column {names} is missing", where=self.uri,
                                hint=found or "is this the export kind configured for the source?")

    def fail(self, column: str, problem: str, value_sql: str) -> str:
        """SQL that aborts the read with the file, column and offending value."""
        prefix = (f"{self.row_uri} || {sql_string(f': column {column}: {problem}: ')}" if self.row_uri
                  else sql_string(f"{self.uri}: column {column}: {problem}: "))
        return f"error({prefix} || CAST({value_sql} AS VARCHAR))"


@dataclass(frozen=True)
class ParquetRun:
    """Files with the same Hive folder keys and the same Parquet schema, or the same CSV header
    (connectors.folder_export.same_schema_runs), opened as one table: one read of them all,
    planned once. CSV files are the local plain copies (connectors.csvfile.local_csv)."""

    paths: tuple[Path, ...]
    uris: tuple[str, ...]


def open_table(con: duckdb.DuckDBPyConnection, path: Path | ParquetRun, uri: str, *, money: Iterable[str] = (),
               nullstr: tuple[str, ...] = ("",), money_type: str = CSV_MONEY,
               header_name: Callable[[str], str] | None = None) -> Table:
    """Open a CSV, Parquet or JSON-lines export file (or a ParquetRun) as a view of `con`.

    CSV: every column is text, except those named in `money` (case-insensitive), which the
    CSV reader parses as exact decimals (CSV_MONEY) so a bad value names its line and column (the
    dialect and columns are given, nothing is sniffed: connectors.csvfile). `money_type`
    VARCHAR: they stay text, parsed in SQL (connectors.focus locates a bad value's line). The
    path and the reader's options are bound as parameters, never pasted into SQL text.
    `header_name`: the name a CSV header field is read under (Azure's localized headers).
    """
    if isinstance(path, ParquetRun):
        return _open_run(con, path, dict(money=money, nullstr=nullstr, money_type=money_type, header_name=header_name))
    if path.stat().st_size == 0:
        raise DataError("the file is empty", where=uri, hint="re-export it; an export with no rows still has a header")
    suffix = suffix_of(PurePosixPath(uri).name)
    blank_is_null: frozenset[str] = frozenset()
    if suffix in CSV_SUFFIXES:
        relation = _csv_relation(con, [path], uri, money=money, nullstr=nullstr, money_type=money_type,
                                 header_name=header_name)
        blank_is_null = frozenset(columns_of(relation) if "" in nullstr else ())
    elif suffix in PARQUET_SUFFIXES:
        relation = file_reader(con, "read_parquet", path, {"hive_partitioning": False}, uri)
    elif suffix in JSON_SUFFIXES:
        relation = json_reader(con, path, uri)
    else:
        raise DataError(f"unsupported file type {suffix!r}", where=uri,
                        hint="expected CSV, CSV.gz, Parquet or JSON lines")
    columns = columns_of(relation)
    partitions = [(k, v) for k, v in hive_partitions(uri) if k.lower() not in columns]
    if partitions:  # a column written only into the folder names (Hive), e.g. SubAccountId=…/
        text = duckdb.sqltype("VARCHAR")
        relation = relation.select(duckdb.StarExpression(),
                                   *(duckdb.ConstantExpression(v).cast(text).alias(k) for k, v in partitions))
        columns |= {k.lower(): (k, text) for k, _ in partitions}
    view = f"export_{uuid.uuid4().hex}"
    relation.create_view(view)
    return Table(uri, view, columns, blank_is_null=blank_is_null)


def _csv_relation(con: duckdb.DuckDBPyConnection, paths: list[Path], uri: str, *, money: Iterable[str],
                  nullstr: tuple[str, ...], money_type: str, header_name: Callable[[str], str] | None,
                  numbered: bool = False) -> duckdb.DuckDBPyRelation:
    """CSV file(s) sharing the first's header, as open_table reads them (`numbered`: each row's
    file_index follows the columns)."""
    try:
        header = None if header_name is None else [header_name(field) for field in csv_header(paths[0], uri)]
        relation, _ = read_csv(con, paths, uri, types={m.lower(): money_type for m in money}, nullstr=nullstr,
                               header=header, numbered=numbered)
        return relation
    except duckdb.Error as exc:
        raise duckdb_error(exc, "cannot read the file", where=uri,
                           hint="check that it is a complete, UTF-8 export file") from None


def _open_run(con: duckdb.DuckDBPyConnection, run: ParquetRun, csv: dict[str, object]) -> Table:
    """A ParquetRun as open_table opens each of its files, plus FILE_INDEX: the Hive values are
    picked per row from a list by file, not one relation per file. `csv`: open_table's CSV options."""
    for path, uri in zip(run.paths, run.uris):
        if path.stat().st_size == 0:
            raise DataError("the file is empty", where=uri,
                            hint="re-export it; an export with no rows still has a header")
    blank_is_null: frozenset[str] = frozenset()
    if suffix_of(PurePosixPath(run.uris[0]).name) in CSV_SUFFIXES:
        relation = _csv_relation(con, list(run.paths), run.uris[0], numbered=True, **csv)
        files = f"export_{uuid.uuid4().hex}"
        relation.create_view(files)
        source, params = f"SELECT * FROM {files}", []
        relation = con.sql(f"SELECT * EXCLUDE (file_index) FROM {files}")
        blank_is_null = frozenset(columns_of(relation) if "" in csv["nullstr"] else ())
    else:
        relation = file_reader(con, "read_parquet", [str(p) for p in run.paths], {"hive_partitioning": False},
                               run.uris[0])
        source, params = "SELECT *, file_index FROM read_parquet(?, hive_partitioning = false)", [
            [str(p) for p in run.paths]]
    columns = columns_of(relation)
    number = "CAST(file_index AS INTEGER)"
    text = duckdb.sqltype("VARCHAR")
    hive = []  # the files' folder keys are the same (same_schema_runs); their values differ
    for key, _ in hive_partitions(run.uris[0]):
        if key.lower() not in columns:
            values = [dict(hive_partitions(uri))[key] for uri in run.uris]
            hive.append(f", {_text_list(values)}[{number} + 1] AS {ident(key)}")
            columns[key.lower()] = (key, text)
    view = f"export_{uuid.uuid4().hex}"
    try:
        con.sql(f"SELECT * EXCLUDE (file_index){''.join(hive)}, {number} AS {FILE_INDEX} FROM ({source})",
                params=params).create_view(view)
    except duckdb.Error as exc:
        raise duckdb_error(exc, "cannot read the file", where=run.uris[0],
                           hint="check that it is a complete, UTF-8 export file") from None
    return Table(run.uris[0], view, columns, row_uri=f"{_text_list(run.uris)}[{FILE_INDEX} + 1]",
                 blank_is_null=blank_is_null)


def _text_list(values: Iterable[str | None]) -> str:
    return "([" + ", ".join("NULL" if v is None else sql_string(v) for v in values) + "]::VARCHAR[])"


# ---- typed expressions ---------------------------------------------------------------------
# Each value is parsed once: `coalesce(parsed, error(...))` only evaluates the error for
# rows whose parse failed, so a bad value stops the read naming file, column and value.

def nonblank(sql: str) -> str:
    return f"nullif(trim(CAST({sql} AS VARCHAR)), '')"


def parsed_as_given_or_fail(table: Table, sql: str, parse: Callable[[str], str], column: str, problem: str) -> str:
    """parsed_or_fail over nonblank(sql), trimming only where the text as given does not parse
    (`parse`: SQL, NULL then); trimming every value cost 0.1 CPU s per 1M values and column."""
    given, raw = f"CAST({sql} AS VARCHAR)", nonblank(sql)
    return (f"(CASE WHEN {given} IS NULL THEN NULL ELSE coalesce({parse(given)}, "
            f"CASE WHEN {raw} IS NOT NULL THEN coalesce({parse(raw)}, {table.fail(column, problem, raw)}) END) END)")


def _integer_digits(decimal_type: str) -> int:
    return int(DECIMAL_RE.match(decimal_type).group(1)) - int(DECIMAL_RE.match(decimal_type).group(2))


def parsed_or_fail(table: Table, raw: str, parsed: str, column: str, problem: str) -> str:
    return f"(CASE WHEN {raw} IS NULL THEN NULL ELSE coalesce({parsed}, {table.fail(column, problem, raw)}) END)"


def is_record_list(kind: duckdb.DuckDBPyType, *fields: str) -> bool:
    """A list of records holding each of `fields` (lowercase; matched in any case): how BigQuery,
    which has no map type, writes a map ({key, value, …}) or a line's credits ({name, amount, …})."""
    return kind.id == "list" and kind.child.id == "struct" and set(fields) <= {
        field.lower() for field, _ in kind.child.children}


def amounts_sum(records: str) -> str:
    """The sum of a list of records' `amount`s (SQL) as MONEY: 0 for an empty or NULL list."""
    amounts = f"list_transform({records}, lambda c: CAST(CAST(c.amount AS VARCHAR) AS {MONEY}))"
    return f"coalesce(list_sum({amounts}), CAST(0 AS {MONEY}))"


def money_sql(table: Table, sql: str, column: str, kind: duckdb.DuckDBPyType | None, target: str = MONEY) -> str:
    """Exact DECIMAL(38,12) (or `target`) from text, decimals or floats (a float via its shortest
    text); a decimal of another scale is cast as such (half away from zero, as from text)."""
    if kind is not None and str(kind) == target:
        return sql
    if kind is not None and str(kind).startswith("DECIMAL("):
        if _integer_digits(str(kind)) <= _integer_digits(target):  # cannot overflow: a plain cast, the very
            return f"CAST({sql} AS {target})"  # expression rounded_away_sql subtracts, so DuckDB computes it once
        return parsed_or_fail(table, sql, f"TRY_CAST({sql} AS {target})", column, "out of range")
    return parsed_as_given_or_fail(table, sql, lambda text: f"TRY_CAST({text} AS {target})", column, NOT_A_NUMBER)


def money(table: Table, *candidates: str) -> str | None:
    """The first candidate cost column the file has; two of them present is an error."""
    return decimal(table, MONEY, *candidates)


def decimal(table: Table, target: str, *candidates: str) -> str | None:
    """The first candidate column as the exact decimal type `target` (money or a quantity);
    two of the candidates present is an error: which one holds the value is never guessed."""
    present = [table.name(c) for c in candidates if table.name(c) is not None]
    if len(present) > 1:
        raise DataError(f"the value is in two columns: {' and '.join(repr(p) for p in present)}", where=table.uri,
                        hint="keep one of them and re-export; spendlake does not guess which holds the cost")
    name = present[0] if present else None
    return None if name is None else money_sql(table, ident(name), name, table.type_of(name), target)


def rounded_away(table: Table, *candidates: str) -> str | None:
    """What the lake's 12 decimals round away from the first candidate money column the file has
    (service.core.hidden_columns.rounded_away_sql); None when it has none or it cannot hold more than 12."""
    name = table.name(*candidates)
    too_large = name and table.fail(name, "more than 12 decimals on a value of 1e20 or more (what the lake's "
                                          "12 decimals round away cannot be summed exactly)", nonblank(ident(name)))
    return None if name is None else rounded_away_sql(ident(name), str(table.type_of(name)), too_large)


def json_text(table: Table, *candidates: str) -> str | None:
    """A JSON column as its text: as written in CSV, serialised from a Parquet map or struct."""
    name = table.name(*candidates)
    if name is None:
        return None
    kind = str(table.type_of(name))
    if kind.startswith(("MAP(", "STRUCT(")) or kind.endswith("[]"):
        return f"CAST(to_json({ident(name)}) AS VARCHAR)"
    return table.text(name)


def timestamp_sql(table: Table, sql: str, column: str, kind: duckdb.DuckDBPyType | None,
                  formats: tuple[str, ...] = ()) -> str:
    """A naive UTC TIMESTAMP. Text may use 'T' or ' ', 'Z', an offset or ' UTC', with or
    without seconds; `formats` (strptime) are for US dates such as 9/2/2023, which must
    never be guessed (DuckDB's sniffer reads 09/01/2023 as 9 January); year-first ISO 8601
    text is read beside them (`2024-05-01T00:00:00.0000000Z`, as Azure's APIs write it)."""
    kind_name = str(kind) if kind is not None else "VARCHAR"
    if kind_name == "TIMESTAMP WITH TIME ZONE":
        return utc_naive(sql)
    if kind_name.startswith("TIMESTAMP") or kind_name == "DATE":
        return f"CAST({sql} AS TIMESTAMP)"
    raw = nonblank(sql)
    if formats:
        listed = "[" + ", ".join(sql_string(f) for f in formats) + "]"
        parsed = f"coalesce(try_strptime({raw}, {listed}), {utc_naive(f'TRY_CAST({raw} AS TIMESTAMPTZ)')})"
        return parsed_or_fail(table, raw, parsed, column, f"not a date ({' or '.join(formats)}, or ISO 8601)")
    return parsed_as_given_or_fail(table, sql, lambda text: utc_naive(f"TRY_CAST({text} AS TIMESTAMPTZ)"), column,
                                   "not a date/time")


def utc_naive(sql: str) -> str:
    """A TIMESTAMPTZ as the naive UTC TIMESTAMP from its microseconds (ICU's `timezone('UTC', …)`
    cost 0.1 CPU s per 1M values); through ICU where that is NULL: ±infinity."""
    return f"coalesce(make_timestamp(epoch_us({sql})), timezone('UTC', {sql}))"


def timestamp(table: Table, *candidates: str, formats: tuple[str, ...] = ()) -> str | None:
    name = table.name(*candidates)
    return None if name is None else timestamp_sql(table, ident(name), name, table.type_of(name), formats)


def timestamp_per_value(table: Table, *candidates: str, formats: tuple[str, ...] = ()) -> str | None:
    """`timestamp` as SQL over a text column `value`, for the stager to run once per distinct
    text (service.core.per_value): a month's hourly charge periods are 744 texts, and parsing
    them on every line was a third of a FOCUS CSV's SELECT. None when the column is absent or
    typed (a Parquet time: nothing to parse)."""
    name = table.name(*candidates)
    if name is None or str(table.type_of(name)) != "VARCHAR":
        return None
    return timestamp_sql(table, ident("value"), name, table.type_of(name), formats)


def text(table: Table, *candidates: str) -> str | None:
    name = table.name(*candidates)
    return None if name is None else table.text(name)


def identifier(table: Table, *candidates: str) -> str | None:
    """`text` of an id column (an account, a resource), failing the read on a value a spreadsheet
    rewrote in scientific notation, which would otherwise be kept as a wrong account."""
    name = table.name(*candidates)
    if name is None:
        return None
    return unless_resaved_id(table.text(name),
                             lambda value: table.fail(name, RESAVED_ID_PROBLEM, value))
