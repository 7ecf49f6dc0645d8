"""A delivery's part that reads several of its files at once (connectors.folder_export).

Its rows carry FILE_INDEX, the file each came from (0-based, in the part's order), so that the
stager reports the billing periods each file held (Staged.part_periods: one entry per file,
as when each file was a part of its own) and drops the column before writing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb

from service.core.hidden_columns import FILE_INDEX

if TYPE_CHECKING:  # Arrow is loaded by the stager, not by the connectors that hand over
    import pyarrow as pa

    from service.core.per_value import PerValuePart
    from service.core.period_names import BatchPeriods


@dataclass(frozen=True)
class FilesPart:
    """`rows` (canonical columns and FILE_INDEX) of `files` files; a PerValuePart when some of
    its columns are converted per distinct value (their SQL reads FILE_INDEX to name a file)."""

    rows: duckdb.DuckDBPyRelation | PerValuePart
    files: int


def take_files(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Array | None]:
    """The batch without FILE_INDEX, and that column (None when the part is one file)."""
    index = batch.schema.get_field_index(FILE_INDEX)
    return (batch, None) if index < 0 else (batch.remove_column(index), batch.column(index))


def note_periods(seen: list[set[str]], files: pa.Array | None, periods: BatchPeriods, found: list[str]) -> None:
    """Add to each file's set of periods those its rows in the batch hold (`found`: the batch's)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not found:
        return
    if files is None:
        seen[0].update(found)
        return
    low, high = pc.min_max(files).values()
    if low == high:
        seen[low.as_py()].update(found)
        return
    pairs = pa.table({"file": files, "period": periods.of_rows()}).group_by(["file", "period"]).aggregate([])
    for file, period in zip(pairs.column("file").to_pylist(), pairs.column("period").to_pylist()):
        seen[file].add(period)
