"""Derived files no reader uses, and records whose file is gone (service/core/derived_records.py
keeps the records and checks each file against its own).

A rollup or placed file lives in its cost partition's period folder, a metric tops file at
`metric_tops/source=all/config=<owner>/<state>.parquet` (service/attribution/tops.py). One in a
period folder the ledger holds no cost partition for, or a tops file named as no build names
them (a folder renamed or copied in: `config=<owner>.old`), is `stray`: no reader uses it; a
record kept while its file is gone (deleted, its folder renamed away) is `lost`. `verify` lists
both beside the damaged files (`verify_derived`; lost is its exit 3, `derived_error`); the rollup build removes
stray period files at once and the tops build stray tops files a grace after it first found them
(as replaced configs' tops), each forgetting the records of its files that are gone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from service.core.derived_records import (DERIVED_RECORDS, DERIVED_TABLES, PERIOD_TABLES, TOPS_TABLE, DerivedCheck,
                                          DerivedLake, check, derived_files, drop_files, record_file, record_verify)
from service.core.errors import DataError
from service.core.files import listed

TOPS_NAME = re.compile("[0-9a-f]{16}")  # an owner's and a state's name (service/attribution/tops.py's hash)
LOST = "its record is kept, the file is gone (deleted, or its folder renamed or moved)"
STRAY = ("in a period folder the lake holds no cost partition of its source for (renamed, or copied in): no reader "
         "uses it, and `spendlake rollup` removes it")
STRAY_TOPS = ("in a metric tops folder or file named as no build names them (renamed, or copied in): no reader "
              "uses it, and `spendlake rollup` (or an ingest) removes it once builds have found it so for the grace "
              "superseded files get")


def verify_derived(lake: DerivedLake, record: bool = True) -> list[DerivedCheck]:
    """Re-hash every derived file; the damaged ones are recorded (`record_verify`), so reads
    compute them instead until the next build writes them again. Then the files no reader uses
    (`stray`: of period folders the ledger holds no cost partition for, metric tops named as no
    build names them) and the records whose file is gone (`lost`)."""
    paths = derived_files(lake)
    periods = ledger_folders(lake)  # read after the listing: a period's derived files come after its partition
    checks = [DerivedCheck(path, "stray", stray_detail(path)) if stray(path, periods) else check(lake, path, deep=True)
              for path in paths]
    checks = [c for c in checks if c.state != "missing"]  # superseded and removed while we looked
    if record:
        record_verify(lake, checks)
    return checks + lost(lake)


def ledger_folders(lake: DerivedLake) -> set[tuple[str, str]]:
    """(source, `billing_period=<p>`) of every cost partition the ledger holds or whose file is in
    place: with the ledger lost, `ingest` restores it, and its periods' derived files are no strays."""
    placed = listed(lake.root / "costs", "source=*/billing_period=*/data.parquet")
    return ({(entry.source, f"billing_period={entry.billing_period}") for entry in lake.ledger()}
            | {(path.parent.parent.name.split("=", 1)[1], path.parent.name) for path in placed})


def stray(path: Path, periods: set[tuple[str, str]]) -> bool:
    """True for a rollup or placed file in a period folder not among `periods` (ledger_folders),
    and a metric tops file not at `source=all/config=<owner>/<state>.parquet` (`tops_named`)."""
    if path.parts[-4] == TOPS_TABLE:
        return not tops_named(path)
    return path.parts[-4] in PERIOD_TABLES and (path.parts[-3].split("=", 1)[1], path.parts[-2]) not in periods


def tops_named(path: Path) -> bool:
    """Whether a metric tops file is named as a build names them (none reads another: a folder
    renamed or copied in, `config=<owner>.old`, holds files no scrape reads)."""
    source, folder = path.parts[-3:-1]
    key, _, owner = folder.partition("=")
    return (source == "source=all" and key == "config" and TOPS_NAME.fullmatch(owner) is not None
            and TOPS_NAME.fullmatch(path.stem) is not None)


def stray_detail(path: Path) -> str:
    return STRAY_TOPS if path.parts[-4] == TOPS_TABLE else STRAY


def lost(lake: DerivedLake, *, building: bool = False, tables: Sequence[str] = DERIVED_TABLES) -> list[DerivedCheck]:
    """The derived files of `tables` (rollups and placed parts of the configured sources, metric
    tops) whose record is kept and which are gone. None while a writer holds the ingest lock (a
    build records a file before it moves it into place, and drops a version's file before its
    record), unless `building`: the caller is that build."""
    if not building and lake.lock_holder("ingest") is not None:
        return []
    found = []
    for table in tables:
        for record in listed(lake.root / DERIVED_RECORDS / table, "source=*/*=*/*.json"):
            path = lake.root.joinpath(table, *record.parts[-3:-1], f"{record.stem}.parquet")
            if (table == TOPS_TABLE or lake.counts(record.parts[-3].split("=", 1)[1])) and not path.is_file():
                found.append(DerivedCheck(path, "lost", LOST))
    return found


def forget_lost(lake: DerivedLake, tables: Sequence[str], sources: set[str] | None = None) -> None:
    """For a build under the lock, after it wrote every current file: remove the records of the
    files of `tables` (of `sources`, when given) that are gone, none writes them again."""
    for gone in lost(lake, building=True, tables=tables):
        if sources is None or gone.source in sources:
            record_file(lake.root, gone.path).unlink(missing_ok=True)
            remove_empty(record_file(lake.root, gone.path).parent)


def sweep_periods(lake: DerivedLake, sources: set[str]) -> int:
    """For a build under the lock, after it wrote every current file of `sources`: remove the
    rollup and placed files of period folders the ledger holds no cost partition for (no
    reader uses them) and the records whose file is gone. Returns how many files went."""
    periods, removed = ledger_folders(lake), 0
    for table in PERIOD_TABLES:
        for source in sorted(sources):
            for path in listed(lake.root / table / f"source={source}", "*=*/*.parquet"):
                if stray(path, periods):
                    drop_files(lake.root, [path])
                    remove_empty(path.parent)
                    removed += 1
    forget_lost(lake, PERIOD_TABLES, sources)
    return removed


def remove_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty (or gone): kept
        pass


def derived_error(bad: Sequence[DerivedCheck]) -> DataError:
    """`verify`'s error for damaged or lost derived files: no answer is wrong for them (queries
    compute them meanwhile); one command writes them again."""
    message = "; ".join(c.sentence() for c in bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
    disk = (" bytes the disk altered may be a failing disk, worth a look" if any(c.damaged for c in bad)
            else " a file deleted or moved by hand is all it was")
    return DataError(f"{message}. Derived data: queries and scrapes compute it from the raw lines meanwhile",
                     where=", ".join(str(c.path) for c in bad[:3]) + (" …" if len(bad) > 3 else ""),
                     hint=f"run `spendlake rollup` to write it again (the next ingest does too);{disk}")
