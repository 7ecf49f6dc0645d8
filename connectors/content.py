"""A file's content as its rows read it, for telling copies apart (service.ingest.copies).

An export's text is the same rows whether it was gzipped or not, saved with a byte order mark
or without, with CRLF line ends or LF (a copy opened and saved in a spreadsheet or an editor on
Windows, `gzip -k`): its content is its bytes decompressed (`.gz`), a leading UTF-8 byte order
mark dropped and CRLF read as LF. Other files (Parquet, ZIP) are their bytes. A plain UTF-8 file
with LF line ends and no mark has the SHA-256 of its bytes, as before this reading.

`head` is the cheap look: the SHA-256 of the content's first HEAD bytes (the whole of a shorter
file), read from the file's first RAW_HEAD bytes, with the CSV header's column names; only files
of one head are read whole for `digest`.
"""

from __future__ import annotations

import codecs
import hashlib
import re
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from connectors.csvfile import csv_reader

HEAD, RAW_HEAD = 256 * 1024, 1024 * 1024  # a gzip's first MiB holds more than 256 KiB of its text
CHUNK = 1024 * 1024
TEXT = (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt", ".txt.gz", ".gz")


def is_text(name: str) -> bool:
    return name.lower().endswith(TEXT)


def _decompressed(chunks: Iterable[bytes], gzipped: bool) -> Iterator[bytes]:
    if not gzipped:
        yield from chunks
        return
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    for chunk in chunks:
        while chunk:
            out = inflate.decompress(chunk, CHUNK)
            yield out
            chunk = inflate.unconsumed_tail
            if inflate.eof:  # a concatenated gzip (`cat a.gz b.gz`): its next member
                rest = inflate.unused_data
                inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
                chunk = chunk or rest
            elif not chunk:
                break


def normalised(chunks: Iterable[bytes], name: str) -> Iterator[bytes]:
    """The content of a file read in `chunks`: see the module's docstring."""
    if not is_text(name):
        yield from chunks
        return
    first, carry = True, b""
    for chunk in _decompressed(chunks, name.lower().endswith(".gz")):
        chunk = carry + chunk
        if first and len(chunk) < len(codecs.BOM_UTF8) and chunk == codecs.BOM_UTF8[:len(chunk)]:
            carry = chunk  # too short yet to tell a mark
            continue
        if first:
            chunk, first = chunk.removeprefix(codecs.BOM_UTF8), False
        chunk, carry = (chunk[:-1], b"\r") if chunk.endswith(b"\r") else (chunk, b"")
        yield chunk.replace(b"\r\n", b"\n")
    if carry:
        yield carry


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


def digest(path: Path, name: str) -> str:
    """The SHA-256 of a local file's content; of its bytes when it is no gzip it says it is (the
    ingest's read says what is wrong with it)."""
    sha = hashlib.sha256()
    try:
        for chunk in normalised(_chunks(path), name):
            sha.update(chunk)
    except zlib.error:
        sha = hashlib.sha256()
        for chunk in _chunks(path):
            sha.update(chunk)
    return sha.hexdigest()


class Digests(NamedTuple):
    content: str  # the SHA-256 of the content
    raw: str  # … of the bytes
    more_than_a_line: bool  # blank lines at the content's ends aside


def read_through(chunks: Iterable[bytes], name: str) -> Digests | None:
    """The Digests of a file read in `chunks`, one chunk held at a time; None for a file that is no
    gzip it says it is (the ingest's read names it)."""
    text, raw, lines = hashlib.sha256(), hashlib.sha256(), _Lines()

    def tapped() -> Iterator[bytes]:
        for chunk in chunks:
            raw.update(chunk)
            yield chunk

    try:
        for chunk in normalised(tapped(), name):
            text.update(chunk)
            lines.read(chunk)
    except zlib.error:
        return None
    return Digests(text.hexdigest(), raw.hexdigest(), lines.more)


class _Lines:
    """Whether a text read in chunks holds a line after its first, blank ones at its ends aside (a
    report of a header alone holds no rows), told by its first bytes: nothing kept but three flags."""

    def __init__(self) -> None:
        self.begun = self.broken = self.more = False

    def read(self, chunk: bytes) -> None:
        if self.more:
            return
        if not self.begun:
            chunk = chunk.lstrip()
            self.begun = bool(chunk)
        if self.begun and not self.broken:
            end = re.search(rb"[\r\n]", chunk)
            chunk = chunk[end.start():] if end else b""
            self.broken = end is not None
        self.more = self.broken and bool(chunk.strip())


def head(raw: bytes, name: str) -> tuple[str, list[str]]:
    """(the SHA-256 of the content's first HEAD bytes, a CSV header's column names lowercased)
    from `raw`, a file's first RAW_HEAD bytes or all of a shorter one."""
    text = bytearray()
    try:
        for chunk in normalised([raw], name):
            text += chunk
            if len(text) > HEAD:
                break
    except zlib.error:  # a gzip cut at RAW_HEAD reads up to the cut; a damaged one is read by ingest
        pass
    columns: list[str] = []
    if name.lower().endswith((".csv", ".csv.gz")):
        line = bytes(text).split(b"\n", 1)[0].decode("utf-8", "replace")
        columns = [c.strip().lower() for c in next(csv_reader([line]), [])]
    return hashlib.sha256(bytes(text[:HEAD])).hexdigest()[:32], columns
