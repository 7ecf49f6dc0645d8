"""Staging one cost delivery: its rows go to Parquet files under a staging directory, one
per billing period, before the lake moves them into place (service.core.lake).

A delivery comes as parts (a connector's relation per file, one over several files whose
rows say their file: file_parts.FilesPart, or one relation). The parts
are streamed one after another as Arrow batches of BATCH_ROWS rows, and each batch is
appended to its period's file (in row groups of ROW_GROUP_ROWS) on a writer thread while
the next batch is read: memory holds about two batches in flight and one row group per
period whatever the number or size of the parts.
One DuckDB `COPY` per delivery does not do that: a multi-file CSV read holds buffers for
many parts at once, a `UNION ALL` of parts spills gigabytes, and an order-preserving COPY
buffers batches; writing each part to its own file and merging costs another pass.

Connectors may leave out the canonical columns their export lacks (cost_select_list's
absent_as_null=False): they are added here as null arrays, cheaper than DuckDB computing them.
"""

from __future__ import annotations

import functools
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from service.core.currency import with_currency_codes
from service.core.duckdb_results import next_batch, query_memory
from service.core.errors import DataError, naming
from service.core.file_parts import FilesPart, note_periods, take_files
from service.core.files import DATA_FILE
from service.core.hidden_columns import LINE_ITEM_KEY, ROUNDING_COLUMNS
from service.core.line_repeats import LINE_ITEM_HASH, LINE_ITEMS_FILE, Repeats, find_repeats
from service.core.per_value import Converter, PerValuePart, streamed
from service.core.row_prints import RowPrints
from service.core.period_names import BatchPeriods, PeriodNames
from service.core.schema import cost_select_list

PERIOD_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
# Rows per Arrow batch read from DuckDB. DuckDB's memory for a batch in flight (its chunks
# and the Arrow arrays built from them, per reading thread) is many times the batch's Arrow
# size: 131k-row batches of a 10M-line legacy CUR peaked at 900 MB, 32k-row ones at 660 MB.
# A part smaller than a batch (every part of a 1M-line delivery in 20 parts) gave small
# batches at 1M and full ones at 10M, so RSS grew with the delivery's size.
BATCH_ROWS = 1 << 15
ROW_GROUP_ROWS = 1 << 17  # the lake file's row group size: each period's batches are buffered up to it
# Rows buffered across all periods' files: beyond it, the periods the last batch did not
# hold write what they have as a shorter row group, so a delivery of many periods (a
# folder's years of monthly files read in one pass) does not hold a row group for each.
PENDING_ROWS = 2 * ROW_GROUP_ROWS
TAGS = "Tags"  # the canonical map column whose keys each period's ledger entry names

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Staged:
    files: dict[str, Path]  # billing period → staged file
    repeats: Repeats | None = None
    # (billing period, currency, cost column) → Σ what the lake's 12 decimals rounded away
    rounding: dict[tuple[str, str | None, str], Decimal] = field(default_factory=dict)
    # the billing periods each part's rows hold, in the order of the parts (ingest learns from
    # them which file gave which periods when a delivery's parts are its files)
    part_periods: tuple[frozenset[str], ...] = ()
    # billing period → the distinct keys of its rows' Tags maps, sorted by code point (the ledger's tag_keys):
    # taken from the batches as they are written, where reading them back from the staged file
    # cost 0.6-0.8 CPU s at 10M lines (bench/README.md)
    tag_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # each file's rows as a multiset, in the order of part_periods (row_prints; asked for: `prints`)
    prints: tuple[tuple, ...] = ()


