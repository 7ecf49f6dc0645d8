"""One billing period of an export as a file: Parquet, or CSV in FOCUS's text forms.

Rows stream from DuckDB in Arrow batches into the writer, so a period of any size passes
through a bounded amount of memory. Parquet keeps the types (DECIMAL money and quantities,
TIMESTAMP in UTC, JSON as text) and every value exact. CSV writes times as
`YYYY-MM-DDTHH:mm:ssZ`, decimals as plain digits (`0.000000000000`, `0.000000800000`: Arrow's
CSV writer gave `0E-12` and `8.00000E-7`), unquoted, nulls as empty cells and text quoted; a
text cell a spreadsheet would run as a formula gets a leading `'` as the report's CSVs do
(service.core.output.neutralise_cell): a tag value `=HYPERLINK(...)` opened in a spreadsheet
is shown, never run. Numbers are never altered, so a negative cost stays a number.
DuckDB writes each CSV line (csv_lines) and the file takes the batches' bytes as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from service.core.duckdb_results import next_batch
from service.core.output import neutralised_sql


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
    typed = typed_select(con, sql, params, csv)
    if csv:  # the file's types, for its metadata; its rows are lines of text
        schema = con.sql(f"SELECT * FROM ({typed}) AS typed LIMIT 0", params=params).to_arrow_table().schema
        typed = csv_lines(con, typed, params)
    reader = con.sql(typed, params=params).to_arrow_reader(BATCH_ROWS)
    rows = 0
    writer: Any = None
    try:
        writer = (CsvWriter(target, schema.names) if csv
                  else pq.ParquetWriter(str(target), reader.schema, compression="zstd"))
        while (batch := next_batch(reader)) is not None:
            writer.write_batch(batch)
            rows += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    return WrittenFile(target.name, rows, target.stat().st_size, schema if csv else reader.schema)


SEPARATOR = ", ',', "  # between two cells' SQL in concat()
# DuckDB types written unquoted, as numbers (and true/false): DuckDB's text of a DECIMAL is its plain digits
UNQUOTED = ("DECIMAL", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
            "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "BOOLEAN")


def _quoted(text: str) -> str:
    """SQL: `text` in quotes, each quote in it doubled."""
    return f"""'"' || replace({text}, '"', '""') || '"'"""


def csv_lines(con: duckdb.DuckDBPyConnection, typed: str, params: dict[str, Any]) -> str:
    """SELECT each row of `typed` (typed_select's, for CSV) as one CSV line ending in a line feed
    (`line`): numbers (UNQUOTED) as DuckDB writes them as text (a decimal's plain digits at its
    scale), other values quoted (a quote doubled) after neutralised_sql, NULL as nothing."""
    cells = []
    for name, kind, *_ in con.execute(f"DESCRIBE {typed}", params).fetchall():
        text = f"""CAST("{name.replace('"', '""')}" AS VARCHAR)"""
        number = kind.startswith(UNQUOTED) and "[" not in kind  # a list (INTEGER[]) holds commas: quoted
        cells.append(f"coalesce({text if number else _quoted(neutralised_sql(text))}, '')")
    return f"SELECT concat({SEPARATOR.join(cells)}, chr(10)) AS line FROM ({typed}) AS typed"


class CsvWriter:
    """Writes `csv_lines` batches to `target` under a header of `columns`, each quoted (as Arrow's
    CSV writer wrote them)."""

    def __init__(self, target: Path, columns: list[str]) -> None:
        self.file = open(target, "wb")  # noqa: SIM115 (closed by close(), as the Parquet writer is)
        header = ",".join('"' + name.replace('"', '""') + '"' for name in columns)
        self.file.write(f"{header}\n".encode())

    def write_batch(self, batch: pa.RecordBatch) -> None:
        lines = batch.column(0).cast(pa.large_string())
        if len(lines):
            offsets = pa.Array.from_buffers(pa.int64(), len(lines) + 1, [None, lines.buffers()[1]],
                                            offset=lines.offset)
            start, end = offsets[0].as_py(), offsets[-1].as_py()
            self.file.write(lines.buffers()[2][start:end])

    def close(self) -> None:
        self.file.close()

