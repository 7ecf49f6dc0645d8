"""One billing period of an export as a file: Parquet, or CSV in FOCUS's text forms.

Rows stream from DuckDB in Arrow batches into the writer, so a period of any size passes
through a bounded amount of memory. Parquet keeps the types (DECIMAL money and quantities,
TIMESTAMP in UTC, JSON as text); CSV writes times as `YYYY-MM-DDTHH:mm:ssZ`, decimals as
plain digits and nulls as empty cells. The FOCUS CSV is data interchange, not a
spreadsheet report: its cells are written as they are (no formula neutralising, which would
change negative numbers and tag values for every reader).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from service.core.duckdb_results import next_batch


# A batch of an attributed export's ~110 columns is ~1 KB a row, and the writer and DuckDB hold
# 2-3 at once: 65,536 rows took ~230 MB of the process's peak (service/core/lake.py
# EXPORT_MEMORY_LIMIT); row groups of 16,384 make the file 4-8% larger (10M lines: 195 -> 210 MB).
BATCH_ROWS = 16_384
DATA_NAME = "cost_and_usage"
ISO_UTC = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class WrittenFile:
    name: str
    rows: int
    bytes: int
    schema: pa.Schema


def file_name(csv: bool) -> str:
    return f"{DATA_NAME}.csv" if csv else f"{DATA_NAME}.parquet"


def typed_select(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any], csv: bool) -> str:
    """`sql` wrapped so its times come out as the file needs them: TIMESTAMP WITH TIME ZONE
    (UTC) for Parquet, ISO 8601 text ending in Z for CSV."""
    columns = con.execute(f"DESCRIBE {sql}", params).fetchall()
    parts = []
    for name, kind, *_ in columns:
        quoted = '"' + name.replace('"', '""') + '"'
        if kind.startswith("TIMESTAMP"):
            parts.append(f"strftime({quoted}, '{ISO_UTC}') AS {quoted}" if csv
                         else f"CAST({quoted} AS TIMESTAMPTZ) AS {quoted}")
        else:
            parts.append(quoted)
    return f"SELECT {', '.join(parts)} FROM ({sql}) AS lines"


def write_rows(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any], target: Path,
               csv: bool) -> WrittenFile:
    """Run `sql` and stream its rows into `target` (Parquet, or CSV with `csv`)."""
    reader = con.sql(typed_select(con, sql, params, csv), params=params).to_arrow_reader(BATCH_ROWS)
    rows = 0
    writer: Any = None
    try:
        writer = (pa_csv.CSVWriter(str(target), reader.schema) if csv
                  else pq.ParquetWriter(str(target), reader.schema, compression="zstd"))
        while (batch := next_batch(reader)) is not None:
            writer.write_batch(batch)
            rows += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    return WrittenFile(target.name, rows, target.stat().st_size, reader.schema)

