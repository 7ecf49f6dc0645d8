"""What ingest records again in the ledger's entries of committed partitions (Lake.restamp, under
the ingest lock), so that reads stop working it out from the files: the modification time of a
file that is the one committed (its SHA-256 the entry's) but whose time is not the entry's (copied
without its times: `cp -r`, a restore; or committed before times were recorded), which reads would
re-hash (service/core/integrity.py); and the sums per billing account of entries committed before
the ledger held them (service/core/ledger_accounts.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import duckdb

from service.core.integrity import known_sha256
from service.core.ledger import LedgerEntry
from service.core.ledger_accounts import with_accounts


def restamped(entries: Sequence[LedgerEntry], path_of: Callable[[LedgerEntry], Path],
              connect: Callable[[], duckdb.DuckDBPyConnection]) -> list[LedgerEntry]:
    """`entries` with what their files at `path_of(entry)` say that they lack (the rest as they are)."""
    return with_accounts([_stamped(e, path_of(e)) for e in entries], path_of, connect)


def _stamped(entry: LedgerEntry, path: Path) -> LedgerEntry:
    try:
        stat = path.stat()
    except OSError:
        return entry  # missing: its check says so
    if entry.sha256 is None or stat.st_size != entry.size or stat.st_mtime_ns == entry.mtime_ns:
        return entry
    # known_sha256: the ingest's quick check (Lake._current) re-hashed this file state already
    return replace(entry, mtime_ns=stat.st_mtime_ns) if known_sha256(path, stat) == entry.sha256 else entry
