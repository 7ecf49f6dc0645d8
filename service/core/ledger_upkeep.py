"""What ingest records again in the ledger's entries of committed partitions (Lake.restamp, under
the ingest lock), so that reads stop working it out from the files: the modification time of a
file that is the one committed (its SHA-256 the entry's) but whose time is not the entry's (copied
without its times: `cp -r`, a restore; or committed before times were recorded), which reads would
re-hash (service/core/integrity.py); the sums per billing account of entries committed before
the ledger held them (service/core/ledger_accounts.py); and the end of an entry whose recorded
end every data_end read again from its file (usage_end.read_again: not recorded, before 2026-12,
or recorded before commits bounded it and past the bound a reader gives it, as a provider's month
in local time is, until its period was delivered again), read as a commit bounds it, as those
reads found it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import duckdb

from service.core.integrity import known_sha256, quick_check
from service.core.ledger import LedgerEntry
from service.core.ledger_accounts import with_accounts
from service.core.usage_end import read_again, usage_through

log = logging.getLogger(__name__)


def restamped(entries: Sequence[LedgerEntry], path_of: Callable[[LedgerEntry], Path],
              connect: Callable[[], duckdb.DuckDBPyConnection]) -> list[LedgerEntry]:
    """`entries` with what their files at `path_of(entry)` say that they lack (the rest as they are)."""
    return _with_ends(with_accounts([_stamped(e, path_of(e)) for e in entries], path_of, connect), path_of, connect)


def _stamped(entry: LedgerEntry, path: Path) -> LedgerEntry:
    try:
        stat = path.stat()
    except OSError:
        return entry  # missing: its check says so
    if entry.sha256 is None or stat.st_size != entry.size or stat.st_mtime_ns == entry.mtime_ns:
        return entry
    # known_sha256: the ingest's quick check (Lake._current) re-hashed this file state already
    return replace(entry, mtime_ns=stat.st_mtime_ns) if known_sha256(path, stat) == entry.sha256 else entry


def _with_ends(entries: list[LedgerEntry], path_of: Callable[[LedgerEntry], Path],
               connect: Callable[[], duckdb.DuckDBPyConnection]) -> list[LedgerEntry]:
    """`entries`, each whose end is read again (read_again) given its file's, bounded as a commit
    bounds it, when that file is the one committed (quick_check); else as it is."""
    paths = {e.key: str(path_of(e)) for e in entries if read_again(e) and quick_check(path_of(e), e).ok}
    if not paths:
        return entries
    committed = {paths[e.key]: e.ingested_at for e in entries if e.key in paths}
    try:
        with connect() as con:
            found = usage_through(con, list(paths.values()), committed)
    except (duckdb.Error, OSError) as exc:  # the reads go on reading it
        log.info("the usage ends of %d partition(s) could not be read: %s", len(paths), exc)
        return entries
    return [replace(e, data_through=found.get(paths[e.key]), data_through_recorded=True, data_through_bounded=True)
            if e.key in paths else e for e in entries]
