"""The lake: Hive-partitioned Parquet under one root. This module is its only writer.

Layout (only `costs/` and the inventory tables are globbed by queries):

    <root>/costs/source=<name>/billing_period=YYYY-MM/data.parquet
    <root>/<table>/source=<name>/<key>=<value>/data.parquet      inventory snapshots
    <root>/_ledger/deliveries.json   what each committed (source, period) came from
    <root>/<table>/source=<name>/<key>=<value>/<version>.parquet   derived (attribution
                                     rollups): a version per file name, never in a view
    <root>/_staging/                 work in progress; never inside a table directory
    <root>/_locks/                   ingest and service locks

A partition is one file, replaced with `os.replace` after an fsync, so a reader sees the
old file or the new one, never a mix, and a crash leaves nothing inside a table.
We never use DuckDB's `COPY ... PARTITION_BY ... OVERWRITE` on a table: it deletes the
whole target directory, i.e. every other period.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from service.core.errors import DataError, LakeBusyError, SpendlakeError
from service.core.ledger import CurrencyTotals, LedgerEntry, parse_ledger
from service.core.schema import COST_COLUMNS
from service.core.staging import DATA_FILE, stage_periods

PARTITION_VALUE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
TABLE_RE = re.compile(r"^[a-z][a-z0-9_]*$")
WRITER_MEMORY_LIMIT = "600MB"
LEDGER_FILE = "_ledger/deliveries.json"  # relative to the lake root


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: object) -> None:
    """Write JSON next to `path`, fsync, then rename over it: readers see old or new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_path(path.parent)


def check_partition_value(name: str, value: str) -> str:
    """Partition values become directory names: refuse anything that could traverse."""
    if not PARTITION_VALUE_RE.match(value) or ".." in value:
        raise DataError(f"invalid {name} value {value!r} for a lake partition")
    return value


