"""`spendlake verify`'s side of the inventory snapshots' records (service/core/snapshot_ledger.py):
every snapshot re-hashed, what it found damaged kept for the reads (`_state/snapshot_verify.json`),
and a snapshot that lost its record told from one written before records existed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from service.core.files import DATA_FILE
from service.core.snapshot_ledger import (RECORD_LOST, RECORDS, SINCE, VERIFY_STATE, SnapshotCheck, SnapshotLake,
                                          describe, records_since, snapshot_checks)
from service.core.state_files import problems_kept
from service.core.units import utc_now_iso


def verify_snapshots(lake: SnapshotLake, record: bool = True) -> list[SnapshotCheck]:
    """Re-hash every snapshot of the configured sources; the damaged ones are recorded
    (`record_verify`) so every read fails on them until `inventory` writes them again."""
    checks = with_lost_records(lake, snapshot_checks(lake, deep=True))
    if record:
        record_verify(lake, checks)
    return checks


def with_lost_records(lake: SnapshotLake, checks: Sequence[SnapshotCheck]) -> list[SnapshotCheck]:
    """`checks` with an unrecorded snapshot whose record is unreadable, was there at the last
    verify (`recorded` in its state), or that was written after the lake's snapshots began to be
    recorded (`records_since`), said as RECORD_LOST: not one written before records. Only verify
    says it (reads go on reading the file as unrecorded, as before); it gives the file as it is,
    to write its record again if it is the one written. Not told: a record removed with every
    other one and the note (`_ledger/snapshots/` removed whole) before a verify saw it, which
    looks as a lake from before records; and a file whose modification time was set back."""
    known = set(lake.read_state(VERIFY_STATE).get("recorded", []))
    since = records_since(lake.root)
    for check in [c for c in checks if c.state == "unrecorded"]:
        path = Path(check.path)
        if check.record == {}:
            why = "its record is unreadable"
        elif check.key in known:
            why = "its record, there at the last `spendlake verify`, is gone"
        elif since is not None and (written := _modified(path)) is not None and written >= since:
            why = (f"its record is gone: the file was written {written.isoformat(timespec='seconds')}, after this "
                   f"lake's snapshots began to be recorded ({since.isoformat(timespec='seconds')}, "
                   f"{RECORDS}/{SINCE})")
        else:
            continue
        facts = describe(path) if path.is_file() else {}  # a FIFO in its place: never read (its checks name it)
        if facts:
            why += f"; the file: {facts['size']:,} bytes, {facts['rows'] or 0:,} rows, SHA-256 {facts['sha256']}"
        checks = [replace(c, state=RECORD_LOST, detail=why, record=facts) if c is check else c for c in checks]
    return list(checks)


def _modified(path: Path) -> datetime | None:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
    except OSError:
        return None


def record_verify(lake: SnapshotLake, checks: Sequence[SnapshotCheck]) -> None:
    found = [{"snapshot": c.key, "state": c.state, "detail": c.detail} for c in checks if not c.ok
             and c.state != RECORD_LOST]  # the file is not known damaged: reads go on
    earlier = lake.read_state(VERIFY_STATE)
    problems = problems_kept(earlier, found, {c.key for c in checks}, lambda p: p["snapshot"])
    # a snapshot this verify did not check (of a source not configured now) is kept while its file
    # or its record is in the lake: one set aside or forgotten is gone, so the list stays bounded
    recorded = sorted({k for k in earlier.get("recorded", []) if k not in {c.key for c in checks}
                       and _in_lake(lake.root, k)} | {c.key for c in checks if c.record or c.state == RECORD_LOST})
    lake.write_state(VERIFY_STATE, {"checked_at": utc_now_iso(), "snapshots": len(checks), "problems": problems,
                                    "recorded": recorded})


def _in_lake(root: Path, key: str) -> bool:
    return (root / key / DATA_FILE).exists() or (root / RECORDS / f"{key}.json").exists()
