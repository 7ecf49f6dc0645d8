"""Staging one cost delivery: its rows go to Parquet files under a staging directory, one
per billing period, before the lake moves them into place (service.core.lake).

A delivery comes as parts (a connector's relation per file, or one relation). The parts
are streamed one after another as Arrow batches of BATCH_ROWS rows, and each batch is
appended to its period's file: memory holds about one batch per period whatever the
number or size of the parts. One DuckDB `COPY` per delivery does not do that: a
multi-file CSV read holds buffers for many parts at once, a `UNION ALL` of parts spills
gigabytes, and an order-preserving COPY buffers batches; writing each part to its own
file and merging costs another pass over the data.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from service.core.errors import DataError

PERIOD_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
DATA_FILE = "data.parquet"
BATCH_ROWS = 1 << 17  # also the Parquet row group size
PERIOD_COLUMN = "__spendlake_billing_period"
# A connector whose export identifies its line items (AWS: identity/LineItemId with
# identity/TimeInterval) adds these two columns; they are checked for repeats, never stored.
LINE_ITEM_KEY = ("__spendlake_line_item_id", "__spendlake_line_item_interval")
LINE_ITEMS_FILE = "line_items.parquet"
LISTED_REPEATS = 5

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Repeats:
    """Line items (id and time interval) that a delivery holds more than once."""

    line_items: int  # how many line items appear more than once
    extra_rows: int  # the rows beyond the first of each
    first: tuple[str, ...]  # the first few, in the delivery's order: "<id> (<time interval>)"

    def __str__(self) -> str:
        return (f"{self.line_items:,} line item id(s) appear more than once ({self.extra_rows:,} extra row(s)): "
                f"{', '.join(self.first)}{', ...' if self.line_items > len(self.first) else ''}")


@dataclass(frozen=True)
class Staged:
    files: dict[str, Path]  # billing period → staged file
    repeats: Repeats | None = None


def stage_parts(con: duckdb.DuckDBPyConnection, parts: Sequence[duckdb.DuckDBPyRelation], stage: Path) -> Staged:
    """Write the rows of `parts` under `stage`, one file per billing period, and look for
    line items the delivery repeats (when the parts carry LINE_ITEM_KEY)."""
    writers: dict[str, pq.ParquetWriter] = {}
    staged: dict[str, Path] = {}
    keys: list[pq.ParquetWriter] = []  # the line item keys, in the delivery's order
    try:
        for number, part in enumerate(parts, 1):
            view = f"part_{uuid.uuid4().hex}"
            part.create_view(view)
            reader = con.sql(f"SELECT *, strftime(BillingPeriodStart, '%Y-%m') AS {PERIOD_COLUMN} "
                             f"FROM {view}").to_arrow_reader(BATCH_ROWS)
            rows = 0
            try:
                while (batch := _next_batch(reader)) is not None:
                    rows += batch.num_rows
                    if LINE_ITEM_KEY[0] in batch.schema.names:
                        _append_keys(batch.select(list(LINE_ITEM_KEY)), stage, keys)
                        batch = batch.drop_columns(list(LINE_ITEM_KEY))
                    _append(batch, stage, writers, staged)
            finally:
                reader.close()  # a failed part must not leave the connection with a pending result
            peak, spilled = query_memory(con)
            log.debug("staged part %d of %d: %d rows, DuckDB peak memory %d MB, spilled %d MB",
                      number, len(parts), rows, peak >> 20, spilled >> 20,
                      extra={"part": number, "peak_bytes": peak, "spilled_bytes": spilled})
            con.execute(f"DROP VIEW {view}")
    finally:
        for writer in [*writers.values(), *keys]:
            writer.close()
    return Staged(staged, _repeats(con, stage / LINE_ITEMS_FILE) if keys else None)


def _append_keys(batch: pa.RecordBatch, stage: Path, keys: list[pq.ParquetWriter]) -> None:
    if not keys:
        keys.append(pq.ParquetWriter(stage / LINE_ITEMS_FILE, batch.schema, compression="zstd"))
    keys[0].write_batch(batch, row_group_size=BATCH_ROWS)


def _repeats(con: duckdb.DuckDBPyConnection, path: Path) -> Repeats | None:
    """The line items `path` holds more than once (DuckDB groups them, spilling if need be)."""
    line_item, interval = LINE_ITEM_KEY
    [(count, extra, first)] = con.execute(
        f"SELECT count(*), sum(n - 1), min_by({line_item} || coalesce(' (' || {interval} || ')', ''), first_row, {LISTED_REPEATS}) "
        f"FROM (SELECT {line_item}, {interval}, count(*) AS n, min(file_row_number) AS first_row "
        f"      FROM read_parquet(?, file_row_number = true) WHERE {line_item} IS NOT NULL "
        f"      GROUP BY {line_item}, {interval} HAVING count(*) > 1)", [str(path)]).fetchall()
    return Repeats(int(count), int(extra), tuple(first)) if count else None


def _next_batch(reader: pa.RecordBatchReader) -> pa.RecordBatch | None:
    """The next batch, or None at the end. DuckDB's errors while streaming (a bad value,
    out of memory) arrive through Arrow as OSError: raised again as what they are, so
    they are not taken for a failed write to the lake."""
    try:
        return reader.read_next_batch()
    except StopIteration:
        return None
    except (OSError, pa.ArrowException) as exc:
        raise duckdb.Error(str(exc)) from None


def query_memory(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(peak buffer memory, bytes spilled to the temp directory) of the connection's last
    query, when it is profiled (Lake.writer); else (0, 0)."""
    try:
        system = json.loads(con.get_profiling_information(format="json")).get("system", {})
    except (duckdb.Error, ValueError):
        return 0, 0
    return int(system.get("peak_buffer_memory", 0)), int(system.get("total_bytes_spilled", 0))


def _append(batch: pa.RecordBatch, stage: Path, writers: dict[str, pq.ParquetWriter],
            staged: dict[str, Path]) -> None:
    if not batch.num_rows:
        return
    period_of = batch.column(PERIOD_COLUMN)
    rows = batch.drop_columns([PERIOD_COLUMN])
    found = pc.unique(period_of).to_pylist()
    for period in found:
        _check_period(period)
    for period in found:
        if period not in writers:
            staged[period] = stage / f"billing_period={period}" / DATA_FILE
            staged[period].parent.mkdir(parents=True)
            writers[period] = pq.ParquetWriter(staged[period], rows.schema, compression="zstd")
        writers[period].write_batch(rows if len(found) == 1 else rows.filter(pc.equal(period_of, period)),
                                    row_group_size=BATCH_ROWS)


def _check_period(value: str | None) -> str:
    if value is None or not PERIOD_RE.match(value):
        raise DataError(f"rows with an invalid or missing BillingPeriodStart ({value!r})",
                        hint="every cost row needs a billing period")
    return value
