"""A `sacct --json` document read as a stream, job by job: a month of a big cluster is one
document of some hundred thousand jobs (800 MB), which `json.loads` holds whole, as Python
objects of about 27 KB a job. Here the text is read PIECE characters at a time and each
element of the top-level "jobs" list is decoded alone (json's own decoder, `raw_decode`),
so memory holds one piece and one job, whatever the number of jobs; the document's other
members (meta, errors, warnings: small) are kept and given once the jobs are read.
"""

from __future__ import annotations

import codecs
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from connectors.sacct_lines import not_whole_gzip
from connectors.slurm_warnings import said_not_utf8
from service.core.json_text import NestedTooDeep

PIECE = 1 << 20  # bytes read (and characters decoded) at a time
LONGEST = 64 << 20  # characters a value that does not decode is read on to (a job is some KB): then it is not JSON
BLANK = " \t\n\r"
JOBS_TWICE = object()  # members["jobs"] of a document naming "jobs" twice


class NotJson(ValueError):
    """The text is not JSON; `cut`: it ends before the document does (cut short while written?)."""

    def __init__(self, message: str, cut: bool):
        super().__init__(message)
        self.cut = cut


def text_pieces(path: Path, binary: IO[bytes]) -> Iterator[str]:
    """The file's text, PIECE bytes at a time; bytes that are not UTF-8 read as U+FFFD, the
    first said once with its line (as connectors/sacct_files.py's `_lines` says it)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    lines, first = 1, True
    try:
        while piece := binary.read(PIECE):
            if first and piece.startswith(b"\xef\xbb\xbf"):
                piece = piece[3:]
            first = False
            try:
                text = decoder.decode(piece)
            except UnicodeDecodeError as exc:  # the decoder keeps what it held: decode the piece again
                data = decoder.getstate()[0] + piece
                said_not_utf8(path, lines + data[:exc.start].count(b"\n"), data[exc.start])
                decoder.errors = "replace"
                text = decoder.decode(piece)
            lines += piece.count(b"\n")
            yield text
        yield decoder.decode(b"", final=True)
    except (EOFError, gzip.BadGzipFile) as exc:
        raise not_whole_gzip(exc) from None


class _Text:
    """The text of `pieces` as far as read: `text[at:]` is what is not decoded yet."""

    def __init__(self, pieces: Iterator[str]):
        self.pieces, self.text, self.at, self.before, self.ended = pieces, "", 0, 0, False

    def more(self) -> bool:
        """Read the next piece, dropping what is decoded; False at the end of the file."""
        piece = next(self.pieces, None)
        if piece is None:
            self.ended = True
            return False
        self.before += self.at
        self.text, self.at = self.text[self.at:] + piece, 0
        return True

    def next_char(self) -> str:
        """The next character that is not blank (not taken); "" at the end of the file."""
        while True:
            while self.at < len(self.text) and self.text[self.at] in BLANK:
                self.at += 1
            if self.at < len(self.text) or not self.more():
                return self.text[self.at:self.at + 1]

    def take(self, char: str, expecting: str) -> None:
        if self.next_char() != char:
            raise self.failed(expecting)
        self.at += 1

    def value(self) -> Any:
        """The JSON value that starts here, read as far as it reaches (a piece may end inside it)."""
        self.next_char()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.at)
            except json.JSONDecodeError as exc:
                if len(self.text) - self.at < LONGEST and self.more():  # a piece ended inside it
                    continue
                raise self.failed(exc.msg, exc.pos) from None
            except RecursionError:
                raise NestedTooDeep("JSON nested too deeply to read (arrays or objects thousands of levels "
                                    "deep)") from None
            if end < len(self.text) or not self.more():  # a number may go on in the next piece
                self.at = end
                return value

    def failed(self, what: str, at: int | None = None) -> NotJson:
        at = self.at if at is None else at
        cut = self.ended and at >= len(self.text.rstrip())
        where = self.before + at
        return NotJson(f"{what}: character {where}" if not cut else f"{what}: at its end (character {where})", cut)


_DECODER = json.JSONDecoder()


def json_members(pieces: Iterator[str], members: dict[str, Any]) -> Iterator[Any]:
    """The elements of the document's top-level "jobs" list, one at a time; its other members
    (and "jobs" when it is no list) land in `members` as they are read, all of them once the
    iterator ends. A document that is not an object (null, a list) is `members[""]`."""
    text = _Text(pieces)
    if text.next_char() == "[":  # a bare list: no sacct document, however long
        members[""] = []
        return
    if text.next_char() != "{":
        members[""] = text.value()
        return _ended(text)
    text.take("{", "Expecting '{'")
    if text.next_char() == "}":
        text.at += 1
        return _ended(text)
    while True:
        if text.next_char() != '"':
            raise text.failed("Expecting property name enclosed in double quotes")
        key = text.value()
        text.take(":", "Expecting ':' delimiter")
        if key == "jobs" and "jobs" in members:  # json.loads would keep the last: neither is surely sacct's
            text.value()
            members["jobs"] = JOBS_TWICE
        elif key == "jobs" and text.next_char() == "[":
            members["jobs"] = []  # said read: its elements are given, not kept
            text.at += 1
            if text.next_char() == "]":
                text.at += 1
            else:
                while True:
                    yield text.value()
                    if text.next_char() == "]":
                        text.at += 1
                        break
                    text.take(",", "Expecting ',' delimiter")
        else:
            members[key] = text.value()
        if text.next_char() == "}":
            text.at += 1
            return _ended(text)
        text.take(",", "Expecting ',' delimiter")


def _ended(text: _Text) -> None:
    if text.next_char():
        raise text.failed("Extra data")
