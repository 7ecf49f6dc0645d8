"""How long a CSV file's record is, for the error that names its line.

DuckDB's CSV reader takes a record of at most MAX_LINE_BYTES (its max_line_size default, kept: its
buffers grow with it). Past that it says "Maximum line size ... exceeded", and past its buffer (16
times that) "Value with unterminated quote found", the words a quote left open gets too: a 40 MB
Tags value, quoted and closed, was said to be a quote left open. The record's own length tells them
apart: one that ends (its quotes closed) longer than the bound is a value too long for the reader.
"""

from __future__ import annotations

import gzip
from pathlib import Path

MAX_LINE_BYTES = 2_000_000
FOLLOWED_BYTES = 1 << 30  # how far into a file a record is followed: a quote left open runs on to its end
PIECE = 1 << 20  # read at a time: a line of gigabytes is never held whole


def record_bytes(path: Path, line: int, most: int = FOLLOWED_BYTES) -> int | None:
    """The bytes of the record DuckDB numbers `line` (the header row being 1; a quoted value's line
    breaks are inside its record) of the CSV file `path` (plain or gzip), without the line break ending it;
    None when the file has no such record or it does not end within `most` bytes of the file."""
    scanned = quotes = 0
    record, begins = 1, 0  # the record being read, and the byte it begins at
    with (gzip.open if path.name.lower().endswith(".gz") else open)(path, "rb") as file:
        while piece := file.readline(PIECE):
            scanned += len(piece)
            quotes += piece.count(b'"')  # a quote inside a value is doubled: the parity holds
            if piece.endswith(b"\n") and quotes % 2 == 0:
                if record == line:
                    return scanned - begins - (2 if piece.endswith(b"\r\n") else 1)
                record, begins = record + 1, scanned
            if scanned >= most:
                return None
    return scanned - begins if record == line and quotes % 2 == 0 and scanned > begins else None


def longer_than_read(where: str | None, line: int) -> int | None:
    """The bytes of record `line` of the local CSV file `where` when more than the reader takes, else None."""
    if not where or "://" in where or not Path(where).is_file():
        return None
    length = record_bytes(Path(where), line)
    return length if length is not None and length > MAX_LINE_BYTES else None
