"""Inventory snapshots held as a reader found them: the job records and tags of the lake state
it read its costs in, however the sources are read again while it reads.

A snapshot is replaced in place (`<table>/source=<s>/<key>=<v>/data.parquet`, `os.replace`)
when its source is read again the same day, and a new day's snapshot joins the ones a reader
listed: a read that lists and opens the files as it reaches them (an `attribute --by run`
during a jobs re-ingest) could mix the jobs of two versions with one version's costs. So:

- every snapshot written is also linked (a hard link: no copy) in its partition folder as
  `kept-<sha256>.parquet`, a name no view globs and no writer replaces with other bytes
  (`keep`, from snapshot_ledger.recording, before the file is moved into place);
- a reader takes the tables it reads with its snapshot of the costs (`pin_tables`, from
  snapshot.take_snapshot): each sound snapshot by the kept name of the file it found at
  data.parquet (the same inode), and reads those files and no others (lake_views.table_views);
- a kept file whose snapshot was replaced (the kept name is its last link) stays KEPT_GRACE
  after that (its inode's change time: the replacement unlinked it) and the next write of its
  source's table removes it (`sweep`), as superseded rollups are removed a grace later; a
  read that outlasts it finds the file gone and reads again (snapshot.read_consistently).

A lake whose file system makes no hard links keeps no file, and its readers read data.parquet
as before (what they list when they reach the table).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from service.core.files import listed
from service.core.schema import INVENTORY_TABLES
from service.core.snapshot_ledger import SnapshotLake, snapshot_checks, sound_checks

KEPT = "kept-"  # `<partition>/kept-<sha256>.parquet`
KEPT_GRACE = timedelta(hours=1)  # as a superseded rollup's (service/attribution/rollup_build.ROLLUP_GRACE)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pinned:
    """One snapshot as a reader holds it: the file it reads, its record, and the SHA-256 of that
    file when it is a kept one (its name says it; None: data.parquet, the record tells)."""

    path: str
    record: dict | None
    digest: str | None = None

    @property
    def folder(self) -> Path:
        """The snapshot's partition folder (`<table>/source=<s>/<key>=<v>`)."""
        return Path(self.path).parent


def kept_file(target: Path, digest: str) -> Path:
    """The kept name of the snapshot file of SHA-256 `digest` at `target` (its data.parquet)."""
    return target.with_name(f"{KEPT}{digest}.parquet")


def keep(staged: Path, target: Path, digest: str) -> None:
    """Link `staged` (about to be moved to `target`) as its kept file, in place of one of the same
    bytes kept before; nothing where the file system makes no hard links (the readers read
    data.parquet). Only inventory tables: the lake's own tables are read by their commands alone."""
    if target.parent.parent.parent.name not in INVENTORY_TABLES:
        return
    kept = kept_file(target, digest)
    linking = kept.with_name(f".{kept.name}.{uuid.uuid4().hex}.tmp")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(staged, linking)
        os.replace(linking, kept)
    except OSError as exc:
        linking.unlink(missing_ok=True)
        log.debug("kept no link of %s (%s): its readers read data.parquet", target, exc)


def sweep(source_folder: Path, grace: timedelta | None = None) -> int:
    """Remove the kept files of `source_folder`'s snapshots (and links a crash left half made)
    replaced at least `grace` ago (default KEPT_GRACE): their only name left, unchanged since.
    Returns how many went."""
    cutoff = time.time() - (KEPT_GRACE if grace is None else grace).total_seconds()
    gone = 0
    for path in listed(source_folder, f"*=*/{KEPT}*") + listed(source_folder, f"*=*/.{KEPT}*.tmp"):
        try:
            stat = path.stat()
            if stat.st_nlink == 1 and stat.st_ctime <= cutoff:
                path.unlink()
                gone += 1
        except FileNotFoundError:
            continue  # another writer's sweep
    return gone


def pin_tables(lake: SnapshotLake, tables: Collection[str]) -> Mapping[str, tuple[Pinned, ...]]:
    """Each of `tables` (inventory tables) → its configured sources' snapshots, each checked
    against its record and the last verify (a damaged one is a DataError naming it), held by
    the kept name of the file found."""
    return {table: tuple(_pinned(Path(c.path), c.record) for c in sound_checks(lake, snapshot_checks(lake, [table])))
            for table in tables}


def _pinned(path: Path, record: dict | None) -> Pinned:
    """The snapshot at `path` by the kept name of the file there now, among those its record
    describes (the new one and, while a commit passes, the one it replaces)."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return Pinned(str(path), record)
    for described in (record, (record or {}).get("previous")):
        digest = described.get("sha256") if isinstance(described, dict) else None
        if not isinstance(digest, str):
            continue
        kept = kept_file(path, digest)
        try:
            if os.path.samestat(kept.stat(), found):
                return Pinned(str(kept), record, digest)
        except (FileNotFoundError, ValueError):
            continue
    # replaced since its record was checked (a same-day re-read between the check and this stat):
    # the checked record's file is still there under its kept name, which its content names
    digest = (record or {}).get("sha256")
    if isinstance(digest, str) and (kept := kept_file(path, digest)).exists():
        return Pinned(str(kept), record, digest)
    return Pinned(str(path), record)
