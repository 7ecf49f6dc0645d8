"""Inventory snapshots checked against a record of each: a deleted, truncated or altered
snapshot is an error naming the file, never fewer jobs or tags read in silence.

`spendlake inventory` writes each snapshot (`<table>/source=<s>/<key>=<v>/data.parquet`)
through commit.commit_snapshot, which records the file's size, row count and SHA-256 in
`_ledger/snapshots/<table>/source=<s>/<key>=<v>.json`: one file per snapshot, so writers
never share one (and a partition folder removed whole is still missed). The record is
written before the file is moved into place, holding the old file's as `previous`, and
again without it afterwards: a reader always finds a record describing the file it sees.

As for cost partitions (service/core/integrity.py), every read checks size and footer row
count (`table_files`); `spendlake verify` re-hashes (`verify_snapshots`) and what it found
damaged stays an error for every read until `inventory` writes the snapshot again or sets
it aside. Snapshots written before records existed are read as before; verify lists them.

The lake's own one-file tables, `findings` and `plans` (OWN_TABLES), are recorded and checked
alike; the command that writes one (`rules run`, `estimate --register`) sets a damaged file
aside first (service/core/snapshot_set_aside.py) and writes the table again.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from service.core.errors import DataError
from service.core.lake_file_errors import REWRITTEN_BY, refuse_links
from service.core.files import DATA_FILE, listed, write_json_atomic
from service.core.integrity import known_sha256, sha256_file, size_differs, written_since
from service.core.parquet_footer import read_footer
from service.core.schema import INVENTORY_TABLES
from service.core.state_files import SNAPSHOT_RECORD, parse_record
from service.core.units import utc_now_iso

RECORDS = "_ledger/snapshots"  # relative to the lake root
# `<RECORDS>/recorded-since` (JSON, of no table): when this lake's snapshots began to be recorded (`records_since`)
SINCE = "recorded-since"
VERIFY_STATE = "snapshot_verify"  # `_state/snapshot_verify.json`: what the last verify found damaged
SET_ASIDE = "_damaged"  # where a damaged snapshot is moved (service/core/snapshot_set_aside.py)
# The lake's own one-file tables (service/findings/store.py, service/planning/plans.py): recorded as snapshots,
# of no configured source, and written again by their own command (REWRITTEN_BY), which sets a damaged one aside.
OWN_TABLES = ("findings", "plans")
LOST = {"findings": "the acknowledgements it holds", "plans": "the plans it holds, to register again"}
RECORD_CHANGED = "its record changed, not the file"
RECORD_LOST = "record lost"  # a verify's state of a snapshot whose record it knew (`with_lost_records`)
RECORDED_TABLES = (*INVENTORY_TABLES, *OWN_TABLES)
RECORD_FIELDS = ("size", "rows", "sha256")
NOT_A_FILE = "not a regular file"  # a snapshot's digest when a FIFO or a device stands in its place
SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class SnapshotLake(Protocol):
    """What checking snapshots needs of the lake (service/core/lake.py's Lake)."""
    root: Path

    def counts(self, source: str) -> bool: ...
    def table_dir(self, table: str) -> Path: ...
    def read_state(self, name: str) -> dict: ...
    def write_state(self, name: str, data: dict) -> None: ...


@dataclass(frozen=True)
class SnapshotCheck:
    """One snapshot next to its record."""

    table: str
    source: str
    partition: str  # `<key>=<value>`
    path: Path | str  # a URL when Spark read it
    state: str  # ok | missing | truncated | altered | unrecorded (written before records existed)
    detail: str = ""
    record: dict | None = field(default=None, compare=False, repr=False)  # the one judged by (read once)

    @property
    def ok(self) -> bool:
        return self.state in ("ok", "unrecorded")

    @property
    def key(self) -> str:
        return f"{self.table}/source={self.source}/{self.partition}"

    @property
    def record_changed(self) -> bool:
        """The file is whole: its record's digest is what changed (verify's deep check)."""
        return self.detail.startswith(RECORD_CHANGED)

    def sentence(self) -> str:
        kind = "table" if self.table in OWN_TABLES else "snapshot"
        said = "lost its record" if self.state == RECORD_LOST else f"is {self.state}"
        return f"{self.table} {kind} source={self.source}/{self.partition} {said}" + (
            f" ({self.detail})" if self.detail else "")


def record_file(root: Path, snapshot: Path) -> Path:
    """The record of the snapshot file `<root>/<table>/source=<s>/<key>=<v>/data.parquet`."""
    partition = snapshot.parent
    return root / RECORDS / partition.parent.parent.name / partition.parent.name / f"{partition.name}.json"


def describe(path: Path) -> dict:
    """Size, footer row count, SHA-256 and modification time (ns: a rename into place keeps it)
    of a snapshot file as it is."""
    footer, stat = read_footer(path), path.stat()
    return {"size": stat.st_size, "rows": None if footer is None else footer.rows, "sha256": sha256_file(path),
            "mtime_ns": stat.st_mtime_ns}


def _read_record(path: Path) -> dict | None:
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    return parse_record(text, SNAPSHOT_RECORD)  # {}: the snapshot is read as one without a record until written again


@contextmanager
def recording(lake: SnapshotLake, staged: Path, target: Path, facts: dict | None = None) -> Iterator[dict]:
    """Record `staged` as the snapshot at `target` around the block that moves it there (given
    the record), with `facts` about it (a window job source's times: service/core/job_windows.py)."""
    record_path = record_file(lake.root, target)
    _note_records_since(lake.root, staged)
    new = describe(staged) | (facts or {})
    old = _read_record(record_path)
    previous = {k: old.get(k) for k in RECORD_FIELDS} if old else (describe(target) if target.exists() else None)
    write_json_atomic(record_path, {**new, "written_at": utc_now_iso(), "previous": previous})
    yield new
    write_json_atomic(record_path, {**new, "written_at": utc_now_iso()})
    forget_problems(lake, {_key_of(lake.root, target)})


def _note_records_since(root: Path, staged: Path) -> None:
    """Note, once per lake, the time its snapshots began to be recorded: the first recorded file's
    modification time (a lake recorded before the note: its oldest recorded file's). A snapshot
    written since without a record has lost it (`with_lost_records`), whoever saw it before."""
    note = root / RECORDS / SINCE
    if note.exists():
        return
    recorded = (root / p.parent.parent.name / p.parent.name / p.stem / DATA_FILE
                for p in (root / RECORDS).glob("*/source=*/*=*.json"))
    times = [staged.stat().st_mtime, *(f.stat().st_mtime for f in recorded if f.is_file())]
    write_json_atomic(note, {"since": _utc(min(times))})


def records_since(root: Path) -> datetime | None:
    """When `root`'s snapshots began to be recorded; None without a readable note (a lake from
    before the note that has written no snapshot since, or one whose records were all removed)."""
    try:
        return datetime.fromisoformat(json.loads((root / RECORDS / SINCE).read_text())["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="microseconds")


def read_record(root: Path, snapshot: Path) -> dict | None:
    """The record of `snapshot` (None: none; {}: unreadable)."""
    return _read_record(record_file(root, snapshot))


def _key_of(root: Path, snapshot: Path) -> str:
    return str(snapshot.parent.relative_to(root))


def forget_problems(lake: SnapshotLake, keys: set[str]) -> None:
    """What the last verify found of the snapshots `keys`, dropped: they were written again or set
    aside (one written again is found recorded by the next verify; one set aside is gone)."""
    found = lake.read_state(VERIFY_STATE)
    problems, recorded = found.get("problems", []), found.get("recorded", [])
    if any(p["snapshot"] in keys for p in problems) or keys & set(recorded):
        lake.write_state(VERIFY_STATE, {**found, "problems": [p for p in problems if p["snapshot"] not in keys],
                                        "recorded": [k for k in recorded if k not in keys]})


def check_snapshot(lake: SnapshotLake, path: Path, *, deep: bool = False) -> SnapshotCheck:
    """Size and footer rows against the record, and the SHA-256 with `deep` or when the file
    was written since its record (bytes flipped in place keep size and footer); a record
    rewritten while it was read (a commit passing by) is read again. A folder linked out of the lake is an error."""
    refuse_links(lake.root, path.parent)
    return check_file(path, lambda: _read_record(record_file(lake.root, path)), lambda: _size(path),
                      lambda: getattr(read_footer(path), "rows", None),
                      (lambda: sha256_file(path)) if deep else (lambda: known_sha256(path)),
                      hash_when=lambda record: deep or _written_since(path, record))


def check_file(path: Path | str, read_record: Callable[[], dict | None], size: Callable[[], int | None],
               rows: Callable[[], int | None], sha256: Callable[[], str] | None = None, *,
               hash_when: Callable[[dict | None], bool] | None = None) -> SnapshotCheck:
    """The snapshot file at `path` (`<table>/source=<s>/<key>=<v>/data.parquet`, a URL on
    Spark) judged against its record by what the reader sees of it: `size()` (None: absent),
    footer `rows()` (None: no readable footer) and, for a deep check, `sha256()` (only when
    `hash_when(record)`, if given)."""
    table, source, partition = str(path).rsplit("/", 4)[-4:-1]

    def judged(record: dict | None) -> tuple[str, str, dict | None]:
        hashed = sha256 if hash_when is None or hash_when(record) else None
        return *judge(record, size(), rows, hashed), record

    state, detail, record = _settled(read_record, judged, lambda found: found[0] == "ok")
    return SnapshotCheck(table, source.split("=", 1)[1], partition, path, state, detail, record)


def _written_since(path: Path, record: dict | None) -> bool:
    try:
        return written_since(path.stat(), (record or {}).get("mtime_ns"))
    except OSError:
        return False  # absent or unreadable: the size check says so


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _settled(read_record: Callable[[], dict | None], judge: Callable[[dict | None], object],
             final: Callable[[object], bool]):
    """`judge(record)` of a snapshot's record, taken again while the record changes under it
    (a commit passing by) unless `final` accepts the answer."""
    for _ in range(50):
        record = read_record()
        found = judge(record)
        if final(found) or read_record() == record:
            break
        time.sleep(0.02)  # a commit is passing by: look again once it moved its file
    return found


def snapshot_digest(lake: SnapshotLake, path: Path) -> str:
    """The SHA-256 (hex) of a snapshot file: its record's when the file matches the record's
    size and footer rows (what every read checks; `spendlake verify` re-hashes), so a query
    versioning its rollups reads no snapshot's bytes; hashed when there is no such record
    (written before records existed, unreadable, or not telling which of two files it is)."""
    return recorded_snapshot(lake, path)[0]


def recorded_snapshot(lake: SnapshotLake, path: Path) -> tuple[str, dict | None]:
    """(snapshot_digest, the record it was taken from): a reader of the record's facts too
    (a window job source's times) does not read it again."""
    digest, record = _settled(lambda: _read_record(record_file(lake.root, path)),
                              lambda record: (_recorded_digest(path, record), record), lambda found: found[0] is None)
    if digest is None and path.exists() and not path.is_file():
        return NOT_A_FILE, record  # a FIFO or a device (a link to /dev/zero): reading it may never end; checks name it
    return digest or sha256_file(path), record


def _recorded_digest(path: Path, record: dict | None) -> str | None:
    try:
        size = path.stat().st_size
    except OSError:
        return None
    return recorded_digest(record, size, lambda: getattr(read_footer(path), "rows", None))


def recorded_digest(record: dict | None, size: int, rows: Callable[[], int | None]) -> str | None:
    """The SHA-256 `record` holds for a file of `size` bytes whose footer says `rows()` rows
    (read only when a size matches); None when it holds none, or two for files alike (a commit
    moving a new file of the same size and rows into place)."""
    described = [d for d in (record, (record or {}).get("previous")) if isinstance(d, dict) and d.get("size") == size]
    count = rows() if described else None
    digests = {d.get("sha256") for d in described if count is not None and d.get("rows") == count}
    digest = digests.pop() if len(digests) == 1 else None
    return digest if isinstance(digest, str) and SHA256_HEX.fullmatch(digest) else None


def judge(record: dict | None, size: int | None, rows: Callable[[], int | None],
          sha256: Callable[[], str] | None = None) -> tuple[str, str]:
    """(state, detail) of a snapshot file of `size` bytes (None: absent) against its record:
    the footer's `rows()` read when a size matches, `sha256()` (a deep check) when they do."""
    if not record and size is not None:
        return "unrecorded", ("its record is unreadable" if record == {} else "written before snapshots were "
                              "recorded") + "; the next `inventory` records it"
    if not record:
        return "missing", ""
    described = [d for d in (record, record.get("previous")) if d]
    if size is None:
        return "missing", f"the record holds {record.get('rows') or 0:,} rows"
    same_size = [d for d in described if d.get("size") == size]
    if not same_size:
        return size_differs(size, rows, record.get("size") or 0, record.get("rows") or 0, "the record")
    count = rows()
    if count is None:
        return "truncated", "no readable Parquet footer"
    if not any(d.get("rows") == count for d in same_size):
        return "altered", f"{count:,} rows, the record says {record.get('rows') or 0:,}"
    if sha256 is not None and (digest := sha256()) not in (recorded := {d.get("sha256") for d in same_size}):
        return "altered", _digest_differs(digest, recorded)
    return "ok", ""


def _digest_differs(digest: str, recorded: set) -> str:
    """Why a file's SHA-256 is not its record's. A change of the file changes nearly every hex
    digit of its digest (60 of 64 on average); a few differing ones are the record's, changed
    where the file, of the size and rows it records, is whole."""
    apart = min((sum(a != b for a, b in zip(digest, r)) for r in recorded if isinstance(r, str) and len(r) == 64),
                default=64)
    if apart <= 16:
        return (f"{RECORD_CHANGED}: its SHA-256 differs from the file's in {apart} of 64 hex digits, where any change "
                f"of the file changes nearly all of them; the file's SHA-256 is {digest}")
    return "its SHA-256 differs from the one recorded when it was written"


def snapshot_checks(lake: SnapshotLake, tables: Sequence[str] = RECORDED_TABLES, *,
                    deep: bool = False) -> list[SnapshotCheck]:
    """Every snapshot in `tables` (of an inventory table: of a configured source): the files
    on disk and the ones a record says should be there; with `deep`, hashed."""
    checks = []
    for table in tables:
        found = set(listed(lake.table_dir(table), f"source=*/*=*/{DATA_FILE}"))  # `forget` may be removing one
        for record in listed(lake.root / RECORDS / table, "source=*/*=*.json"):
            found.add(lake.table_dir(table) / record.parent.name / record.name.removesuffix(".json") / DATA_FILE)
        checks += [check_snapshot(lake, path, deep=deep) for path in sorted(found)
                   if table in OWN_TABLES or lake.counts(path.parent.parent.name.split("=", 1)[1])]
    return checks


def recorded_problems(lake: SnapshotLake) -> dict[str, dict]:
    """Snapshot key → what the last `spendlake verify` found wrong with it."""
    return {p["snapshot"]: p for p in lake.read_state(VERIFY_STATE).get("problems", [])}


def sound(lake: SnapshotLake, checks: Sequence[SnapshotCheck]) -> list[SnapshotCheck]:
    """`checks` with what the last verify found (a hash mismatch the quick check cannot see)."""
    found = recorded_problems(lake)
    return [SnapshotCheck(c.table, c.source, c.partition, c.path, found[c.key]["state"],
                          found[c.key]["detail"] + ", found by `spendlake verify`")
            if c.ok and c.key in found else c for c in checks]


def table_names(root: Path) -> list[str]:
    """The folders under the lake root, and the inventory tables with a record of a snapshot."""
    folders = {path.name for path in root.iterdir()} if root.exists() else set()
    recorded = {path.name for path in (root / RECORDS).iterdir() if path.is_dir()} if (root / RECORDS).exists() \
        else set()
    return sorted(folders | recorded)


def recorded(lake: SnapshotLake, table: str) -> bool:
    """True when a record says `table` holds a snapshot a query would read."""
    return any(table in OWN_TABLES or lake.counts(path.parent.name.split("=", 1)[1])
               for path in listed(lake.root / RECORDS / table, "source=*/*=*.json"))


def table_files(lake: SnapshotLake, table: str) -> list[tuple[str, dict | None]]:
    """(path, record) of each file of a table a query reads: those of the configured sources,
    each inventory snapshot checked against its record (the record as read for that, so a
    reader of its facts reads it once); a damaged one is a DataError naming it and the fix."""
    if table not in RECORDED_TABLES:
        return [(str(f), None) for f in listed(lake.table_dir(table), f"source=*/*=*/{DATA_FILE}")]
    return [(str(c.path), c.record) for c in sound_checks(lake, snapshot_checks(lake, [table]))]


def sound_checks(lake: SnapshotLake, checks: Sequence[SnapshotCheck]) -> list[SnapshotCheck]:
    """`checks`, each whole by its record and the last verify; else the DataError naming the
    damaged ones and the fix (the DuckDB and the Spark reads answer alike)."""
    checks = sound(lake, checks)
    bad = [c for c in checks if not c.ok]
    if bad:
        raise snapshot_error(bad)
    return list(checks)


def sound_files(lake: SnapshotLake, checks: Sequence[SnapshotCheck]) -> list:
    """The paths of `sound_checks`."""
    return [str(c.path) for c in sound_checks(lake, checks)]


def snapshot_error(bad: Sequence[SnapshotCheck]) -> DataError:
    """One error naming every damaged snapshot's file and the command that writes it again."""
    message = "; ".join(c.sentence() for c in bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
    fixes = [f"{record_file(Path(c.path).parents[3], Path(c.path))}: put the file's SHA-256 in its `sha256`, then run "
             "`spendlake verify`" + (f" (`{rewritten_by(c)}` would set the whole file aside and write the table again "
                                     f"without {LOST[c.table]})" if c.table in LOST else "")
             for c in bad if c.record_changed]
    fixes += [f"if {c.path} is the file written, write its record {record_file(Path(c.path).parents[3], Path(c.path))} "
              f"again as {json.dumps({k: (c.record or {}).get(k) for k in RECORD_FIELDS})}, then run `spendlake "
              f"verify`; else run `{rewritten_by(c)}`" for c in bad if c.state == RECORD_LOST]
    rewrite = [c for c in bad if not c.record_changed and c.state != RECORD_LOST]
    for own, does in ((False, f"it writes the snapshot again from the source, or sets one it can no longer take (an "
                              f"earlier day's) aside under {SET_ASIDE}/"),
                      (True, f"it sets the damaged file aside under {SET_ASIDE}/ and writes the table again")):
        commands = " and ".join(sorted({f"`{rewritten_by(c)}`" for c in rewrite if (c.table in OWN_TABLES) == own}))
        lost = " and ".join(sorted({LOST[c.table] for c in rewrite if c.table in LOST})) if own else ""
        fixes += [f"run {commands}: {does}" + (f", without {lost}" if lost else "")] if commands else []
    return DataError(message, where=", ".join(str(c.path) for c in bad[:3]) + (" …" if len(bad) > 3 else ""),
                     hint="; ".join(fixes) + "; `spendlake verify` checks every snapshot")


def rewritten_by(check: SnapshotCheck) -> str:
    """The command that writes the file of `check` again."""
    return REWRITTEN_BY[check.table] if check.table in OWN_TABLES else f"spendlake inventory --source {check.source}"
