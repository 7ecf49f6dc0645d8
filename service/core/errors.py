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
        text = f"{self.where}: {self.message}" if self.where else self.message
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
