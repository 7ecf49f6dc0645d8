"""What a query does beside rolling a period up from its raw lines because its stored rollup is
missing or stale (service/attribution/rollup.py `rollup_view`): it tells the person waiting, and
a long-running reader keeps the rolled-up rows for its next request.

Told: a command's reader is told once on stderr (`told_by`, the CLI's), when the periods hold
NOTE_LINES lines or more: a wait worth a word, and its fix (`spendlake rollup`); -v logs it always.
Kept: serve's API (`kept_in`) keeps each period's rolled-up rows by the rollup file's version
(the config's fingerprint, the delivery, the inventory and jobs read: a change of any misses)
and what the query reads of it, bounded in bytes, least recently used first out; so a stale
period is rolled up once per state of the lake and config, not on every request. Queries still
write nothing to the lake (issue 13 item 4). Context variables: set for a command or a request,
never left set in the process.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# The bench's 10M-line month rolls up in ~11 CPU s with `clusters:`, ~3.6 without (bench/README.md
# query42): from a million lines on a reader waits a second or more
NOTE_LINES = 1_000_000
# serve's rolled-up periods kept at most: the bench's 10M-line month with `clusters:` by
# project,experiment holds 2.8 MB, by team,job_type with --explain 53 MB (bench/README.md stale43)
KEPT_BYTES = 256 * 1024 * 1024

_tell: ContextVar[Callable[[str], None] | None] = ContextVar("spendlake_rollup_tell", default=None)
_kept: ContextVar[RollupsKept | None] = ContextVar("spendlake_rollups_kept", default=None)


@contextmanager
def told_by(tell: Callable[[str], None]) -> Iterator[None]:
    """While inside, the first note of periods rolled up from their raw lines goes to `tell`; later ones not."""
    said: list[str] = []

    def once(text: str) -> None:
        if not said:
            said.append(text)
            tell(text)

    token = _tell.set(once)
    try:
        yield
    finally:
        _tell.reset(token)


def tell_rolled_up(parts: Sequence[Any]) -> None:
    """Say that `parts` (rollup_versions.Partition) are rolled up from their raw lines, to the
    reader `told_by` names, when they hold NOTE_LINES lines or more."""
    tell = _tell.get()
    lines = sum(part.entry.rows for part in parts if part.entry is not None)
    if tell is None or lines < NOTE_LINES:
        return
    named = ", ".join(f"{part.source} {part.period}" for part in parts[:5]) + (" …" if len(parts) > 5 else "")
    tell(f"{len(parts)} period(s) ({named}; {lines:,} lines) have no stored rollup for this config (it changed "
         "since the last ingest or `spendlake rollup`, or a build failed): attributed from their raw lines, "
         "which is slower; `spendlake rollup` stores them")


@dataclass(frozen=True)
class Kept:
    """A period's rolled-up rows (an Arrow table), their DuckDB types, and whether they hold
    only the lines the query's `--where` can match (rollup.py `narrowed_to`)."""

    table: Any
    types: tuple[tuple[str, str], ...]
    narrow: bool


class RollupsKept:
    """Rolled-up periods by (rollup file, needs), at most `max_bytes` of them; thread-safe."""

    def __init__(self, max_bytes: int = KEPT_BYTES):
        self.max_bytes = max_bytes
        self._kept: OrderedDict[tuple, Kept] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def files(self) -> set[str]:
        """The rollup files whose periods are kept (for some needs)."""
        with self._lock:
            return {key[0] for key in self._kept}

    @property
    def held(self) -> int:
        """Bytes of the kept tables."""
        return self._bytes

    def get(self, key: tuple) -> Kept | None:
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
            return kept

    def only(self, files: set[str]) -> None:
        """Drop the periods of rollup files other than `files` (a query's missing ones): those
        stored since, or superseded by a new delivery, inventory or config, are not asked again."""
        with self._lock:
            for key in [key for key in self._kept if key[0] not in files]:
                self._bytes -= self._kept.pop(key).table.nbytes

    def keep(self, key: tuple, kept: Kept) -> None:
        size = kept.table.nbytes
        if size > self.max_bytes:
            log.info("attribution: a period rolled up from its raw lines holds %d bytes, more than the %d kept: "
                     "the next request rolls it up again", size, self.max_bytes)
            return
        with self._lock:
            old = self._kept.pop(key, None)
            self._bytes += size - (old.table.nbytes if old else 0)
            self._kept[key] = kept
            while self._bytes > self.max_bytes:
                _, dropped = self._kept.popitem(last=False)
                self._bytes -= dropped.table.nbytes


@contextmanager
def kept_in(rollups: RollupsKept) -> Iterator[None]:
    """While inside (one request of serve's), periods rolled up from their raw lines are kept in `rollups`."""
    token = _kept.set(rollups)
    try:
        yield
    finally:
        _kept.reset(token)


def keeper() -> RollupsKept | None:
    """The RollupsKept of the current request, if any."""
    return _kept.get()
