"""What one read sees: the delivery ledger and the cost partitions that match it, together.

A commit moves a partition's new file into place (`os.replace`) and then records its ledger
entry; in between, a reader would find a file that its ledger entry does not describe. So a
commit first writes its new entries as `pending` (service/core/ledger.py): a partition is
sound when it matches its committed entry or its pending one, and the entry it matches is
the one the reader goes by (the rollup it reads is named after it). Every write of the
ledger is a new file, so its `stamp` (inode, mtime, size) tells a reader whether anything
changed while it read.

- `stable_checks(lake)`: every configured cost partition against the entry it matches. A
  mismatch seen while the ledger changed is a commit passing by: look again. A mismatch on
  a ledger that stayed the same is damage.
- `take_snapshot(lake, tables)`: those checks, verified (damage is a DataError naming the files),
  and the inventory `tables` the read reads, held as they are now (service/core/snapshot_pins.py):
  a source read again while it reads changes neither the records nor the tags it reads.
- `read_within(lake, snapshot, read)`: `read(snapshot)` in a command's own snapshot, else as
  read_consistently reads it: each lookup of one command reads the lake state the others read.
- `read_consistently(lake, read)`: `read(snapshot)` once no commit is placing files (a commit
  fsyncs its files before it announces them: that takes renames only), and again until no
  commit touched the lake while it ran, so an answer never mixes two states; after
  READ_PATIENCE the answer stands (each file it read was whole, old or new), once the read a
  commit passed through has been read again: a read longer than that (a rules run, whose
  lookups open their own connections on files a commit replaces in place) kept a mixed
  answer otherwise. A file that
  vanished under the read (a rollup removed after its grace period) makes it read again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import duckdb

from service.core.errors import duckdb_error
from service.core.files import listed
from service.core.integrity import (PartitionCheck, deep_check, partition_error, quick_check, sha256_file,
                                    with_verify_findings)
from service.core.ledger import LedgerEntry, LedgerState, with_replaced
from service.core.lake_file_errors import refuse_top_links
from service.core.snapshot_pins import Pinned, pin_tables


class LakeFiles(Protocol):
    """What reading consistently needs of the lake (service/core/lake.py's Lake), so this
    module depends on these few operations and the lake on this module, not each on the other."""
    root: Path

    def counts(self, source: str) -> bool: ...
    def connect(self) -> duckdb.DuckDBPyConnection: ...
    def table_dir(self, table: str) -> Path: ...
    def partition_file(self, table: str, partitions: Sequence[tuple[str, str]]) -> Path: ...
    def ledger_state(self) -> LedgerState: ...
    def ledger_stamp(self) -> tuple[int, ...]: ...
    def read_state(self, name: str) -> dict: ...
    def write_state(self, name: str, data: dict) -> None: ...
    def lock_holder(self, name: str = "ingest") -> str | None: ...


log = logging.getLogger(__name__)

READ_PATIENCE = 10.0  # seconds a read waits out commits in flight before its answer stands
VANISHED_RETRIES = 3  # reads again when a file vanished under it, at most this often

T = TypeVar("T")


@dataclass(frozen=True)
class Snapshot:
    """The ledger as read, and each configured cost partition with the entry its file matches;
    `tables`: the inventory tables taken with them (snapshot_pins), read as they were then."""

    ledger: LedgerState
    checks: tuple[PartitionCheck, ...]
    in_flight: bool  # a live commit had not placed all its files yet: they may change during a read
    tables: Mapping[str, tuple[Pinned, ...]] = field(default_factory=dict, compare=False)


def check_partitions(lake: LakeFiles, state: LedgerState, *, deep: bool = False) -> tuple[list[PartitionCheck], bool]:
    """(checks, in flight): each configured partition against its committed entry or, where
    that does not match, its pending one; plus the files the ledger does not know."""
    committed = {e.key: e for e in state.entries if lake.counts(e.source)}
    pending = {e.key: e for e in state.pending if lake.counts(e.source)}
    con = lake.connect() if deep else None
    checks, waiting = [], False
    try:
        for key in sorted(set(committed) | set(pending)):
            path = lake.partition_file("costs", [("source", key[0]), ("billing_period", key[1])])
            candidates = [e for e in (committed.get(key), pending.get(key)) if e is not None]
            results = [deep_check(con, path, e) if con else quick_check(path, e) for e in candidates]
            sound = _which(path, [r for r in results if r.ok])
            if key in pending and (sound is None or sound.entry is not pending[key]):
                waiting = True
            if sound is None and key not in committed and results[0].state == "missing":
                continue  # a new period whose commit has not placed its file yet
            checks.append(sound or results[0])
    finally:
        if con:
            con.close()
    for path in listed(lake.table_dir("costs"), "source=*/billing_period=*/data.parquet"):  # beside `forget`
        source, period = (part.split("=", 1)[1] for part in (path.parent.parent.name, path.parent.name))
        if lake.counts(source) and (source, period) not in committed and (source, period) not in pending:
            checks.append(PartitionCheck(source, period, path, "unlisted", "a file the delivery ledger does not know"))
    return checks, waiting and _committing(lake, state)


def stray_files(lake: LakeFiles) -> list[PartitionCheck]:
    """Files in a configured source's cost partition folder beside its data.parquet (a copy a
    file manager made, `data (1).parquet`): no read uses them (the views read data.parquet), so
    they fail nothing; `verify` lists them (`stray`)."""
    return [PartitionCheck(path.parent.parent.name.split("=", 1)[1], path.parent.name.split("=", 1)[1], path, "stray",
                           f"{path.name}: a file beside the partition's data.parquet that no read uses (a copy?): "
                           "remove it")
            for path in listed(lake.table_dir("costs"), "source=*/billing_period=*/*")
            if path.name != "data.parquet" and lake.counts(path.parent.parent.name.split("=", 1)[1])]


def _which(path, matches: list[PartitionCheck]) -> PartitionCheck | None:
    """The check whose entry describes the file: with a commit in flight both the old and
    the new entry may match its size and rows, and only the content hash tells."""
    if len(matches) < 2:
        return matches[0] if matches else None
    digest = sha256_file(path)
    return next((m for m in matches if m.entry.sha256 == digest), None)


def described_entries(lake: LakeFiles, state: LedgerState) -> list[LedgerEntry]:
    """The ledger's entries as the files in place describe them: where a commit announced an
    entry (pending) and placed its file but has not recorded it (it is between the two, or died
    there), the pending entry, which every read of the lines goes by (check_partitions); else the
    committed one, carrying what it replaced as its record will (ledger.with_replaced). So `status`,
    the report's bills and the lines' answers tell one bill, and the next ingest records the same
    (Lake.settle)."""
    entries = {e.key: e for e in state.entries}
    placed = []
    for entry in state.pending:
        path = lake.partition_file("costs", [("source", entry.source), ("billing_period", entry.billing_period)])
        candidates = [e for e in (entries.get(entry.key), entry) if e is not None]
        sound = _which(path, [c for c in (quick_check(path, e) for e in candidates) if c.ok])
        if sound is not None and sound.entry is entry:
            placed.append(entry)
    entries.update((e.key, e) for e in with_replaced(state.entries, placed))
    return list(entries.values())


def _committing(lake: LakeFiles, state: LedgerState) -> bool:
    """Pending entries belong to a commit in flight while the writer that announced them still
    holds the ingest lock; the kernel drops it when that process dies, so its entries are
    abandoned at once (the next ingest settles them). No clock decides: a clock jumping
    forward in the middle of a commit must not let a reader read half of it. A holder not known
    (its lock file removed while held, and its name not in `.held/`) may be the one: wait for it."""
    return bool(state.pending_by) and lake.lock_holder("ingest") in (state.pending_by, "")


def stable_checks(lake: LakeFiles, *, deep: bool = False) -> tuple[LedgerState, list[PartitionCheck], bool]:
    """check_partitions on a ledger that did not change while the files were checked; a table's
    folder linked out of the lake is an error naming it (`status` reads no table through DuckDB)."""
    refuse_top_links(lake.root)
    deadline = time.monotonic() + READ_PATIENCE
    while True:
        state = lake.ledger_state()
        checks, in_flight = check_partitions(lake, state, deep=deep)
        if all(c.ok for c in checks) or lake.ledger_stamp() == state.stamp or time.monotonic() > deadline:
            return state, checks, in_flight
        time.sleep(0.02)


def take_snapshot(lake: LakeFiles, tables: Collection[str] = ()) -> Snapshot:
    """The configured cost partitions, each matching its ledger entry, or a DataError naming
    the ones that do not (and those the last `spendlake verify` found damaged); with the
    inventory `tables` held as they are now (snapshot_pins.pin_tables)."""
    state, checks, in_flight = _checked(lake)
    bad = [c for c in checks if not c.ok]
    if bad:
        raise partition_error(bad)
    return Snapshot(state, tuple(checks), in_flight, pin_tables(lake, tables))


def damaged_partitions(lake: LakeFiles) -> list[PartitionCheck]:
    """The configured cost partitions a snapshot would refuse (take_snapshot's DataError names them)."""
    return [c for c in _checked(lake)[1] if not c.ok]


def _checked(lake: LakeFiles) -> tuple[LedgerState, list[PartitionCheck], bool]:
    """stable_checks with what the last `spendlake verify` found."""
    state, checks, in_flight = stable_checks(lake)
    checks = with_verify_findings(checks, lake.read_state("verify").get("problems", []),
                                  {e.key: e for e in state.entries})
    return state, checks, in_flight


def read_consistently(lake: LakeFiles, read: Callable[[Snapshot], T], tables: Collection[str] = ()) -> T:
    """`read(snapshot)`, read again while commits change the lake under it (see the module);
    the snapshot holds the inventory `tables` the read reads (take_snapshot)."""
    deadline = time.monotonic() + READ_PATIENCE
    vanished = reread = 0
    while True:
        snapshot = take_snapshot(lake, tables)
        if snapshot.in_flight and time.monotonic() < deadline:
            time.sleep(0.05)  # a commit is placing its files: read once they are all in place
            continue
        try:
            result = read(snapshot)
        except (duckdb.IOException, FileNotFoundError) as exc:
            vanished += 1
            if vanished > VANISHED_RETRIES:
                raise duckdb_error(exc, "could not read the lake", where=str(lake.root),
                                   hint="check the lake's files and permissions, then run again") from None
            log.info("a file of the lake changed under the read (%s): reading again", str(exc).splitlines()[0])
            continue
        changed = lake.ledger_stamp() != snapshot.ledger.stamp
        if (not changed and not snapshot.in_flight) or (time.monotonic() > deadline and (reread or not changed)):
            return result
        reread += changed
        log.info("a commit changed the lake during the read: reading again")
        time.sleep(0.05)


def read_within(lake: LakeFiles, snapshot: Snapshot | None, read: Callable[[Snapshot], T],
                tables: Collection[str] = ()) -> T:
    """`read(snapshot)` in the snapshot a command read its answer in (taken with `tables`: the
    read_consistently around the whole command reads it again when a commit passed), so its
    lookups read one lake state; without one, `read_consistently(lake, read, tables)`."""
    return read(snapshot) if snapshot is not None else read_consistently(lake, read, tables)
