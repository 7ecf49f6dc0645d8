"""A Parquet file's row count and top-level column names, read from its footer in one pass.

Every query checks each cost partition's row count against the ledger and builds its view
from the columns each file holds. Arrow would do both, but importing it is a third of a
query's start-up, and it parses the whole footer (every row group's column metadata, about
10 ms for a 10M-row partition) once per question. The footer is Thrift's compact protocol
(https://github.com/apache/parquet-format, parquet.thrift: FileMetaData); its fields 2 (the
schema) and 3 (num_rows) come before the row groups, so reading stops there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

MAGIC = b"PAR1"  # an encrypted footer ends in PARE: not readable here, as without the key
TAIL = 8  # the footer's length (4 bytes, little-endian), then the magic
# Thrift compact types
STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)
# FileMetaData's fields, and a SchemaElement's
SCHEMA, NUM_ROWS = 2, 3
NAME, NUM_CHILDREN = 4, 5


@dataclass(frozen=True)
class Footer:
    rows: int
    columns: tuple[str, ...]  # the top-level columns, in the file's order


def read_footer(path: str | os.PathLike[str]) -> Footer | None:
    """The file's row count and columns; None when it has no readable footer (truncated,
    not Parquet, encrypted, or not a file). A file this user may not read raises
    PermissionError: called truncated, it was "damaged" and re-ingested, never the permissions."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size < len(MAGIC) + TAIL:
                return None
            handle.seek(size - TAIL)
            length = footer_length(handle.read(TAIL), size)
            if length is None:
                return None
            handle.seek(size - TAIL - length)
            return parse_footer(handle.read(length))
    except PermissionError:
        raise
    except OSError:
        return None


def footer_length(tail: bytes, size: int) -> int | None:
    """The length of the footer before a file's last `TAIL` bytes (of `size` in all); None when
    they are not a plain Parquet file's."""
    length = int.from_bytes(tail[:4], "little")
    return length if tail[4:] == MAGIC and 0 < length <= size - len(MAGIC) - TAIL else None


def parse_footer(metadata: bytes) -> Footer | None:
    """The row count and columns of a footer's bytes (FileMetaData), read by the caller from
    wherever the file lies; None when they do not parse."""
    try:
        return _file_metadata(_Compact(metadata))
    except (ValueError, IndexError, UnicodeDecodeError, RecursionError):
        return None


def _file_metadata(reader: _Compact) -> Footer | None:
    elements: list[tuple[str, int]] | None = None
    rows: int | None = None
    for field, kind in reader.fields():
        if field == SCHEMA and kind == LIST:
            size, element = reader.list_header()
            if element != STRUCT:
                return None
            elements = [_schema_element(reader) for _ in range(size)]
        elif field == NUM_ROWS and kind == I64:
            rows = reader.integer()
        else:
            reader.skip(kind)
        if elements is not None and rows is not None:
            break
    if elements is None or rows is None or not elements:
        return None
    columns, at = [], 1  # elements[0] is the root; each top-level column is followed by its subtree
    for _ in range(elements[0][1]):
        columns.append(elements[at][0])
        at = _after_subtree(elements, at)
    return Footer(rows, tuple(columns))


def _schema_element(reader: _Compact) -> tuple[str, int]:
    """(name, number of children) of one SchemaElement."""
    name, children = None, 0
    for field, kind in reader.fields():
        if field == NAME and kind == BINARY:
            name = reader.binary().decode("utf-8")
        elif field == NUM_CHILDREN and kind == I32:
            children = reader.integer()
        else:
            reader.skip(kind)
    if name is None or children < 0:
        raise ValueError("a schema element without a name")
    return name, children


def _after_subtree(elements: list[tuple[str, int]], at: int) -> int:
    """The index after element `at` and all its descendants (the schema is stored depth-first)."""
    pending = 1
    while pending:
        pending += elements[at][1] - 1
        at += 1
    return at


class _Compact:
    """Just enough of Thrift's compact protocol to read and skip a struct's fields."""

    def __init__(self, data: bytes):
        self.data = data
        self.at = 0

    def byte(self) -> int:
        value = self.data[self.at]
        self.at += 1
        return value

    def varint(self) -> int:
        value, shift = 0, 0
        while True:
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 70:
                raise ValueError("a varint longer than 10 bytes")

    def integer(self) -> int:
        """An i16, i32 or i64 (zigzag varint)."""
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def binary(self) -> bytes:
        length = self.varint()
        if self.at + length > len(self.data):
            raise ValueError("a string beyond the footer")
        self.at += length
        return self.data[self.at - length:self.at]

    def fields(self) -> Iterator[tuple[int, int]]:
        """(field id, type) of each field of the struct at hand; the caller reads or skips
        its value before asking for the next."""
        field = 0
        while True:
            head = self.byte()
            kind = head & 0x0F
            if kind == STOP:
                return
            field = field + (head >> 4) if head >> 4 else self.integer()
            yield field, kind

    def list_header(self) -> tuple[int, int]:
        """(size, element type) of a list or set."""
        head = self.byte()
        return (head >> 4 if head >> 4 != 15 else self.varint()), head & 0x0F

    def skip(self, kind: int, in_list: bool = False) -> None:
        if kind in (TRUE, FALSE):
            self.at += 1 if in_list else 0  # a field's boolean is in its header; a list's takes a byte
        elif kind == BYTE:
            self.at += 1
        elif kind in (I16, I32, I64):
            self.varint()
        elif kind == DOUBLE:
            self.at += 8
        elif kind == BINARY:
            self.binary()
        elif kind in (LIST, SET):
            size, element = self.list_header()
            for _ in range(size):
                self.skip(element, in_list=True)
        elif kind == MAP:
            size = self.varint()
            types = self.byte() if size else 0
            for _ in range(size):
                self.skip(types >> 4, in_list=True)
                self.skip(types & 0x0F, in_list=True)
        elif kind == STRUCT:
            for _, field_kind in self.fields():
                self.skip(field_kind)
        else:
            raise ValueError(f"unknown Thrift compact type {kind}")
        if self.at > len(self.data):
            raise ValueError("a value beyond the footer")