def stage_parts(con: duckdb.DuckDBPyConnection, parts: Sequence[duckdb.DuckDBPyRelation | PerValuePart | FilesPart],
                stage: Path, prints: str = "", printed_too: Collection[str] = ()) -> Staged:
    """Write the rows of `parts` under `stage`, one file per billing period, and look for
    line items the delivery repeats (when the parts carry LINE_ITEM_KEY); `prints` ("cheap" or
    "exact"): each file's rows fingerprinted too (row_prints; `printed_too`: its `also`)."""
    writers: dict[str, _PeriodFile] = {}
    staged: dict[str, Path] = {}
    schema = canonical_schema(con)
    keys: list[_Writer] = []  # the line item keys, in the delivery's order
    rounding: dict[tuple[str, str | None, str], Decimal] = defaultdict(Decimal)
    part_periods: list[set[str]] = []
    converter = Converter(con)
    chosen: dict[tuple[str, ...], tuple[str, ...]] = {}  # per_value.streamed's choice, by the first part
    period_names = PeriodNames(con)
    printed = RowPrints(con, exact=prints == "exact", also=printed_too) if prints else None

    def write(batch: pa.RecordBatch, with_keys: bool, seen: list[set[str]], per_value: dict[str, str],
              first: int) -> None:
        batch, files = take_files(batch)
        batch = with_currency_codes(batch)  # before the rounding is summed per currency
        if per_value:
            batch = converter.convert(batch, per_value, files)
        if with_keys:
            _append_keys(batch.select([*LINE_ITEM_KEY, LINE_ITEM_HASH]), stage, keys)
            batch = batch.drop_columns([*LINE_ITEM_KEY, LINE_ITEM_HASH])
        periods = period_names.of(batch)
        rows = _take_rounding(batch, periods, rounding)
        if printed is not None:
            printed.add(_complete(rows, schema), files, first)
        note_periods(seen, files, periods, _append(rows, periods, stage, writers, staged, schema))

    background = _OneBehind()
    try:
        for number, part in enumerate(parts, 1):
            files = part.files if isinstance(part, FilesPart) else 1
            part = part.rows if isinstance(part, FilesPart) else part
            part, per_value = streamed(part, chosen)
            line_item, interval = LINE_ITEM_KEY
            key_hash = (f", CASE WHEN {line_item} IS NOT NULL THEN hash({line_item}, {interval}) END AS {LINE_ITEM_HASH}"
                        if line_item in part.columns else "")
            reader = (part.project(f"*{key_hash}") if key_hash else part).to_arrow_reader(BATCH_ROWS)
            rows, seen, first = 0, [set() for _ in range(files)], len(part_periods)
            part_periods.extend(seen)
            try:
                while (batch := next_batch(reader)) is not None:
                    rows += batch.num_rows
                    background.submit(write, batch, bool(key_hash), seen, per_value, first)
                background.wait()
            finally:
                reader.close()  # a failed part must not leave the connection with a pending result
            peak, spilled = query_memory(con)
            log.debug("staged part %d of %d: %d rows, DuckDB peak memory %d MB, spilled %d MB",
                      number, len(parts), rows, peak >> 20, spilled >> 20,
                      extra={"part": number, "peak_bytes": peak, "spilled_bytes": spilled})
        for writer in writers.values():
            writer.flush()
    finally:
        background.close()
        _close_all([*writers.values(), *keys, converter, period_names, *([printed] if printed else [])])
    return Staged(staged, find_repeats(con, stage) if keys else None,
                  {key: value.normalize() for key, value in rounding.items() if value},
                  tuple(frozenset(seen) for seen in part_periods),
                  {period: tuple(sorted(writer.tag_keys)) for period, writer in writers.items()},
                  printed.of(len(part_periods)) if printed else ())


def _close_all(writers: Sequence[_PeriodFile | _Writer | Converter | PeriodNames]) -> None:
    """Close every file, then raise the first error: a file left open after a failed write
    (a full disk) keeps its space taken after the stage is removed, until the process ends."""
    first: BaseException | None = None
    for writer in writers:
        try:
            writer.close()
        except BaseException as exc:  # noqa: BLE001 (raised below, after the others are closed)
            first = first or exc
    if first is not None:
        raise first


