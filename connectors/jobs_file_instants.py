"""Whether a jobs-file's times are instants, the same in every zone, so the source's `timezone`
reads none of them: a job starting after the snapshot is then a clock ahead, not a zone
(jobs_base.said_ahead's `instants`; sacct_files.instant_times tells sacct's files). A file is
written in one format: its first start_time written tells (a pending job's is empty).
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import IO, Any

from connectors.jobs_base import job_file
from connectors.jobs_file_config import JobsFileSource
from connectors.jobs_file_read import file_format, records
from connectors.source_folder import Folder


def instant_times(path: Path, source: JobsFileSource) -> str | None:
    """How the file's times are written when they are instants (said_ahead's `instants`), else
    None: ISO text with an offset, a Parquet timestamp with its zone, numeric times from the Unix
    epoch or from a `time_origin` with its offset."""
    with job_file(path, Folder.of(source.path, f"{source.config_path}.path")) as raw:
        size = raw.seek(0, 2)
        raw.seek(0)
        cell = first_start(path, raw, size, source)
    unit, origin = source.time_format, source.time_origin
    if unit == "iso" or isinstance(cell, (datetime, date)):  # a Parquet timestamp is itself
        return instant(cell)
    return f"{unit} since {origin or 1970}" if origin is None or instant(origin) else None


def first_start(path: Path, raw: IO[bytes], size: int, source: JobsFileSource) -> Any:
    """The first start_time cell written (not empty: a pending job's is) of the file open as `raw`
    (None: none), read as `records` reads it; a Parquet file's from its schema and its row groups'
    column alone, up to the first group holding one."""
    def at(header: list[str]) -> int:  # the file was read: it has the column
        return next(i for i, name in enumerate(header) if source.our_name(name) == "start_time")

    if file_format(path) != "parquet":
        read = records(path, raw, size, source.header)
        header = next(read)
        if header is None:
            return None
        column = at(header)
        return next((row[1][column] for row in read if _written(row[1][column])), None)
    import pyarrow.parquet as pq

    if not size:
        return None
    file = pq.ParquetFile(raw)
    names = file.schema_arrow.names
    for group in range(file.num_row_groups):
        values = file.read_row_group(group, columns=[names[at(names)]]).column(0).drop_null()
        cell = next((value.as_py() for value in values if _written(value.as_py())), None)
        if cell is not None:
            return cell
    return None


def _written(cell: Any) -> bool:
    return cell is not None and (not isinstance(cell, str) or bool(cell.strip()))


def instant(cell: Any) -> str | None:
    """How a time cell is written when it is an instant: `written with their UTC offset` (ISO
    text ending `Z`, `+02:00`) or `timestamps with their zone` (Parquet's); None when it is read
    in the source's zone."""
    if isinstance(cell, datetime):
        return None if cell.tzinfo is None else "timestamps with their zone"
    try:
        return "written with their UTC offset" if datetime.fromisoformat(str(cell).strip()).tzinfo else None
    except ValueError:
        return None
