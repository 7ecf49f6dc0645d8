"""The lake: Hive-partitioned Parquet under one root. This module is its only writer.

Layout (only `costs/` and the inventory tables are globbed by queries):

    <root>/costs/source=<name>/billing_period=YYYY-MM/data.parquet
    <root>/<table>/source=<name>/<key>=<value>/data.parquet      inventory snapshots
    <root>/_ledger/deliveries.json   what each committed (source, period) came from
    <root>/<table>/source=<name>/<key>=<value>/<version>.parquet   derived (attribution
                                     rollups, metric tops): a version per file name, never in
                                     a view; published whole with a record (service/core/
                                     derived_records.py), removed only by its `drop_versions`
    <root>/_staging/                 work in progress; never inside a table directory
    <root>/_locks/                   ingest and service locks

A partition is one file, replaced with `os.replace` after an fsync, so a reader sees the
old file or the new one, never a mix, and a crash leaves nothing inside a table. Readers
write nothing (a read-only lake answers queries); what they see of the ledger and the files
together is service/core/snapshot.py.
We never use DuckDB's `COPY ... PARTITION_BY ... OVERWRITE` on a table: it deletes the
whole target directory, i.e. every other period.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from service.core.connection import sandboxed_connection
from service.core.currency import CODE
from service.core.errors import DataError
from service.core.files import (DATA_FILE, LEDGER_FILE, TABLE_RE, check_partition_value, listed, resolved,
                                write_json_atomic)
from service.core import ledger_upkeep
from service.core.lake_file_errors import refuse_links, refuse_top_links
from service.core.integrity import PartitionCheck, quick_check
from service.core.lake_sources import SOURCE_TABLES, orphaned_sources, remove_periods, remove_source
from service.core.lake_views import cost_view, table_views
from service.core.locks import hold_lock, holder, lock_holder
from service.core.pinned_root import check_root
from service.core.ledger import LedgerEntry, LedgerState, with_replaced
from service.core.ledger_file import ledger_json, ledger_stamp, read_ledger_state
from service.core.snapshot import Snapshot, described_entries, stable_checks, take_snapshot
from service.core.snapshot_ledger import recorded
from service.core.state_files import parse_state, problems_kept
from service.core.schema import COST_COLUMN_NAMES, INVENTORY_TABLES
from service.core.units import utc_now_iso

if TYPE_CHECKING:
    from service.core.config import Config

# The DuckDB memory of an ingest connection (Lake.writer) and of the rollup build; beyond it
# DuckDB spills. The ingest process peaks at about this plus Python's own.
WRITER_MEMORY_LIMIT = "600MB"
# The DuckDB memory of a reader that rolls periods up in memory (service/attribution/compute.py
# RollupSession): it holds its answer's rows in Python beside it (`spendlake runs` at 10M
# lines: ~450 MB with the libraries), so it gets less than a writer and spills sooner
# (`runs` at 10M: 1,120 -> ~900 MB peak, the same CPU seconds; bench/README.md).
READER_MEMORY_LIMIT = "400MB"
# The DuckDB memory of `spendlake export --with-attribution` (service/attribution/per_line.py):
# its statement (the allocation's joins and windows under every cost column, then the FOCUS
# steps) needs more than 381 MiB at runs_bench's 10M month with `clusters:` (out of memory in
# 2 of 5 runs; ~250-300 MB at 1M). The rows it writes pass through Python in batches of
# service/export/files.py BATCH_ROWS, now 16,384 (~17 MB) where 65,536 (~69 MB, 2-3 held) took
# ~230 MB of the process's ~950 MB peak: DuckDB is given that instead (10M: peak 928 MB).
EXPORT_MEMORY_LIMIT = "560MB"


class Lake:
    """The lake at `root`. `sources`: the source names the config declares (billing and
    inventory); only their partitions are read, and the others are orphans (`status`,
    `forget`). None: every source the lake holds counts (tools and tests)."""

    def __init__(self, root: str | os.PathLike[str], sources: Iterable[str] | None = None,
                 config_file: str | os.PathLike[str] | None = None):
        self.root = resolved(root)
        self.sources = None if sources is None else frozenset(sources)
        # recorded by each ingest beside its sources: another config on this lake keeps them
        self.config_file = None if config_file is None else resolved(config_file)
        self.staging = self.root / "_staging"
        self.ledger_file = self.root / LEDGER_FILE
        self.locks = self.root / "_locks"

    @classmethod
    def of(cls, config: Config) -> Lake:
        """The config's lake, counting only the sources it declares. A config that declares
        none (a read-only reporting config) reads every source the lake holds."""
        names = [s.name for s in (*config.sources, *config.inventory)]
        return cls(config.lake, sources=names or None, config_file=None if config.file == "<config>" else config.file)

    # ---- paths ----------------------------------------------------------------------

    def table_dir(self, table: str) -> Path:
        if not TABLE_RE.match(table):
            raise ValueError(f"invalid table name {table!r}")
        return self.root / table

    def table_glob(self, table: str) -> str:
        """Glob of a table's data files: exactly `<key>=<v>/<key>=<v>/data.parquet`."""
        return str(self.table_dir(table) / "*=*" / "*=*" / DATA_FILE)

    def has_table(self, table: str) -> bool:
        """True when the table has a partition a query sees (an inventory table: of a
        configured source), or a record of one (a read then names it missing). A pinned lake's
        folder gone fails it, as every read: it is not a lake without the table."""
        check_root(self.root)
        return any(table not in INVENTORY_TABLES or self.counts(f.parent.parent.name.split("=", 1)[1])
                   for f in listed(self.table_dir(table), f"*=*/*=*/{DATA_FILE}")) or recorded(self, table)

    def partition_file(self, table: str, partitions: Sequence[tuple[str, str]]) -> Path:
        path = self.table_dir(table)
        for key, value in partitions:
            path = path / f"{key}={check_partition_value(key, value)}"
        return path / DATA_FILE

    # ---- DuckDB ---------------------------------------------------------------------

    def connect(self, *, extra_paths: Sequence[str | os.PathLike[str]] = (), threads: int | None = None,
                memory_limit: str | None = None, writer: bool = False) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection limited to the lake (service/core/connection.py). `writer`: see
        Lake.writer; it spills to the lake's staging area."""
        check_root(self.root)
        refuse_top_links(self.root)
        return sandboxed_connection(self.root, self.staging, extra_paths=extra_paths, threads=threads,
                                    memory_limit=memory_limit, writer=writer)

    def writer(self, extra_paths: Sequence[str | os.PathLike[str]] = ()) -> duckdb.DuckDBPyConnection:
        """The connection an ingest reads sources and writes the lake through: at most
        WRITER_MEMORY_LIMIT, spilling to the staging area beyond it, and no insertion order
        to keep (a lake file's row order means nothing; keeping it makes DuckDB buffer, and
        spill, whole batches: 3.6 GB for a 10M-line CUR 2.0 Parquet file). Each query's peak
        memory and spill are profiled (service.core.staging logs them)."""
        return self.connect(extra_paths=extra_paths, memory_limit=WRITER_MEMORY_LIMIT, writer=True)

    def query(self, snapshot: Snapshot | None = None, *, memory_limit: str | None = None,
              tables: Collection[str] | None = None) -> duckdb.DuckDBPyConnection:
        """A sandboxed connection with a view per table (`costs`, and inventory tables);
        `costs` holds the partitions of `snapshot` (default: one taken now). `memory_limit`:
        DuckDB's, beyond which it spills to a private temporary directory (default: DuckDB's own).
        `tables`: only these tables' views (`costs` only when named, else no snapshot taken): a
        read of the job records alone skips the partitions' checks and every other table's
        footers, and a damaged table the reader does not read stops nothing."""
        con = self.connect(memory_limit=memory_limit)
        if tables is None:
            self.create_views(con, snapshot)
        else:
            if "costs" in tables:
                cost_view(con, snapshot or self.snapshot())
            table_views(self, con, tables, snapshot.tables if snapshot else None)
        return con

    def create_views(self, con: duckdb.DuckDBPyConnection, snapshot: Snapshot | None = None) -> None:
        """`costs` over the ledger's verified partitions of the configured sources (`snapshot`, default
        one taken now) and a view per inventory table (service/core/lake_views.py)."""
        cost_view(con, snapshot or self.snapshot())
        table_views(self, con, pinned=snapshot.tables if snapshot else None)

    def table_views(self, con: duckdb.DuckDBPyConnection, tables: Collection[str] | None = None) -> None:
        """A view per inventory table (of `tables`, default every one); see lake_views.table_views."""
        table_views(self, con, tables)

    def counts(self, source: str) -> bool:
        """True when `source` is one the config declares (or no config was given)."""
        return self.sources is None or source in self.sources

    # ---- what the ledger says against what is on disk ----------------------------------

    def cost_checks(self, *, deep: bool = False) -> list[PartitionCheck]:
        """Every cost partition of the configured sources next to its ledger entry, plus
        the partitions on disk that the ledger does not list (`unlisted`)."""
        return stable_checks(self, deep=deep)[1]

    def snapshot(self, tables: Collection[str] = ()) -> Snapshot:
        """The configured sources' cost partitions, each checked against the ledger (size,
        footer row count, and the last `verify`); any mismatch is a DataError naming the
        files and the fix, never a smaller total. `tables`: inventory tables held with them."""
        return take_snapshot(self, tables)

    def verify(self, record: bool = True) -> list[PartitionCheck]:
        """Re-hash and re-sum every configured cost partition; the damaged ones are recorded
        (`_state/verify.json`, `record_verify`) so the next ingest re-reads them even when the
        size matches."""
        checks = self.cost_checks(deep=True)
        if record:
            self.record_verify(checks)
        return checks

    def record_verify(self, checks: list[PartitionCheck]) -> None:
        found = [{"source": c.source, "billing_period": c.period, "state": c.state, "detail": c.detail}
                 for c in checks if not c.ok]
        problems = problems_kept(self.read_state("verify"), found, {(c.source, c.period) for c in checks},
                                 lambda p: (p["source"], p["billing_period"]))
        self.write_state("verify", {"checked_at": utc_now_iso(), "partitions": len(checks), "problems": problems})

    def forget(self, source: str, periods: Collection[str] = ()) -> list[str]:
        """Remove everything the lake holds of `source`, or only its `periods` (ledger rows first: the
        commit point, so a crash in between leaves only files no view reads); returns the tables touched."""
        check_partition_value("source", source)
        tables = [t for t in SOURCE_TABLES if (self.table_dir(t) / f"source={source}").exists()]
        def dropped(e: LedgerEntry) -> bool:
            return e.source == source and (not periods or e.billing_period in periods)

        with self.lock("ingest"):
            state = self.ledger_state()
            self._write_ledger([e for e in state.entries if not dropped(e)],
                               [e for e in state.pending if not dropped(e)], state.pending_by)
            if periods:
                remove_periods(self, source, periods)
            else:
                remove_source(self, source)
        return tables

    @staticmethod
    def _cost_key(entry: LedgerEntry) -> list[tuple[str, str]]:
        return [("source", entry.source), ("billing_period", entry.billing_period)]

    def orphans(self) -> dict[str, list[str]]:
        """Sources the lake holds that the config does not declare → the tables holding them."""
        return {} if self.sources is None else orphaned_sources(self, self.sources, self.ledger())

    # ---- locking and staging ---------------------------------------------------------

    def lock(self, name: str = "ingest") -> AbstractContextManager[None]:
        """An exclusive, non-blocking lock on the lake (service/core/locks.py)."""
        check_root(self.root)
        return hold_lock(self.locks, name)

    def writing(self, name: str = "ingest") -> bool:
        """True while a writer (this process or another) holds the `name` lock."""
        return self.lock_holder(name) is not None

    def lock_holder(self, name: str = "ingest") -> str | None:
        """Who holds the `name` lock (`holder()` of service/core/locks.py), None while no writer does."""
        return lock_holder(self.locks, name)

    def clean_staging(self) -> None:
        """Remove what a crashed writer left behind. Call only while holding the ingest lock."""
        refuse_links(self.root, self.staging)  # rmtree refuses a link, and a commit renames from there
        if self.staging.exists():
            shutil.rmtree(self.staging)
        self.staging.mkdir(parents=True, exist_ok=True)

    @contextmanager
    def scratch(self) -> Iterator[Path]:
        """A private directory under staging, removed afterwards (downloads, partial files)."""
        path = self.staging / f"scratch-{uuid.uuid4().hex}"
        path.mkdir(parents=True)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    # ---- the ledger -------------------------------------------------------------------

    def ledger(self) -> list[LedgerEntry]:
        """Each period's entry that describes its file in place (snapshot.described_entries)."""
        return described_entries(self, self.ledger_state())

    def ledger_state(self) -> LedgerState:
        """Committed and pending entries, with the stamp of the file they were read from."""
        check_root(self.root)
        return read_ledger_state(self.ledger_file)

    def ledger_stamp(self) -> tuple[int, ...]:
        return ledger_stamp(self.ledger_file)

    def ledger_entry(self, source: str, period: str) -> LedgerEntry | None:
        for entry in self.ledger():
            if entry.source == source and entry.billing_period == period:
                return entry
        return None

    def has_delivery(self, source: str, delivery_id: str, periods: Sequence[str] | None = None,
                     reader_version: int = 0) -> bool:
        """True when this delivery is what the lake already holds for its periods, and their
        files still match the ledger (a damaged period is re-ingested, whatever its id) and
        hold today's columns (a partition written before a column was added is rewritten) and
        currency codes (one written before codes were trimmed and upper-cased: 'usd', ' USD '),
        as the connector's `reader_version` reads them (an older reading is read again)."""
        damaged = self._damaged()
        delivered = [e for e in self.ledger() if e.source == source and e.delivery_id == delivery_id]
        held = {e.billing_period for e in delivered
                if e.key not in damaged and e.reader_version >= reader_version and self._current(e)}
        # periods unknown until the data is read: those it delivered last time
        wanted = {e.billing_period for e in delivered} if periods is None else set(periods)
        return bool(wanted) and wanted <= held

    def moved_files(self, source: str, delivery_id: str, files: Sequence[str]) -> None:
        """The entries of a delivery found unchanged at another place (its location moved:
        service.ingest.periods) name its files there: a file of theirs that fails later holds
        their periods back, found by its name. Call only while holding the ingest lock."""
        state = self.ledger_state()
        entries = [replace(e, files=tuple(files)) if e.source == source and e.delivery_id == delivery_id else e
                   for e in state.entries]
        if entries != list(state.entries):
            self._write_ledger(entries, list(state.pending), state.pending_by)

    def restamp(self) -> None:
        """Record in the ledger what reads would otherwise work out again from a committed file
        (service/core/ledger_upkeep.py: its modification time, its sums per billing account).
        Call only while holding the ingest lock."""
        state = self.ledger_state()
        entries = ledger_upkeep.restamped(state.entries, lambda e: self.partition_file("costs", self._cost_key(e)),
                                          self.connect)
        if entries != list(state.entries):
            self._write_ledger(entries, list(state.pending), state.pending_by)

    def _current(self, entry: LedgerEntry) -> bool:
        check = quick_check(self.partition_file("costs", self._cost_key(entry)), entry)
        return check.ok and check.columns == COST_COLUMN_NAMES and all(
            t.currency is None or CODE.fullmatch(t.currency) for t in entry.totals)

    def _write_ledger(self, entries: list[LedgerEntry], pending: list[LedgerEntry], by: str = "") -> None:
        write_json_atomic(self.ledger_file, ledger_json(entries, pending, by))

    def announce(self, new_entries: Sequence[LedgerEntry]) -> None:
        """Before a commit moves its files into place: its entries, as pending (see
        service/core/snapshot.py), by this process: the holder of the ingest lock, which it must hold."""
        keys = {e.key for e in new_entries}
        state = self.ledger_state()
        entries = list(state.entries)
        if any(e.key in keys and e.days_outdated for e in entries):  # day sums of before: read them now,
            from service.core.commit import with_day_sums  # while the file they describe is still in place

            with self.connect() as con:
                entries = [with_day_sums(con, e, self.partition_file("costs", self._cost_key(e)))
                           if e.key in keys and e.days_outdated and quick_check(
                               self.partition_file("costs", self._cost_key(e)), e).ok else e for e in entries]
        self._write_ledger(entries, [e for e in state.pending if e.key not in keys] + list(new_entries), holder())

    def settle(self) -> None:
        """Pending entries of a commit that did not finish: recorded where their file is in
        place, dropped where it is not. Call only while holding the ingest lock."""
        state = self.ledger_state()
        if state.pending:
            self._write_ledger(described_entries(self, state), [])

    def record(self, new_entries: Sequence[LedgerEntry]) -> None:
        keys = {e.key for e in new_entries}
        state = self.ledger_state()
        self._write_ledger([e for e in state.entries if e.key not in keys] + with_replaced(state.entries, new_entries),
                           [e for e in state.pending if e.key not in keys], state.pending_by)
        verify = self.read_state("verify")
        if self._damaged() & keys:  # a re-commit repairs what `verify` found
            verify["problems"] = [p for p in verify["problems"] if (p["source"], p["billing_period"]) not in keys]
            self.write_state("verify", verify)

    def _damaged(self) -> set[tuple[str, str]]:
        """(source, period) of the partitions the last `verify` found damaged."""
        return {(p["source"], p["billing_period"]) for p in self.read_state("verify").get("problems", [])}

    # ---- job and source state (what must survive a restart) ----------------------------

    def state_file(self, name: str) -> Path:
        if not TABLE_RE.match(name):
            raise ValueError(f"invalid state name {name!r}")
        return self.root / "_state" / f"{name}.json"

    def read_state(self, name: str) -> dict:
        check_root(self.root)
        path = self.state_file(name)
        if not path.exists():
            return {}
        return parse_state(name, path.read_bytes(), str(path))

    def write_state(self, name: str, data: dict) -> None:
        check_root(self.root)
        write_json_atomic(self.state_file(name), data)

    # ---- commits (service/core/commit.py writes the files) ---------------------------------
    # imported by the writers only: commit stages through Arrow, which a query never loads

    def commit_costs(self, con: duckdb.DuckDBPyConnection,
                     relation: duckdb.DuckDBPyRelation | Sequence[duckdb.DuckDBPyRelation], *, source: str,
                     delivery_id: str, periods: Sequence[str] | None, files: Sequence[str] = (),
                     **checks) -> list[LedgerEntry]:
        """See commit.commit_costs (`checks`: strict, warn)."""
        from service.core import commit

        return commit.commit_costs(self, con, relation, source=source, delivery_id=delivery_id, periods=periods,
                                   files=files, **checks)

    def commit_snapshot(self, con: duckdb.DuckDBPyConnection, relation: duckdb.DuckDBPyRelation, *,
                        table: str, source: str, key: str, value: str, version: str | None = None,
                        facts: dict | None = None) -> Path:
        from service.core import commit

        return commit.commit_snapshot(self, con, relation, table=table, source=source, key=key, value=value,
                                      version=version, facts=facts)