class _OneBehind:
    """Runs each batch's writing on one thread while the next batch is read: DuckDB makes
    batch n+1 while pyarrow encodes and compresses batch n (both release the GIL), so the
    single-threaded Parquet writer no longer adds its time to the read's. At most one batch
    is being written, in the order given; its error is raised at the next submit or wait."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="staging-writer")
        self.pending: Future | None = None

    def submit(self, work: Callable[..., None], *args: object) -> None:
        self.wait()
        self.pending = self.pool.submit(work, *args)

    def wait(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        """Let the batch in flight finish (its error, if any, is dropped when another one
        is already being raised: it was raised first or came from the same cause)."""
        try:
            if self.pending is not None:
                self.pending.exception()
        finally:
            self.pool.shutdown(wait=True)


def _take_rounding(batch: pa.RecordBatch, periods: BatchPeriods,
                   rounding: dict[tuple[str, str | None, str], Decimal]) -> pa.RecordBatch:
    """Add the batch's rounded-away parts to `rounding` and drop their columns. Only the rare
    rows with more than 12 decimals reach Python."""
    present = {column: name for column, name in ROUNDING_COLUMNS.items() if name in batch.schema.names}
    if not present:
        return batch
    found = None
    for name in present.values():
        valid = pc.is_valid(batch.column(name))
        found = valid if found is None else pc.or_(found, valid)
    if pc.any(found).as_py():
        rows = batch.select(["BillingCurrency", *present.values()]).append_column("period", periods.of_rows())
        for row in rows.filter(found).to_pylist():
            for column, name in present.items():
                if row[name] is not None:
                    rounding[(row["period"], row["BillingCurrency"], column)] += row[name]
    return batch.drop_columns(list(present.values()))


def _append_keys(batch: pa.RecordBatch, stage: Path, keys: list[_Writer]) -> None:
    if not keys:  # read once, by hash: unique ids gain nothing from dictionaries or statistics
        keys.append(_Writer(stage / LINE_ITEMS_FILE, batch.schema, compression="zstd",
                                     use_dictionary=False, write_statistics=False))
    keys[0].write_batch(batch, row_group_size=ROW_GROUP_ROWS)


class _Writer(pq.ParquetWriter):
    """A ParquetWriter whose errors name its file (Arrow's name none, so a full disk would be
    told against the lake); write_batch writes through write_table."""

    def __init__(self, path: Path, schema: pa.Schema, **options: object):
        self.path = path
        with naming(path):
            super().__init__(path, schema, **options)

    def write_table(self, table: pa.Table, row_group_size: int | None = None) -> None:
        with naming(self.path):
            super().write_table(table, row_group_size=row_group_size)

    def close(self) -> None:
        with naming(self.path):
            super().close()


class _PeriodFile:
    """One period's staged file: batches are buffered into row groups of ROW_GROUP_ROWS
    (the last one holds the rest). It keeps the keys of the Tags maps written."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.writer = _Writer(path, schema, **lake_file_options(schema))
        self.pending: list[pa.RecordBatch] = []
        self.rows = 0
        self.tag_keys: set[str] = set()

    def write(self, batch: pa.RecordBatch) -> None:
        tags = batch.schema.get_field_index(TAGS)
        if tags >= 0 and pa.types.is_map(batch.schema.field(tags).type):
            self.tag_keys.update(map_keys(batch.column(tags)))
        self.pending.append(batch)
        self.rows += batch.num_rows
        while self.rows >= ROW_GROUP_ROWS:  # one full row group; the rest waits for the next batches
            buffered = pa.Table.from_batches(self.pending)
            self.writer.write_table(buffered.slice(0, ROW_GROUP_ROWS), row_group_size=ROW_GROUP_ROWS)
            rest = buffered.slice(ROW_GROUP_ROWS)
            self.pending, self.rows = rest.to_batches(), rest.num_rows

    def flush(self) -> None:
        if self.pending:
            self.writer.write_table(pa.Table.from_batches(self.pending), row_group_size=ROW_GROUP_ROWS)
            self.pending, self.rows = [], 0

    def close(self) -> None:
        self.writer.close()


