"""One hierarchy of errors. Each says what went wrong, where, and what to do next.

Only the CLI turns them into exit codes (see DESIGN.md): 2 usage/config, 3 source/data.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from pathlib import Path

from service.core.csv_lines import MAX_LINE_BYTES, longer_than_read
from service.core.logs import redact
from service.core.schema import MONEY, QUANTITY

log = logging.getLogger(__name__)


class SpendlakeError(Exception):
    """Base class. `where` names the object (file, key, config path); `hint` the next step."""

    exit_code = 3

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        # a credential (a URL's password, a query's api_key, an echoed Authorization header's
        # `Basic`/`Bearer` value) is never shown: errors reach terminals, logs, the lake's state,
        # status and the API, and go through the log lines' redaction
        self.message = redact(message)
        self.where = where and redact(where)
        self.hint = hint and redact(hint)
        super().__init__(str(self))

    def __str__(self) -> str:
        # "--top must be at least 1" names its object already: no "--top: --top must ..."
        named = not self.where or self.message.startswith(f"{self.where} ")
        text = self.message if named else f"{self.where}: {self.message}"
        if self.hint:
            text = f"{text} — {self.hint}"
        return text


class UsageError(SpendlakeError):
    """A bad flag or argument on the command line."""

    exit_code = 2


class ConfigError(UsageError):
    """The configuration file is missing, malformed or invalid; `where` is a dotted path."""


class DataError(SpendlakeError):
    """A source file or object cannot be read as the export it claims to be."""

    exit_code = 3


class SourceError(DataError):
    """The source itself failed: access denied, missing key, throttled past the retries."""


class LakeBusyError(SpendlakeError):
    """Another process holds the lake's lock."""

    exit_code = 3


class ReconciliationError(DataError):
    """Attributed totals differ from source totals."""


class NotWritableError(SpendlakeError):
    """A write refused by the file system: this user's permissions, or a mount read-only for all."""


class ResourceError(SpendlakeError):
    """The machine ran short, not the data: out of memory, or no disk left for the lake's
    staged files and DuckDB's spill files. The previous data is intact."""

    exit_code = 3


AGAIN = "then run the command again; the previous data is intact"
SHORT_OF_MEMORY = "the machine's memory (or the process's limit) ran short"  # out of memory's cause, however met
DUCKDB_DETAIL = re.compile(r'"exception_message":"((?:[^"\\]|\\.)*)"')
STAGING = "the lake's _staging directory holds staged files and DuckDB's spill files"
# errno → (what we call it, DuckDB's and the OS's words for it, what to do); DuckDB also says `"errno":"N"`
WRITE_LIMITS = {
    errno.ENOSPC: ("disk full", "No space left on device", f"free disk space on the lake's file system ({STAGING}), "
                                                          f"{AGAIN}"),
    errno.EDQUOT: ("disk quota exceeded", "Disk quota exceeded",
                   f"free space within this user's quota on the lake's file system ({STAGING}), or have the quota "
                   f"raised, {AGAIN}"),
    errno.EFBIG: ("file too large", "File too large",
                  f"a file the lake writes passed this process's file size limit (`ulimit -f`) or the largest file "
                  f"the lake's file system allows ({STAGING}): raise the limit (`ulimit -f unlimited` in the shell "
                  f"or service unit that runs spendlake) or move the lake to a file system without one, {AGAIN}"),
}


