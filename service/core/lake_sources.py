"""What the lake holds per source across its tables and its state: the sources the config no
longer declares (`orphans`), and removing all of one (`remove_source`, for `Lake.forget`, which
drops its ledger rows first and its record in `_state/sources.json` last: while that record or
a failure's mark stays, the source is orphaned with `source state`, and the next forget
finishes it); and removing some of its periods (`remove_periods`, for `forget SOURCE --period P`,
likewise after their ledger rows)."""

from __future__ import annotations

import shutil
from collections.abc import Collection, Iterable

from service.core import failure_marks
from service.core.derived_records import DERIVED_RECORDS, PERIOD_TABLES
from service.core.ledger import LedgerEntry
from service.core.schema import INVENTORY_TABLES
from service.core.snapshot_ledger import RECORDS, SnapshotLake
from service.core.snapshot_set_aside import forget_records

# Tables partitioned by `source=<a configured source>`: what `forget` removes and orphans live in.
SOURCE_TABLES = ("costs", "attribution_rollup", "attribution_placed", *INVENTORY_TABLES)
STATE_HELD = "source state"  # what orphans name for a source's record or failure marks in `_state/`


def remove_source(lake: SnapshotLake, source: str) -> None:
    """Remove `source`'s folders, records and state. Call only holding the ingest lock,
    after its ledger rows are gone."""
    for table in SOURCE_TABLES:
        folder = lake.table_dir(table) / f"source={source}"
        if folder.is_symlink():  # the link goes, never what it points to (rmtree refuses a link)
            folder.unlink()
        shutil.rmtree(folder, ignore_errors=True)
        forget_records(lake.root, table, source)
    for name in ("file_periods", "file_digests", "inventory_inputs"):  # what ingest knows of its files
        _drop(lake, name, source)
    verified = lake.read_state("verify")  # a verify keeps what it did not check: its damage would stay
    if any(p["source"] == source for p in verified.get("problems", [])):
        lake.write_state("verify", {**verified, "problems": [
            p for p in verified["problems"] if p["source"] != source]})
    _drop(lake, "sources", source)  # its record and marks last: what orphaned_sources sees of a forget killed before
    failure_marks.remove([mark for mark in failure_marks.marks(lake.root) if mark.source == source])


def remove_periods(lake: SnapshotLake, source: str, periods: Collection[str]) -> None:
    """Remove `source`'s cost partitions of `periods` and the rollups and placed parts derived from
    them, with their records. Call only holding the ingest lock, after their ledger rows are gone:
    a kill in between leaves files no view reads, which the next rollup build sweeps (stray)."""
    for period in periods:
        for table in ("costs", *PERIOD_TABLES):
            folder = lake.table_dir(table) / f"source={source}" / f"billing_period={period}"
            if folder.is_symlink():  # the link goes, never what it points to
                folder.unlink()
            shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(lake.root / DERIVED_RECORDS / table / f"source={source}" / f"billing_period={period}",
                          ignore_errors=True)
    verified = lake.read_state("verify")  # its damage found of a period no longer held would stay
    if any(p["source"] == source and p["billing_period"] in periods for p in verified.get("problems", [])):
        lake.write_state("verify", {**verified, "problems": [
            p for p in verified["problems"] if not (p["source"] == source and p["billing_period"] in periods)]})


def _drop(lake: SnapshotLake, name: str, source: str) -> None:
    state = lake.read_state(name)
    if state.pop(source, None) is not None:
        lake.write_state(name, state)


def orphaned_sources(lake: SnapshotLake, declared: Collection[str], ledger: Iterable[LedgerEntry]) -> dict[str, list[str]]:
    """Sources the lake holds that are not `declared` → the tables holding them; `<table> records`
    for a table whose files are gone while their snapshot or derived records stay (a `forget`
    killed between removing the files and their records: the next `forget` finishes it); `source
    state` for its record in `_state/sources.json` or a failure's mark (one killed before its
    state was cleared; a source that never committed a file)."""
    found: dict[str, set[str]] = {e.source: {"costs"} for e in ledger if e.source not in declared}
    held = {*lake.read_state("sources"), *(mark.source for mark in failure_marks.marks(lake.root))}
    for source in held - set(declared):
        found.setdefault(source, set()).add(STATE_HELD)
    for table in SOURCE_TABLES:
        for source_dir in lake.table_dir(table).glob("source=*"):
            source = source_dir.name.split("=", 1)[1]
            if source not in declared:
                found.setdefault(source, set()).add(table)
        for records in (RECORDS, DERIVED_RECORDS):
            for source_dir in (lake.root / records / table).glob("source=*"):
                source = source_dir.name.split("=", 1)[1]
                if source not in declared and table not in found.get(source, ()):
                    found.setdefault(source, set()).add(f"{table} records")
    return {source: sorted(tables) for source, tables in sorted(found.items())}
