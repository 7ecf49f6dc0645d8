"""Reading a jobs-file's files: the header of a CSV (.csv, .csv.gz) or Parquet file, then its
records, each with where it is (`row N (line M)`, as an editor numbers lines); connectors/jobs_file.py
makes them rows of `jobs`."""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from connectors.csvfile import MAX_LINE_BYTES, csv_reader
from connectors.source_folder import Folder
from service.core.errors import LONG_VALUE, DataError
from service.core.output import cut, printable

if TYPE_CHECKING:
    import pyarrow as pa

SHOWN = 60  # characters of a bad value an error shows
# A file's column names an error lists, and the characters of each: the header is the file's content,
# and the error is kept as the source's last_error (`status --sources`, /api/v1/status, the log)
NAMES_SHOWN, NAME_SHOWN = 12, 40
SLURM_HINT = "set the source's kind to slurm-jobs, which reads sacct's files as written (README: slurm-jobs)"


def shown(value: Any) -> str:
    """A bad value as an error shows it: its repr, cut short (a quote left open makes the rest
    of the file one cell)."""
    if isinstance(value, str) and len(value) > SHOWN:
        return f"{value[:SHOWN]!r}... ({len(value):,} characters)"
    return repr(value)


def columns_shown(header: Sequence[str]) -> str:
    """The file's column names as an error lists them: the first NAMES_SHOWN, each cut to NAME_SHOWN
    characters (cut), its controls as escapes; `none` for none."""
    names = [column_shown(name) for name in header[:NAMES_SHOWN]]
    more = f" and {len(header) - NAMES_SHOWN:,} more" if len(header) > NAMES_SHOWN else ""
    return ", ".join(names) + more or "none"


def column_shown(name: str) -> str:
    return printable(cut(name.strip(), NAME_SHOWN))


