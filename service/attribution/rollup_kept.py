"""A period rolled up from its raw lines because its stored rollup is missing or stale
(service/attribution/rollup.py `rollup_view`), kept by a long-running reader: serve's API
(`kept_in`) keeps each period's rolled-up rows by the rollup file's version (the config's
fingerprint, the delivery, the inventory and jobs read: a change of any misses) and what the
query reads of it, bounded in bytes, least recently used first out; so a stale period is rolled
up once per state of the lake and config, not on every request. Queries still write nothing to
the lake (issue 13 item 4). The context variable is set for a request, never left set in the
process. A command's reader is told of such periods (rollup_told.py).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# serve's rolled-up periods kept at most: the bench's 10M-line month with `clusters:` by
# project,experiment holds 2.8 MB, by team,job_type with --explain 53 MB (bench/README.md stale43)
KEPT_BYTES = 256 * 1024 * 1024

_kept: ContextVar[RollupsKept | None] = ContextVar("spendlake_rollups_kept", default=None)


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