def resource_error(exc: BaseException, where: str | None = None, *, reader: bool = False) -> ResourceError | None:
    """A full disk, a used-up quota, a file size limit or exhausted memory, from DuckDB's or the
    OS's error, saying what to free or raise and where; else None. `reader`: a query's
    connection, which spills to a private folder of the system's temporary directory
    (service/core/connection.py), not to the lake's staging area as an ingest does."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    detail = DUCKDB_DETAIL.search(first)
    if detail:  # DuckDB's async write: its offsets and JSON around the OS's sentence are noise
        first = re.sub(r"\\(.)", r"\1", detail.group(1))
    if isinstance(exc, OSError) and exc.strerror and exc.filename and where == exc.filename:
        first = f"[Errno {exc.errno}] {exc.strerror}"  # `where` names the file once
    for number, (name, words, hint) in WRITE_LIMITS.items():
        if getattr(exc, "errno", None) == number or words in text or f'"errno":"{number}"' in text:
            return ResourceError(f"{name}: {first}", where=where, hint=hint)
    if type(exc).__name__ == "OutOfMemoryException" or first.startswith("Out of Memory Error"):
        if reader:
            return ResourceError(f"out of memory: {first}", where=where,
                                 hint=f"DuckDB spills to a private folder in the temporary directory "
                                      f"({tempfile.gettempdir()}) and still ran short: free memory or disk space "
                                      "there, or set TMPDIR to a folder with room, then run the command again; "
                                      "the lake is not at fault")
        return ResourceError(f"out of memory: {first}", where=where,
                             hint="DuckDB spills to the lake's _staging directory and still ran short: free memory "
                                  "or disk space there, then run ingest again; the file is not at fault")
    return None


def out_of_memory(exc: BaseException, where: str, hint: str) -> ResourceError:
    """Python's MemoryError or DuckDB's out-of-memory while reading `where`: the machine's
    memory, not the file, with `hint` (what makes the read smaller) and that the data in place
    is intact."""
    if resource := resource_error(exc, where):
        return resource
    return ResourceError(f"out of memory while reading it: {SHORT_OF_MEMORY}, the file is not at fault", where=where,
                         hint=f"{hint}; {AGAIN}")


@contextmanager
def naming(path: Path | str) -> Iterator[None]:
    """OSErrors that name no file (Arrow's "Error writing bytes to file. Detail: [errno 28] ...",
    a write() on an open file) raised again naming `path`, in the OS's words, so a full disk
    says which file it could not write."""
    try:
        yield
    except OSError as exc:
        if exc.filename or exc.errno is None:
            raise
        raise OSError(exc.errno, os.strerror(exc.errno), str(path)) from exc


NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)
NOT_WRITABLE_HINT = ("give the user running spendlake write access to the lake and read access to the sources (or "
                     "run it as the lake's owner), then run the command again; nothing was changed")
READ_ONLY_HINT = ("the file system is mounted read-only for every user: mount it read-write (or move the lake to one "
                  "that is), then run the command again; nothing was changed")


def not_writable(reason: str, where: str | None, read_only: bool) -> NotWritableError:
    """A write refused: by a file system mounted read-only (no user or owner would do better)
    or by this user's permissions."""
    if read_only:
        return NotWritableError(reason, where=where, hint=READ_ONLY_HINT)
    return NotWritableError(f"{reason} for this user", where=where, hint=NOT_WRITABLE_HINT)


def os_error(exc: OSError, where: str | None = None, *, done: str | None = None) -> SpendlakeError:
    """A file system error as one sentence whose hint matches the cause: a full disk, a
    lake (or file) this user may not write, or any other OSError naming its file. `done`:
    what the command had changed before it (a record written after a commit), said in place
    of the hint's "nothing was changed"."""
    error = _os_error(exc, where)
    if done and error.hint:
        error.hint = f"{error.hint.rsplit('; ', 1)[0]}; {done}"
    return error


def _os_error(exc: OSError, where: str | None) -> SpendlakeError:
    resource = resource_error(exc, exc.filename or where)  # the file the OS could not write, where it names one
    if resource is not None:
        return resource
    path = f"{exc.filename} → {exc.filename2}" if exc.filename and exc.filename2 else exc.filename or where
    reason = (exc.strerror or str(exc)).lower()
    if exc.errno in NOT_WRITABLE:
        return not_writable(reason, path, exc.errno == errno.EROFS)
    return SpendlakeError(reason, where=path, hint="check the path and its file system, then run the command again")