class Lake:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).resolve()
        self.staging = self.root / "_staging"
        self.ledger_file = self.root / LEDGER_FILE
        self.locks = self.root / "_locks"

    # ---- paths ----------------------------------------------------------------------

    def table_dir(self, table: str) -> Path:
        if not TABLE_RE.match(table):
            raise ValueError(f"invalid table name {table!r}")
        return self.root / table

    def table_glob(self, table: str) -> str:
        """Glob of a table's data files: exactly `<key>=<v>/<key>=<v>/data.parquet`."""
        return str(self.table_dir(table) / "*=*" / "*=*" / DATA_FILE)

    def has_table(self, table: str) -> bool:
        return any(self.table_dir(table).glob(f"*=*/*=*/{DATA_FILE}"))

    def partition_file(self, table: str, partitions: Sequence[tuple[str, str]]) -> Path:
        path = self.table_dir(table)
        for key, value in partitions:
            path = path / f"{key}={check_partition_value(key, value)}"
        return path / DATA_FILE

    # ---- DuckDB ---------------------------------------------------------------------

    def connect(self, *, extra_paths: Sequence[str | os.PathLike[str]] = (), threads: int | None = None,
                memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection whose file access is limited to the lake (plus `extra_paths`,
        the local source files an ingest reads). The configuration is then locked, so SQL
        cannot turn external access back on, install extensions or read elsewhere."""
        self.root.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(":memory:")
        dirs = [str(self.root) + os.sep]
        paths: list[str] = []
        for extra in extra_paths:
            extra = Path(extra).resolve()
            (dirs if extra.is_dir() else paths).append(str(extra) + (os.sep if extra.is_dir() else ""))
        con.execute("SET allowed_directories = ?", [dirs])
        if paths:
            con.execute("SET allowed_paths = ?", [paths])
        con.execute("SET temp_directory = ?", [str(self.staging / "duckdb_tmp")])
        if memory_limit:
            con.execute("SET memory_limit = ?", [memory_limit])
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        return con

    def query(self) -> duckdb.DuckDBPyConnection:
        """A sandboxed connection with a view per table (`costs`, and inventory tables)."""
        con = self.connect()
        self.create_views(con)
        return con

    def create_views(self, con: duckdb.DuckDBPyConnection) -> None:
        if self.has_table("costs"):
            con.execute(
                f"CREATE OR REPLACE VIEW costs AS SELECT * FROM read_parquet('{self.table_glob('costs')}', "
                "hive_partitioning = true, hive_types = {'source': VARCHAR, 'billing_period': VARCHAR})"
            )
        else:
            columns = ", ".join(f"CAST(NULL AS {kind}) AS {name}" for name, kind in COST_COLUMNS)
            con.execute(
                f"CREATE OR REPLACE VIEW costs AS SELECT {columns}, "
                "CAST(NULL AS VARCHAR) AS source, CAST(NULL AS VARCHAR) AS billing_period WHERE false"
            )
        for table_dir in sorted(self.root.iterdir()) if self.root.exists() else ():
            name = table_dir.name
            if name == "costs" or not TABLE_RE.match(name) or not self.has_table(name):
                continue
            con.execute(
                f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet('{self.table_glob(name)}', "
                "hive_partitioning = true, hive_types_autocast = false)"
            )

    # ---- locking and staging ---------------------------------------------------------

    @contextmanager
    def lock(self, name: str = "ingest") -> Iterator[None]:
        """An exclusive, non-blocking lock; the holder's pid is written into the lock file."""
        self.locks.mkdir(parents=True, exist_ok=True)
        path = self.locks / f"{name}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                raise LakeBusyError(
                    f"another spendlake {name} holds the lake (pid {holder})",
                    where=str(path),
                    hint="wait for it to finish, or stop that process",
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            yield
        finally:
            os.close(fd)

    def clean_staging(self) -> None:
        """Remove what a crashed writer left behind. Call only while holding the ingest lock."""
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
        if not self.ledger_file.exists():
            return []
        return parse_ledger(self.ledger_file.read_text(encoding="utf-8"), str(self.ledger_file))

    def ledger_entry(self, source: str, period: str) -> LedgerEntry | None:
        for entry in self.ledger():
            if entry.source == source and entry.billing_period == period:
                return entry
        return None

    def has_delivery(self, source: str, delivery_id: str, periods: Sequence[str] | None = None) -> bool:
        """True when this delivery is what the lake already holds for its periods."""
        held = {e.billing_period for e in self.ledger() if e.source == source and e.delivery_id == delivery_id}
        if periods is None:
            return bool(held)
        return bool(periods) and set(periods) <= held

    def _write_ledger(self, entries: list[LedgerEntry]) -> None:
        entries = sorted(entries, key=lambda e: (e.source, e.billing_period))
        write_json_atomic(self.ledger_file, {"entries": [e.to_json() for e in entries]})

    def record(self, new_entries: Sequence[LedgerEntry]) -> None:
        keys = {(e.source, e.billing_period) for e in new_entries}
        kept = [e for e in self.ledger() if (e.source, e.billing_period) not in keys]
        self._write_ledger(kept + list(new_entries))

    # ---- job and source state (what must survive a restart) ----------------------------

    def state_file(self, name: str) -> Path:
        if not TABLE_RE.match(name):
            raise ValueError(f"invalid state name {name!r}")
        return self.root / "_state" / f"{name}.json"

    def read_state(self, name: str) -> dict:
        path = self.state_file(name)
        if not path.exists():
            return {}
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise DataError(f"state file is unreadable: {exc}", where=str(path), hint="delete it to start afresh") from None

    def write_state(self, name: str, data: dict) -> None:
        write_json_atomic(self.state_file(name), data)

    # ---- commits ------------------------------------------------------------------------

    def install(self, staged: Path, target: Path) -> None:
        """fsync a staged file, then atomically put it in place of `target`."""
        _fsync_path(staged)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged, target)
        _fsync_path(target.parent)

    def commit_costs(
        self,
        con: duckdb.DuckDBPyConnection,
        relation: duckdb.DuckDBPyRelation,
        *,
        source: str,
        delivery_id: str,
        periods: Sequence[str] | None,
        files: Sequence[str] = (),
    ) -> list[LedgerEntry]:
        """Write one delivery (canonical cost columns) as the new content of its periods.

        `periods`: the billing periods the delivery declares (from its manifest); rows in
        any other period are a data error. None: every period found in the data.
        Nothing is replaced until every period of the delivery has been staged.
        """
        check_partition_value("source", source)
        stage = self.staging / f"costs-{uuid.uuid4().hex}"
        stage.mkdir(parents=True)
        try:
            view = f"delivery_{uuid.uuid4().hex}"
            relation.create_view(view)
            staged = stage_periods(con, view, stage, periods)
            if periods is not None:
                extra = set(staged) - set(periods)
                if extra:
                    raise DataError(f"rows of billing period(s) {sorted(extra)} in a delivery for {sorted(periods)}",
                                    where=", ".join(files) or source, hint="check the export's BillingPeriodStart")
                for period in set(periods) - set(staged):
                    empty = stage / f"billing_period={period}" / DATA_FILE
                    empty.parent.mkdir(parents=True)
                    con.execute(f"COPY (SELECT * FROM {view} WHERE false) TO '{empty}' (FORMAT parquet)")
                    staged[period] = empty
            con.execute(f"DROP VIEW {view}")
            entries = [self._ledger_entry(con, staged[p], source, p, delivery_id, files) for p in sorted(staged)]
            for entry in entries:
                self.install(staged[entry.billing_period],
                             self.partition_file("costs", [("source", source), ("billing_period", entry.billing_period)]))
            self.record(entries)
            return entries
        except duckdb.Error as exc:
            # DuckDB's CSV errors append pages of reader options; the first lines say what is wrong.
            reason = str(exc).split("Parser options", 1)[0].strip()
            raise DataError(f"could not read the delivery: {reason}", where=", ".join(files) or source) from None
        except OSError as exc:
            raise SpendlakeError(f"could not write to the lake: {exc.strerror or exc}", where=str(self.root),
                                 hint="free disk space or fix permissions; the previous data is intact") from None
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    def _ledger_entry(self, con, path: Path, source: str, period: str, delivery_id: str,
                      files: Sequence[str]) -> LedgerEntry:
        rows = con.execute(
            "SELECT BillingCurrency, count(*), sum(BilledCost), sum(EffectiveCost), "
            "bool_or(coalesce(trim(InvoiceId), '') <> '') FROM read_parquet(?) GROUP BY 1 ORDER BY 1 NULLS LAST",
            [str(path)],
        ).fetchall()
        totals = tuple(CurrencyTotals(cur, int(n), billed, effective) for cur, n, billed, effective, _ in rows)
        final = bool(rows) and all(r[4] for r in rows)
        return LedgerEntry(source=source, billing_period=period, delivery_id=delivery_id,
                           rows=sum(t.rows for t in totals), totals=totals, final=final,
                           ingested_at=utc_now_iso(), files=tuple(files))

    def commit_snapshot(self, con: duckdb.DuckDBPyConnection, relation: duckdb.DuckDBPyRelation, *,
                        table: str, source: str, key: str, value: str, version: str | None = None) -> Path:
        """Replace one inventory snapshot partition (e.g. resource_tags by snapshot_date).
        Derived tables (attribution rollups) pass `version`: the file is `<version>.parquet`,
        invisible to the table views, and the partition's other versions are dropped."""
        target = self.partition_file(table, [("source", source), (key, value)])
        if version is not None:
            target = target.with_name(f"{check_partition_value('version', version)}.parquet")
        self.staging.mkdir(parents=True, exist_ok=True)
        staged = self.staging / f"{table}-{uuid.uuid4().hex}.parquet"
        try:
            view = f"snapshot_{uuid.uuid4().hex}"
            relation.create_view(view)
            con.execute(f"COPY (SELECT * FROM {view}) TO '{staged}' (FORMAT parquet, COMPRESSION zstd)")
            con.execute(f"DROP VIEW {view}")
            self.install(staged, target)
            for other in target.parent.glob("*.parquet") if version is not None else ():
                if other != target:
                    other.unlink(missing_ok=True)
            return target
        except OSError as exc:
            raise SpendlakeError(f"could not write to the lake: {exc.strerror or exc}", where=str(self.root),
                                 hint="free disk space or fix permissions; the previous data is intact") from None
        finally:
            staged.unlink(missing_ok=True)