def file_format(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith((".csv", ".csv.gz")):
        return "csv"
    return "parquet" if name.endswith(".parquet") else None


def sacct_output(head: str) -> str | None:
    """What Slurm's sacct wrote, when `head` (a file's start) is its output: a `--json` document
    (its meta names Slurm beside its jobs) or a `--parsable2` header (JobID|...|State|...); None
    otherwise. A jobs-file source given one would otherwise ask for columns sacct never writes."""
    text = head.lstrip("\ufeff \t\r\n")
    if text.startswith("{"):
        return "sacct --json output" if '"jobs"' in text and '"slurm"' in text.lower() else None
    names = {name.strip().lower() for name in text.partition("\n")[0].split("|")}
    return "sacct --parsable2 output" if {"jobid", "state"} <= names else None


def file_head(path: Path, folder: Folder, size: int = 4096) -> str:
    """The first `size` bytes of a file of `folder` (decompressed when it ends with .gz), as text;
    "" when unreadable (the read that follows names why)."""
    try:
        with folder.open(path) as file:
            raw = gzip.GzipFile(fileobj=file) if path.name.lower().endswith(".gz") else file
            return raw.read(size).decode("utf-8", errors="replace")
    except (OSError, EOFError):
        return ""


class _Lines:
    """A text's lines for csv.reader, counting the line breaks read as an editor shows them
    (and `grep -n`): the file's own line ending, LF (or CRLF), or CR alone when its header line
    ends so; a bare CR inside a quoted cell of an LF or CRLF file is no line break. (csv's
    `line_num` counts every CR.)"""

    def __init__(self, text: Iterator[str]):
        self.text, self.breaks, self.ending = iter(text), 0, ""

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = next(self.text)  # with newline="", ends in LF, CRLF or a bare CR
        self.ending = self.ending or ("\r" if line.endswith("\r") else "\n")
        self.breaks += line.count(self.ending)
        return line


def records(path: Path, raw: IO[bytes], size: int, names: tuple[str, ...] | None = None) -> Iterator[Any]:
    """The header of the CSV or Parquet file open as `raw` (None when it holds no byte but
    blanks: no jobs), then (where, values) per row: `row N` (the first data row is 1), and
    for CSV the line it starts on. `names`: a CSV file's column names when it has no header
    row (its first line is data); a Parquet file names its own. A CSV field over MAX_LINE_BYTES
    characters fails naming the line its record starts on."""
    line = 1  # where the record being read starts
    try:
        if file_format(path) == "parquet":
            table = parquet_table(path, raw, size)
            if table is None:
                yield None
                return
            yield table.column_names
            columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
            yield from ((f"row {n}", list(values)) for n, values in enumerate(zip(*columns), 1))
            return
        binary = gzip.GzipFile(fileobj=raw, mode="rb") if path.name.lower().endswith(".gz") else raw
        lines = _Lines(io.TextIOWrapper(binary, encoding="utf-8-sig", newline=""))
        reader = csv_reader(lines)
        first = next((record for record in reader if any(cell.strip() for cell in record)), None)
        if first is not None and len(first) == 1 and sacct_output(first[0]):
            raise DataError(f"the header, {shown(first[0])}, is {sacct_output(first[0])}, not a job table: kind "
                            "slurm-jobs reads it", where=str(path), hint=SLURM_HINT)
        if first is not None and len(first) == 1 and (";" in first[0] or "\t" in first[0]):
            raise DataError(f"the {'first line' if names else 'header'} is one column, {shown(first[0])}: the file "
                            f"is separated by {'semicolons' if ';' in first[0] else 'tabs'}", where=str(path),
                            hint="write it comma-separated (or as Parquet)")
        if names is None or first is None:
            yield first
            number, line = 0, lines.breaks + 1
        else:  # no header row: the first line read is the first row
            yield list(names)
            number, line = 1, max(lines.breaks, 1)
            yield f"row 1 (line {line})", first
            line = lines.breaks + 1
        for record in reader:
            if any(cell.strip() for cell in record):
                number += 1
                yield f"row {number} (line {line})", record
            line = lines.breaks + 1
    except DataError:
        raise
    except UnicodeDecodeError:
        raise DataError(f"not UTF-8: {_undecodable(path)}", where=str(path),
                        hint="save it as UTF-8 (or write Parquet)") from None
    except (EOFError, gzip.BadGzipFile) as exc:
        raise DataError(f"not a whole gzip file ({exc})", where=str(path),
                        hint="re-run when the job writing it has finished, or gzip it again") from None
    except csv.Error as exc:
        if "field limit" not in str(exc):
            raise DataError(f"cannot read: {type(exc).__name__}: {exc}", where=str(path),
                            hint="write UTF-8 CSV (or Parquet) with a header row") from None
        raise DataError(f"line {line}: a field is over {MAX_LINE_BYTES:,} characters", where=str(path),
                        hint=f"that is {LONG_VALUE}") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read: {type(exc).__name__}: {exc}", where=str(path),
                        hint="write UTF-8 CSV (or Parquet) with a header row") from None


def looks_like_data(header: list[str]) -> bool:
    """A CSV's first line whose cells hold numbers or times: a file without a header row."""
    for cell in (cell.strip() for cell in header):
        try:
            float(cell)
            return True
        except ValueError:
            pass
        try:
            datetime.fromisoformat(cell)
            return True
        except ValueError:
            pass
    return False


def parquet_table(path: Path, raw: IO[bytes], size: int) -> pa.Table | None:
    """The Parquet file open as `raw`, whole; None when it has no byte (no jobs)."""
    import pyarrow.parquet as pq

    if not size:
        return None
    try:
        return pq.read_table(raw)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise DataError(f"not a whole Parquet file: {exc}", where=str(path),
                        hint="re-run when the job writing it has finished, or write it again") from None


def _undecodable(path: Path) -> str:
    """Where a text file's first byte that is not UTF-8 is, as an editor numbers lines
    (`byte 0xe9 on line 4001`): the decoder's position counts from the chunk it was reading."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as raw:
        for number, chunk in enumerate(raw, 1):  # lines ending in LF (a CR-ended file is one chunk)
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError as exc:
                before = 0 if b"\n" in chunk else chunk.count(b"\r", 0, exc.start)
                return f"byte 0x{chunk[exc.start]:02x} on line {number + before}"
    return "a byte sequence cut short at the end"