def duckdb_error(exc: BaseException, message: str, *, reason: str | None = None, where: str | None = None,
                 hint: str | None = None, reader: bool = False) -> SpendlakeError:
    """The one place a DuckDB error becomes ours, in one line whose hint matches the cause:
    a full disk or exhausted memory says so (a ResourceError: the file is not at fault, and
    re-exporting it would not help); a path the sandbox refuses names it (and the link's
    target); anything else is a DataError `message: reason`, the reason defaulting to
    DuckDB's own in one line (file line, column, what is wrong). DuckDB's own text (its row,
    its details) is logged at INFO (`spendlake -v`) on one line: `logged_text`. `reader`: see
    resource_error."""
    resource = resource_error(exc, where, reader=reader)
    if resource is not None:
        return resource
    text = str(exc).strip()
    log.info("%s: %s; DuckDB's message: %s", where or "DuckDB", message, logged_text(text))
    denied = next((m for m in ("Permission denied", "Read-only file system") if m in text), None)
    if denied:
        path = QUOTED_PATH.search(text)
        return not_writable(f"{message}: {denied.lower()}", path.group(1) if path else where,
                            denied == "Read-only file system")
    refused = SANDBOX_REFUSAL.search(text)
    if refused:
        return sandbox_error(Path(refused.group(1)), message, where)
    if conversion := CONVERSION.search(text):  # a value, not the file: "not UTF-8" or "incomplete" would mislead
        line = CSV_LINE.search(text)
        hint = (header_again(line.group(1)) if line and conversion.group(2).strip().lower() == conversion.group(1).lower()
                else "fix that value or re-export the file")
    elif hint is None and (saved := SPREADSHEET_TIME.search(text)):
        hint = spreadsheet_hint(saved.group(1) or saved.group(2))
    elif hint is None and reason is None and (UNTERMINATED in text or LINE_TOO_LONG.search(text)) and \
            (line := CSV_LINE.search(text)) and (length := longer_than_read(where, int(line.group(1)))):
        reason = f"line {line.group(1)} is {length:,} bytes, longer than the {MAX_LINE_BYTES:,} the CSV reader takes"
        hint = ("a value that long (a resource's tags, a job's labels): deliver the file as Parquet, which has no "
                "such limit, or shorten the value in the export")
    elif hint is None and (longest := LINE_TOO_LONG.search(text)):
        hint = f"no line of an export is over {int(longest.group(1)):,} bytes but for {LONG_VALUE}"
    reason = reason or one_line(text)
    if where and reason.startswith(f"{where}: "):  # a value's error names its file (table.fail): once is enough
        reason = reason[len(where) + 2:]
    return DataError(f"{message}: {reason}", where=where, hint=hint)


def header_again(line: int | str) -> str:
    """The hint for a value on `line` that is its column's name: the header row again."""
    return (f"line {line} repeats the header row: two exports joined into one file (`cat a.csv b.csv`)? deliver each "
            "export as a file of its own")


def logged_text(text: str) -> str:
    """DuckDB's text for the -v log on one line (` | ` between its lines), without the fixes
    that do not apply and the reader's options after them (the file's path again), each line
    at most MAX_REASON characters: its offending CSV row may be megabytes."""
    text = POSSIBLE_FIXES.split(text, 1)[0].split("Parser options", 1)[0]
    lines = [item.strip() for item in text.splitlines() if item.strip()]
    return " | ".join(item if len(item) <= MAX_REASON else item[:MAX_REASON] + CUT for item in lines)


def spreadsheet_hint(time: str) -> str:
    """What to say of a time a spreadsheet wrote (`spreadsheet_time`) where the file's format writes ISO 8601."""
    return (f"a spreadsheet that opened and saved the file rewrote its times ({time}): ingest the export as "
            "delivered, or save the times as ISO 8601 (2024-09-01T00:00:00Z)")


def spreadsheet_time(value: str) -> bool:
    """Whether `value` is a time as Excel saves it (9/1/2024 0:00, 09/01/2024 12:00 AM)."""
    return re.fullmatch(_US_TIME, value.strip()) is not None


def told_by_known_names(error: SpendlakeError, shown: Mapping[str, str]) -> SpendlakeError:
    """`error` with the local files of `shown` it names told by the names users know (an S3
    object's download in the lake's scratch by its s3:// URI); when it names exactly one, that
    file is its `where`, not every file of the read."""
    named = [name for local, name in shown.items() if local in error.message]
    for local, name in shown.items():
        error.message = error.message.replace(local, name)
    if len(named) == 1:
        error.where = named[0]
    return error


def duckdb_reason(exc: BaseException) -> str:
    """What DuckDB says is wrong, without what follows: its CSV reader appends fixes that do
    not apply to an export (`strict_mode=false`, `ignore_errors=true`) and its options."""
    text = str(exc).strip()
    for end in ("\n\n", "\nPossible fixes", "Parser options"):
        text = text.split(end, 1)[0]
    return text.strip() or type(exc).__name__


