"""Writing one billing period of the synthetic bill: per format, `parts` data files.

AWS splits a large delivery into numbered parts (`<export>-00001.csv.gz`, `-00002`, …),
each with its own header. The rows of a period are dealt to the parts in order, the part
boundaries fixed up front from the period's row count (so every part holds about the
same number of rows); the period's monthly lines (fee, tax, credit) go to the last part.
Chunks are written as they come: nothing holds more than one chunk of rows.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from connectors.synthetic.cur2 import SCHEMA, Rows, columns
from connectors.synthetic.focus import FocusColumns
from connectors.synthetic.legacy import LegacyColumns

FORMATS = {"parquet": ".snappy.parquet", "csv.gz": ".csv.gz", "legacy-csv.gz": ".csv.gz", "focus-csv": ".csv"}
EXPORT_NAMES = {"parquet": "ml-org-cur2", "csv.gz": "ml-org-cur2-csv", "legacy-csv.gz": "ml-org-cur",
                "focus-csv": "ml-org-focus"}


class PeriodWriters:
    """The data files of one billing period, every format, written chunk by chunk. (Legacy
    parts are written beside their period and moved into their assembly folder once
    complete; FOCUS parts go to a folder named after the period.)"""

    def __init__(self, exports: dict[str, Path], label: str, keys: list[str], *, rows: int = 0, parts: int = 1):
        self.exports, self.label, self.keys = exports, label, keys
        parts = max(1, min(parts, rows)) if parts > 1 else 1
        self.bounds = [rows * k // parts for k in range(1, parts)]  # row offsets where a part ends
        self.written = 0
        self.files: dict[str, list[Path]] = {fmt: [] for fmt in exports}
        self.legacy_header: list[str] = []
        self.legacy_columns: dict[int, LegacyColumns] = {}
        self.focus_columns: dict[int, FocusColumns] = {}
        self.open: dict[str, object] = {}  # format → ParquetWriter, or (gzip or plain file, CSVWriter)

    def _path(self, fmt: str, number: int) -> Path:
        root = self.exports[fmt]
        folder = root / self.label if fmt == "focus-csv" else root / "data" / f"BILLING_PERIOD={self.label}"
        return folder / f"{root.name}-{number:05d}{FORMATS[fmt]}"

    def write(self, cat, rows: Rows, period, invoice: str, rng: np.random.Generator) -> None:
        if not len(rows.sid):
            return
        state = rng.bit_generator.state  # the same line item ids in every format
        tables: dict[str, pa.Table] = {}
        for fmt in self.exports:
            rng.bit_generator.state = state
            tables[fmt] = self._table(fmt, cat, rows, period, invoice, rng)
        offset, n = 0, len(rows.sid)
        while offset < n:
            room = next((b - self.written for b in self.bounds if b > self.written), n - offset)
            take = min(room, n - offset)
            for fmt, table in tables.items():
                self._append(fmt, table.slice(offset, take))
            offset += take
            self.written += take
            if self.written in self.bounds:
                self._close_parts()

    def _table(self, fmt: str, cat, rows: Rows, period, invoice: str, rng) -> pa.Table:
        table = columns(cat, rows, period=period, invoice_id=invoice, rng=rng, csv=fmt != "parquet")
        if fmt == "legacy-csv.gz":
            legacy = self.legacy_columns.setdefault(id(cat), LegacyColumns(cat, self.keys))
            table = legacy.table(table, pa.array(rows.sid, pa.int64()))
            self.legacy_header = table.column_names
        elif fmt == "focus-csv":
            table = self.focus_columns.setdefault(id(cat), FocusColumns(cat)).table(table, cat, rows)
        return table

    def _append(self, fmt: str, table: pa.Table) -> None:
        if fmt not in self.open:
            path = self._path(fmt, len(self.files[fmt]) + 1)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.files[fmt].append(path)
            if fmt == "parquet":
                self.open[fmt] = pq.ParquetWriter(path, SCHEMA, compression="snappy")
            else:
                handle = (gzip.GzipFile(path, "wb", compresslevel=6, mtime=0) if path.name.endswith(".gz")
                          else open(path, "wb"))
                self.open[fmt] = (handle, pacsv.CSVWriter(handle, table.schema))
        writer = self.open[fmt]
        if fmt == "parquet":
            writer.write_table(table)
        else:
            writer[1].write_table(table)

    def _close_parts(self) -> None:
        for writer in self.open.values():
            if isinstance(writer, tuple):
                writer[1].close()
                writer[0].close()
            else:
                writer.close()
        self.open.clear()

    def close(self) -> dict[str, Sequence[Path]]:
        self._close_parts()
        return self.files
