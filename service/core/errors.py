"""One hierarchy of errors. Each says what went wrong, where, and what to do next.

Only the CLI turns them into exit codes (see DESIGN.md): 2 usage/config, 3 source/data.
"""

from __future__ import annotations


class SpendlakeError(Exception):
    """Base class. `where` names the object (file, key, config path); `hint` the next step."""

    exit_code = 3

    def __init__(self, message: str, *, where: str | None = None, hint: str | None = None):
        self.message = message
        self.where = where
        self.hint = hint
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


class ResourceError(SpendlakeError):
    """The machine ran short, not the data: out of memory, or no disk left for the lake's
    staged files and DuckDB's spill files. The previous data is intact."""

    exit_code = 3


DISK_FULL = ("No space left on device", "Disk quota exceeded", '"errno":"28"', '"errno":"122"')


def resource_error(exc: BaseException, where: str | None = None) -> ResourceError | None:
    """A full disk or exhausted memory, from DuckDB's or the OS's error; else None."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if getattr(exc, "errno", None) in (28, 122) or any(marker in text for marker in DISK_FULL):
        return ResourceError(f"disk full: {first}", where=where,
                             hint="free disk space for the lake (staged files and DuckDB's spill files go to "
                                  "its _staging directory), then run ingest again; the previous data is intact")
    if type(exc).__name__ == "OutOfMemoryException" or first.startswith("Out of Memory Error"):
        return ResourceError(f"out of memory: {first}", where=where,
                             hint="DuckDB spills to the lake's _staging directory and still ran short: free memory "
                                  "or disk space there, then run ingest again; the file is not at fault")
    return None


def duckdb_error(exc: BaseException, message: str, *, reason: str | None = None, where: str | None = None,
                 hint: str | None = None) -> SpendlakeError:
    """The one place a DuckDB error becomes ours. A full disk or exhausted memory says so
    (a ResourceError: the file is not at fault, and re-exporting it would not help);
    anything else is a DataError `message: reason` (default: DuckDB's first paragraph)."""
    resource = resource_error(exc, where)
    if resource is not None:
        return resource
    return DataError(f"{message}: {reason or duckdb_reason(exc)}", where=where, hint=hint)


def duckdb_reason(exc: BaseException) -> str:
    """What DuckDB says is wrong, without what follows: its CSV reader appends fixes that do
    not apply to an export (`strict_mode=false`, `ignore_errors=true`) and its options."""
    text = str(exc).strip()
    for end in ("\n\n", "\nPossible fixes", "Parser options"):
        text = text.split(end, 1)[0]
    return text.strip() or type(exc).__name__