SANDBOX_REFUSAL = re.compile(r'Cannot access (?:file|directory) "(.+?)" - file system operations are disabled')
QUOTED_PATH = re.compile(r'"(/[^"]+)"')
CSV_LINE = re.compile(r"CSV Error on Line: (\d+)")
LINE_TOO_LONG = re.compile(r"Maximum line size of (\d+) bytes exceeded")  # DuckDB's max_line_size
UNTERMINATED = "Value with unterminated quote found"  # DuckDB's of a quote left open, and of a line past its buffer
# what makes a CSV line (DuckDB's read) or field (Python's, a jobs file's) too long, and what to do
LONG_VALUE = ("a quote left open, which runs on to later lines (close it, or re-export the file), or a value that "
              "long (a resource's tags, a job's labels): deliver the file as Parquet")
POSSIBLE_FIXES = re.compile(r"\nPossible (?:fixes|solutions):")
# a time as Excel saves it (9/1/2024 0:00, 09/01/2024 12:00 AM) where the file's own format wants ISO 8601
_US_TIME = r"\d{1,2}/\d{1,2}/\d{2,4}(?: \d{1,2}:\d\d(?::\d\d)?(?: ?[AP]M)?)?"
SPREADSHEET_TIME = re.compile(rf": column [^:]+: not a date/time: ({_US_TIME})\s*$|invalid timestamp field format: "
                              rf'"({_US_TIME})"', re.M)
CONVERSION = re.compile(r'Error when converting column "(.+?)"\. Could not convert string "(.*?)" to \'([^\']+)\'', re.S)
ERROR_KIND = re.compile(r"^[A-Z][A-Za-z ]* Error: ")
MAX_REASON = 400
CUT = "…"  # what ends a text cut at MAX_REASON


def one_line(text: str) -> str:
    """DuckDB's error in one line: for a CSV error `line N, column C: reason`, without the
    offending line's text and the pages of reader options that follow."""
    text = text.strip()
    fixes = POSSIBLE_FIXES.split(text, 1)  # fixes that do not apply, then the reader's options
    # a CSV error's "Original Line:" may begin with the blank lines before the row: the reason follows them
    paragraph = fixes[0] if len(fixes) > 1 and CSV_LINE.search(fixes[0]) else text.split("\n\n", 1)[0]
    line = CSV_LINE.search(paragraph)
    conversion = CONVERSION.search(paragraph)
    if conversion:
        column, value, kind = conversion.groups()
        reason = f"column {column}: {conversion_reason(value, kind)}"
    else:
        lines = [ERROR_KIND.sub("", item).strip() for item in paragraph.splitlines() if item.strip()]
        reason = lines[-1] if line and len(lines) > 1 else (lines[0] if lines else "DuckDB gave no reason")
    if line:
        reason = f"line {line.group(1)}{', ' if conversion else ': '}{reason}"
    return reason if len(reason) <= MAX_REASON else reason[:MAX_REASON] + CUT


def conversion_reason(value: str, kind: str) -> str:
    """Why `value` is not a `kind`: a number DuckDB refused as DECIMAL is out of its range
    (or NaN/Infinity), which "could not convert" would hide."""
    try:
        number = Decimal(value.strip())
    except (InvalidOperation, ValueError):
        return f"could not convert {value!r} to {kind}"
    if not kind.startswith("DECIMAL"):
        return f"could not convert {value!r} to {kind}"
    if not number.is_finite():
        return f"{value!r} is not a finite amount"
    return f"{value!r} is too large for the lake (money holds at most {_whole_digits(MONEY)} digits before the " \
           f"point, quantities {_whole_digits(QUANTITY)})"


def _whole_digits(kind: str) -> int:
    """DECIMAL(p,s)'s digits before the point: p - s."""
    precision, scale = re.fullmatch(r"DECIMAL\((\d+),(\d+)\)", kind).groups()
    return int(precision) - int(scale)


def sandbox_error(path: Path, message: str, where: str | None, setting: str = "`location`") -> SourceError:
    """DuckDB refused a path outside the directories it may read (the source's location,
    the lake): most often a symbolic link inside the location pointing elsewhere. An inventory
    source's listing refuses such a link with the same words (connectors/source_folder.py);
    `setting` is the config key that names the folder."""
    if path.is_symlink():
        return SourceError(f"{message}: {path} is a symbolic link to {path.resolve()}, outside the directories "
                           "spendlake may read for this source", where=where,
                           hint=f"copy the file into the folder {setting} names, or point {setting} at where it lives")
    return SourceError(f"{message}: {path} is outside the directories spendlake may read for this source",
                       where=where, hint=f"point the source's {setting} at the directory that holds it")
