"""Damaged snapshot files moved out of the reads' way, and the records of a forgotten source
removed: the writers' side of service/core/snapshot_ledger.py. A file set aside goes under
`<lake>/_damaged/<table>/source=<s>/<key>=<v>/` (what is left of it kept for a look) and its
record is removed, so reads go on with the snapshots that are whole and the command that owns
the table writes it afresh. Its kept name (service/core/snapshot_pins.py) goes with it; its partition
folder stays, where a file set aside by mistake is moved back (README)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from service.core.derived_records import DERIVED_RECORDS
from service.core.files import listed
from service.core.schema import INVENTORY_TABLES
from service.core.snapshot_ledger import (RECORDS, SET_ASIDE, SnapshotCheck, SnapshotLake, forget_problems, record_file,
                                          snapshot_checks, sound)
from service.core.snapshot_pins import KEPT
from service.core.units import utc_now_iso


def set_aside_damaged(lake: SnapshotLake, source: str, written: set[Path]) -> list[SnapshotCheck]:
    """After `inventory` wrote `written` for `source`: its other snapshots that do not match
    their record are moved under `<lake>/_damaged/` (what is left of them kept for a look),
    their records removed, so reads go on with the snapshots that are whole."""
    return _set_aside(lake, [c for c in sound(lake, [c for c in snapshot_checks(lake, tuple(INVENTORY_TABLES))
                                                     if c.source == source])
                             if not c.ok and c.path not in written])


def set_aside_table(lake: SnapshotLake, table: str) -> list[SnapshotCheck]:
    """Before the command that owns `table` (OWN_TABLES) reads and replaces it: its file, when
    it does not match its record, set aside as `set_aside_damaged` does, so that command
    starts afresh instead of failing on what it is about to write again."""
    return _set_aside(lake, [c for c in sound(lake, snapshot_checks(lake, [table])) if not c.ok])


def set_aside_files(lake: SnapshotLake, table: str, source: str, files: Sequence[Path],
                    state: str) -> list[SnapshotCheck]:
    """`files` (snapshots of `table` and `source`) set aside as `set_aside_damaged` does, each
    said to be `state`: whole files its caller will not read on (service/ingest/inventory.py)."""
    return _set_aside(lake, [SnapshotCheck(table, source, file.parent.name, file, state) for file in files])


def _set_aside(lake: SnapshotLake, bad: list[SnapshotCheck]) -> list[SnapshotCheck]:
    for check in bad:
        if Path(check.path).exists():
            aside = lake.root / SET_ASIDE / check.key / f"{utc_now_iso().replace(':', '')}.parquet"
            aside.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(check.path, aside)
            _unkept(Path(check.path).parent, aside)
        record_file(lake.root, Path(check.path)).unlink(missing_ok=True)
    forget_problems(lake, {c.key for c in bad})
    return bad


def _unkept(folder: Path, aside: Path) -> None:
    """The kept names of the file set aside as `aside` in its partition `folder` removed: a lone
    kept-<sha256>.parquet stayed for good, its link under _damaged/ keeping sweep from taking it as a
    replaced snapshot's last name. A reader that pinned it finds it gone and reads again
    (snapshot.read_consistently), as after a sweep."""
    try:
        moved = aside.stat()
    except FileNotFoundError:
        return
    for kept in listed(folder, f"{KEPT}*.parquet"):
        try:
            if os.path.samestat(kept.stat(), moved):
                kept.unlink()
        except FileNotFoundError:
            continue  # another writer's sweep


def forget_records(root: Path, table: str, source: str) -> None:
    """The snapshot and derived records of `source` in `table`, removed (the source forgotten)."""
    for records in (RECORDS, DERIVED_RECORDS):
        shutil.rmtree(root / records / table / f"source={source}", ignore_errors=True)