def map_keys(column: pa.Array) -> list[str]:
    """The distinct keys of a map column's maps. Through a list of entries: a map array's own
    `keys` ignore a slice and include the entries behind null maps."""
    entries = pa.list_(pa.struct([column.type.key_field, column.type.item_field]))
    return pc.unique(pc.struct_field(pc.list_flatten(column.cast(entries)), 0)).to_pylist()


def lake_file_options(schema: pa.Schema) -> dict:
    """How a lake cost file is written. Dictionaries only for text (names, ids, tag keys and
    values repeat; money and quantities rarely do) and min/max statistics only for the time
    columns (what a window's filter skips row groups by): the Parquet writer, single-threaded,
    was half of a 10M-line ingest, and these cut its CPU by a quarter with a smaller file and
    the same read speed (bench/README.md)."""
    text, times = [], []
    for column in schema:
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            text.append(column.name)
        elif pa.types.is_map(column.type):
            text.extend(f"{column.name}.key_value.{part}" for part in ("key", "value"))
        elif pa.types.is_timestamp(column.type) or pa.types.is_date(column.type):
            times.append(column.name)
    return {"compression": "zstd", "use_dictionary": text, "write_statistics": times}


def canonical_schema(con: duckdb.DuckDBPyConnection) -> pa.Schema:
    """The Arrow schema of the canonical cost columns, as DuckDB gives them."""
    return con.sql(f"SELECT {cost_select_list({})} LIMIT 0").to_arrow_table().schema


def write_empty(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """A staged file with the canonical columns and no rows (a declared period with none)."""
    schema = canonical_schema(con)
    with naming(path):
        pq.write_table(schema.empty_table(), path, **lake_file_options(schema))


def _complete(rows: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A batch of some canonical columns (cost_select_list without the absent ones) with the
    others as null arrays, in canonical order; any other batch as it is."""
    names = set(rows.schema.names)
    if rows.schema.names == schema.names or not names <= set(schema.names):
        return rows
    return pa.RecordBatch.from_arrays([rows.column(field.name) if field.name in names
                                       else _nulls(rows.num_rows, field.type) for field in schema], schema=schema)


@functools.lru_cache(maxsize=256)
def _nulls(rows: int, kind: pa.DataType) -> pa.Array:
    """A null array, made once per length and type: nearly every batch has BATCH_ROWS rows,
    and making dozens of them per batch cost 0.2-0.3 CPU s per 1M lines."""
    return pa.nulls(rows, kind)


def _append(batch: pa.RecordBatch, periods: BatchPeriods, stage: Path, writers: dict[str, _PeriodFile],
            staged: dict[str, Path], schema: pa.Schema) -> list[str]:
    """Write the batch's rows to their periods' files; the periods it held."""
    if not batch.num_rows:
        return []
    rows = _complete(batch, schema)
    found = periods.found
    for period in found:
        _check_period(period)
    for period in found:
        if period not in writers:
            staged[period] = stage / f"billing_period={period}" / DATA_FILE
            staged[period].parent.mkdir(parents=True)
            writers[period] = _PeriodFile(staged[period], rows.schema)
        writers[period].write(rows if len(found) == 1 else rows.filter(pc.equal(periods.of_rows(), period)))
    idle = sorted((w for p, w in writers.items() if p not in found and w.rows), key=lambda w: -w.rows)
    pending = sum(w.rows for w in writers.values())
    for writer in idle:
        if pending <= PENDING_ROWS:
            break
        pending -= writer.rows
        writer.flush()
    return found


def _check_period(value: str | None) -> str:
    if value is None or not PERIOD_RE.match(value):
        raise DataError(f"rows with an invalid or missing BillingPeriodStart ({value!r})",
                        hint="every cost row needs a billing period")
    return value
