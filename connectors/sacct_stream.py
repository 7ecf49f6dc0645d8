"""A sacct --parsable2 file as the column-wise reader (connectors/sacct_columns.py) hands it to
pyarrow's CSV reader: whole lines, the records pyarrow would read otherwise held apart for the
caller to place by the line reader's rule."""

from __future__ import annotations

import gzip
import threading
from typing import IO

from connectors.jobs_file_columns import NotColumnWise
from connectors.sacct_fields import continues, joined

APART_MOST = 50_000  # records held apart as Python text (~10 MB); past it the line reader reads the file, in batches


class RecordStream:
    """A binary stream read through whole lines at a time, with bytes that are not UTF-8 as
    U+FFFD, as the line reader reads them (Slurm stores job names and comments as given):
    `not_utf8` is the first one's line and byte.

    sacct escapes nothing in a job name or comment: a `|` in one gives its line more fields than
    the header, a line break splits its record over lines (the next ones with fewer fields), a
    bare CR would end a row for pyarrow. Such records are held back (`apart`: the rows passed on
    before each, its first line's number, its fields as connectors/sacct_fields.py's `records`
    joins them) and the caller places them as the line reader would, the rest of the file still
    read in blocks; blank lines are left out. The last record of a read is kept back (`carry`)
    until the next line shows whether it continues it. `rows`: pyarrow's rows, the kept-back
    one counted; `cut`: the number of a last line without its line end, left out with the record
    it would continue (the line reader says so before it reads that record); `broken`: the
    error of a gzip file without its end, read as that end, the open record left out likewise.

    pyarrow reads ahead in a thread of its own, which may still be reading when its reader has
    failed: once `stop`ped, the stream reads nothing more, so the caller can read the file again
    from its start (the line reader read 16 MB less, from wherever that read had left it)."""

    def __init__(self, stream: IO[bytes], header: list[str], delimiter: str = "|"):
        self.stream, self.header, self.closed, self.position = stream, header, False, 0
        self.held, self.lines, self.not_utf8 = b"", 0, None  # held: a line the next block ends
        self.delimiter, self.separator = delimiter, delimiter.encode()
        self.delimiters, self.rows, self.apart = len(header) - 1, 0, []  # type: ignore[var-annotated]
        self.carry: bytes | None = None  # the open record, when kept, between reads
        self.open: str | None = None  # the record a line may continue: "kept", "apart" or none (the header)
        self.kept_at = 0  # the line number of the open record, when kept
        self.started, self.cut = False, None  # started: the header read
        self.broken: Exception | None = None  # a gzip file's end missing, or its data damaged
        self.lock, self.stopped = threading.Lock(), False

    def read(self, size: int = -1) -> bytes:
        with self.lock:
            while not self.stopped:  # until a line is kept, or the end: b"" is the end to pyarrow
                data, end = self._whole_lines(size)
                kept = self._kept(data, end)
                if kept or end:
                    return kept
            return b""

    def stop(self) -> None:
        """No more reads: the one under way, if any, ends first."""
        with self.lock:
            self.stopped = True

    def _whole_lines(self, size: int) -> tuple[bytes, bool]:
        """The next whole lines (the rest at the end, then True), bytes that are not UTF-8 as U+FFFD."""
        data = self.held
        while True:
            try:
                block = self.stream.read(size)
            except (EOFError, gzip.BadGzipFile) as exc:  # its end, as the line reader reads it: said by the caller
                self.broken, block = exc, b""
            if block:
                self.position += len(block)
            data += block
            whole = data.rfind(b"\n") + 1 if block else len(data)  # a UTF-8 character never holds b"\n"
            if whole or not block:
                break
        data, self.held = data[:whole], data[whole:]
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if self.not_utf8 is None:
                self.not_utf8 = (self.lines + data.count(b"\n", 0, exc.start) + 1, data[exc.start])
            data = data.decode("utf-8", errors="replace").encode("utf-8")
        return data, not block

    def _kept(self, data: bytes, end: bool) -> bytes:
        """What pyarrow reads of `data` (whole lines, or the file's last): its plain records (each
        line the header's fields, no CR but a line end's), counted by bytes.count when the whole
        block is (most blocks), else line by line. `out[-1]` is the open record when it is kept."""
        lines, first = data.count(b"\n"), self.lines + 1
        self.lines += lines
        out, self.carry = ([] if self.carry is None else [self.carry]), None
        if (data.endswith(b"\n") and data.count(self.separator) == lines * self.delimiters and not self._open_short()
                and (b"\r" not in data or data.count(b"\r") == data.count(b"\r\n"))):
            if not self.started:  # the header, never continued
                head = data.index(b"\n")
                out.append(data[:head])
                data, lines, self.started, self.rows = data[head + 1:], lines - 1, True, self.rows + 1
            if lines:
                last = data.rfind(b"\n", 0, len(data) - 1) + 1
                out += [data[:last - 1], data[last:-1]] if last else [data[:-1]]
                self.open, self.kept_at, self.rows = "kept", self.lines, self.rows + lines
        else:
            parts, separator = data.split(b"\n"), self.separator
            for number, line in enumerate(parts[:-1], first):
                if (self.open != "apart" and self.started and line.count(separator) == self.delimiters
                        and line.find(b"\r") in (-1, len(line) - 1)):  # a plain record after another: most lines
                    out.append(line)
                    self.open, self.kept_at, self.rows = "kept", number, self.rows + 1
                else:
                    self._line(number, line, out)
            if parts[-1].decode("utf-8").strip():
                self.cut = first + lines
        if end and (self.cut is not None or self.broken):  # the line reader fails before reading the open record
            if self.open == "kept":
                out.pop()
                self.rows -= 1
            elif self.open == "apart":
                self.apart.pop()
        elif not end and self.open == "kept":
            self.carry = out.pop()  # the next block may continue it
        return b"\n".join([*out, b""]) if out else b""

    def _line(self, number: int, line: bytes, out: list[bytes]) -> None:
        """One line (without its LF) of a block read line by line: passed on, held apart, joined to
        the record it continues, or left out (blank), as connectors/sacct_fields.py's `records` reads it."""
        plain = line.count(self.separator) == self.delimiters and line.find(b"\r") in (-1, len(line) - 1)
        if not plain or self._open_short():
            text = line.decode("utf-8").rstrip("\r")
            if not text.strip():
                return
            fields = text.split(self.delimiter)
            if self.open and continues(self._fields(out[-1]) if self.open == "kept" else self.apart[-1][2], fields,
                                       self.header):
                if self.open == "kept":  # held apart instead
                    self.rows -= 1
                    self._hold(self.kept_at, self._fields(out.pop()))
                before, at, record = self.apart[-1]
                self.apart[-1] = (before, at, joined(record, fields, self.header, self.delimiter))
                return
            if not plain:
                if not self.started:
                    raise NotColumnWise("the header line")
                self._hold(number, fields)
                return
        out.append(line)
        self.rows += 1
        if self.started:
            self.open, self.kept_at = "kept", number
        self.started = True  # the first: the header, never continued

    def _open_short(self) -> bool:
        """The record a line may continue is held apart and has fewer fields than the header (a
        line break in a text before the last): a plain line may continue it."""
        return self.open == "apart" and len(self.apart[-1][2]) < len(self.header)

    def _fields(self, line: bytes) -> list[str]:
        return line.decode("utf-8").rstrip("\r").split(self.delimiter)

    def _hold(self, number: int, fields: list[str]) -> None:
        if len(self.apart) == APART_MOST:
            raise NotColumnWise("too many lines with a '|' or a line break in free text")
        self.apart.append((self.rows, number, fields))
        self.open = "apart"

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.position

    def close(self) -> None:
        self.closed = True
