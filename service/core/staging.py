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

log = logging.getLogger(__name__)


def stage_parts(con: duckdb.DuckDBPyConnection, parts: Sequence[duckdb.DuckDBPyRelation],
                stage: Path) -> dict[str, Path]:
    """Write the rows of `parts` under `stage`; return billing period → staged file."""
    writers: dict[str, pq.ParquetWriter] = {}
    staged: dict[str, Path] = {}
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
                    _append(batch, stage, writers, staged)
            finally:
                reader.close()  # a failed part must not leave the connection with a pending result
            peak, spilled = query_memory(con)
            log.debug("staged part %d of %d: %d rows, DuckDB peak memory %d MB, spilled %d MB",
                      number, len(parts), rows, peak >> 20, spilled >> 20,
                      extra={"part": number, "peak_bytes": peak, "spilled_bytes": spilled})
            con.execute(f"DROP VIEW {view}")
    finally:
        for writer in writers.values():
            writer.close()
    return staged


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
