"""Derived files (attribution rollups and their placed parts, metric tops) checked against a record of each: a page
altered on disk that still decodes is found, never read as other numbers.

A derived file is `<table>/source=<s>/<key>=<v>/<version>.parquet`, published by
commit.commit_snapshot under the lake lock (ingest, `spendlake rollup`). Before it is moved
into place, its record `_ledger/derived/<table>/source=<s>/<key>=<v>/<version>.json` holds
its size, footer row count, SHA-256, per-currency sums of its decimal columns (a file with a
`currency` column: the rollups) and an id; `drop_versions` removes both.

Every read checks size and footer rows against the record, and what the last `spendlake
verify` found (`_state/derived_verify.json`, naming the record's id, so a file written again
is judged afresh); `verify` re-hashes (`verify_derived`). A byte changed in place keeps the size
and footer, not the file's stat: the record also holds the stat (inode, size, modified and
changed times in ns) taken once the file is in place and the clock has left its change time's
tick (`vouch`), and a read re-hashes a file whose stat differs (a 13 MB rollup of a 10M-line
month: 12 ms), using it only when the hash is the record's. A file that fails, or one written
before records existed, is derived data: the reader computes it from the raw lines instead
(said with -v) and the next build writes it again. `verify` also lists a derived file gone
while its record is kept (`lost`) and one no reader uses (`stray`: service/core/derived_sweep.py);
the builds write the first again and remove the others. Only a missing cost partition or
snapshot is an error for every query; a derived one is `verify`'s exit 3, repaired by
`spendlake rollup`.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import duckdb

from service.core.files import check_partition_value, listed, write_json_atomic
from service.core.integrity import known_sha256, sha256_file, size_differs
from service.core.parquet_footer import read_footer
from service.core.state_files import DERIVED_RECORD, parse_record, problems_kept
from service.core.units import utc_now_iso

DERIVED_RECORDS = "_ledger/derived"  # relative to the lake root
VERIFY_STATE = "derived_verify"
DERIVED_TABLES = ("attribution_rollup", "attribution_placed", "metric_tops")
PERIOD_TABLES = DERIVED_TABLES[:2]  # per `billing_period=<p>` folder of a cost partition, swept by the rollup build
TOPS_TABLE = DERIVED_TABLES[2]  # `source=all/config=<owner>/<state>.parquet`, swept by the tops build
SUMS_BY = "currency"  # a derived file with this column records its decimal columns' sums per value
REPAIR = "`spendlake rollup` (or the next ingest) writes it again"
STAT = ("st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")  # a write in place changes one of them
COARSE_CLOCK = 5  # Linux's CLOCK_REALTIME_COARSE, what it stamps files with (Python 3.11's time lacks the name)
TICK_PATIENCE = 2.0  # seconds vouch waits for the clock to leave a file's change time (a whole second: 1)
REHASHED = "its SHA-256 differs from the one recorded when it was written (re-hashed at read: its stat changed)"


class DerivedLake(Protocol):
    """What checking derived files needs of the lake (service/core/lake.py's Lake)."""
    root: Path

    def counts(self, source: str) -> bool: ...
    def read_state(self, name: str) -> dict: ...
    def write_state(self, name: str, data: dict) -> None: ...
    def connect(self) -> duckdb.DuckDBPyConnection: ...
    def ledger(self) -> list: ...  # LedgerEntry: .source, .billing_period
    def lock_holder(self, name: str = "ingest") -> str | None: ...


@dataclass(frozen=True)
class DerivedCheck:
    """One derived file next to its record."""

    path: Path
    state: str  # ok | missing | unrecorded | truncated | altered; verify's: lost | stray
    detail: str = ""
    record_id: str | None = None  # the id of the record it was judged against

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    @property
    def damaged(self) -> bool:
        """Bytes on disk differ from what was written (not merely absent or unrecorded)."""
        return self.state in ("truncated", "altered")

    @property
    def failed(self) -> bool:
        """What `verify` exits 3 for: damaged, or gone while its record is kept."""
        return self.damaged or self.state == "lost"

    @property
    def table(self) -> str:
        return self.path.parts[-4]

    @property
    def source(self) -> str:
        return self.path.parts[-3].split("=", 1)[1]

    @property
    def partition(self) -> str:
        """`<key>=<value>/<version>.parquet`"""
        return "/".join(self.path.parts[-2:])

    @property
    def reason(self) -> str:
        return f"{self.state}: {self.detail}" if self.detail else self.state

    def sentence(self) -> str:
        return f"{self.table} file source={self.source}/{self.partition} is {self.state}" + (
            f" ({self.detail})" if self.detail else "")


def record_file(root: Path, path: Path) -> Path:
    """The record of the derived file `<root>/<table>/source=<s>/<key>=<v>/<version>.parquet`."""
    return root.joinpath(DERIVED_RECORDS, *path.parts[-4:-1], f"{path.stem}.json")


def file_key(path: Path | str) -> str:
    """`<table>/source=<s>/<key>=<v>/<version>.parquet`: how verify's state names a derived file."""
    return "/".join(str(path).split("/")[-4:])


def describe(con: duckdb.DuckDBPyConnection, path: Path) -> dict:
    """The record of a derived file as it is now (`con` may read it)."""
    footer = read_footer(path)
    return {"size": path.stat().st_size, "rows": None if footer is None else footer.rows,
            "sha256": sha256_file(path), "sums": sums(con, path, footer.columns if footer else ())}


def sums(con: duckdb.DuckDBPyConnection, path: Path, columns: Sequence[str]) -> dict[str, dict[str, str]] | None:
    """Currency → decimal column → its sum as text, for a file with a `currency` column; else None."""
    if SUMS_BY not in columns:
        return None
    kinds = con.execute("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))",
                        [str(path)]).fetchall()
    decimals = [name for name, kind in kinds if kind.startswith("DECIMAL")]
    if not decimals:
        return None
    summed = ", ".join(f"sum({_quoted(name)})" for name in decimals)  # the file's own column names, quoted
    rows = con.execute(f"SELECT {_quoted(SUMS_BY)}, {summed} FROM read_parquet(?) GROUP BY 1 ORDER BY 1 NULLS LAST",
                       [str(path)]).fetchall()
    return {str(currency): {name: format(value, "f") for name, value in zip(decimals, values) if value is not None}
            for currency, *values in rows}


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@contextmanager
def recording(lake: DerivedLake, con: duckdb.DuckDBPyConnection, staged: Path, target: Path) -> Iterator[None]:
    """Record `staged` as the derived file at `target` before the block moves it there, so a
    reader that finds the file finds its record (a file written again replaces only a file
    no reader uses: missing, unrecorded or damaged)."""
    record = {**describe(con, staged), "id": uuid.uuid4().hex, "written_at": utc_now_iso()}
    write_json_atomic(record_file(lake.root, target), record)
    yield
    vouch(lake, target, record)
    _forget_problems(lake, file_key(target))


def vouch(lake: DerivedLake, path: Path, record: dict) -> None:
    """Add the stat of the derived file at `path` to its `record` when its bytes are the ones
    recorded. The file system stamps a change with a coarse clock, so a write in the same tick
    keeps the stat: the stat is taken, the clock waited out of its change time's tick, and the
    file hashed after, so any later write changes the stat. A change time the clock does not
    leave within TICK_PATIENCE (stamped ahead: a file server's clock, or ours set back) records
    no stat: reads then hash the file, which is safe."""
    stat = stat_of(path.stat())
    if _leave_tick(stat[-1]) and sha256_file(path) == record.get("sha256"):
        write_json_atomic(record_file(lake.root, path), {**record, "stat": stat})


def restat(lake: DerivedLake, path: Path) -> None:
    """Vouch again for a stored derived file whose stat is not its record's (recorded before
    stats were, or linked or copied since: `cp -al` changes the change time) and whose bytes
    are, so reads stop re-hashing it. Under the ingest lock, as a build."""
    record = _read_record(record_file(lake.root, path))
    if record is not None and record.get("stat") != stat_of(path.stat()):
        vouch(lake, path, record)


def stat_of(stat: os.stat_result) -> list[int]:
    return [getattr(stat, name) for name in STAT]


def _leave_tick(changed_ns: int) -> bool:
    """Wait until a write now would be stamped later than `changed_ns` (a file system stamping
    whole seconds, as its whole-second stamp suggests, leaves that second); False when that
    takes longer than TICK_PATIENCE."""
    tick = 1_000_000_000 if changed_ns % 1_000_000_000 == 0 else 1
    clock = COARSE_CLOCK if sys.platform == "linux" else time.CLOCK_REALTIME
    deadline = time.monotonic() + TICK_PATIENCE
    while time.clock_gettime_ns(clock) // tick * tick <= changed_ns:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def drop_versions(root: Path, folder: Path, versions: Iterable[str]) -> None:
    """Remove versions of a derived partition (files `<version>.parquet` in `folder`), each
    file before its record. The caller decides that no reader can still hold them; call only
    while holding the ingest lock."""
    drop_files(root, [folder / f"{check_partition_value('version', version)}.parquet" for version in versions])


def drop_files(root: Path, paths: Iterable[Path]) -> None:
    """`drop_versions` of derived files as listed (a name no build gives, `<v> copy.parquet`, too)."""
    for path in paths:
        path.unlink(missing_ok=True)
        record_file(root, path).unlink(missing_ok=True)


def _read_record(path: Path) -> dict | None:
    try:
        text = path.read_bytes()
    except OSError:
        return None
    return parse_record(text, DERIVED_RECORD) or None  # none, or unreadable: not vouched for, so computed instead


def problems(lake: DerivedLake) -> dict[str, dict]:
    """File key → what the last `spendlake verify` found wrong with it (read once per query)."""
    return {p["file"]: p for p in lake.read_state(VERIFY_STATE).get("problems", [])}


def check(lake: DerivedLake, path: Path, found: Mapping[str, dict] | None = None, *,
          deep: bool = False) -> DerivedCheck:
    """Size and footer rows against the record, and what the last verify found (`found`:
    `problems`, default read now); with `deep` (verify), the SHA-256 and then the sums."""
    record = _read_record(record_file(lake.root, path))
    try:
        stat = path.stat()
    except (FileNotFoundError, NotADirectoryError):  # (a file where its folder should be: none stored there)
        return DerivedCheck(path, "missing")
    problem = None if deep else (problems(lake) if found is None else found).get(file_key(path))
    state, detail = judge(record, stat.st_size, lambda: getattr(read_footer(path), "rows", None), problem)
    if state == "ok" and deep and sha256_file(path) != record.get("sha256"):
        state, detail = "altered", "its SHA-256 differs from the one recorded when it was written" + (
            _sums_difference(lake, path, record.get("sums")))
    elif state == "ok" and record.get("stat") != stat_of(stat) and known_sha256(path, stat) != record.get("sha256"):
        state, detail = "altered", REHASHED
    return DerivedCheck(path, state, detail, (record or {}).get("id"))


def judge(record: dict | None, size: int, rows: Callable[[], int | None],
          problem: dict | None = None) -> tuple[str, str]:
    """(state, detail) of a derived file of `size` bytes against its `record` (None: none, or
    unreadable): the footer's `rows()` (None: no readable footer) read when the size matches,
    then `problem`, what the last verify found wrong with the file this record describes."""
    if record is None:
        return "unrecorded", "written before derived files were recorded, or its record is unreadable"
    if size != record.get("size"):
        return size_differs(size, rows, record.get("size") or 0, record.get("rows") or 0, "the record")
    count = rows()
    if count is None:
        return "truncated", "no readable Parquet footer"
    if count != record.get("rows"):
        return "altered", f"{count:,} rows, the record says {record.get('rows') or 0:,}"
    if problem is not None and problem.get("record") == record.get("id"):
        return problem["state"], problem["detail"] + ", found by `spendlake verify`"
    return "ok", ""


def _sums_difference(lake: DerivedLake, path: Path, recorded: dict | None) -> str:
    """`; ` and how its per-currency sums differ from the record's (none recorded: "")."""
    if recorded is None:
        return ""
    try:
        with lake.connect() as con:
            now = sums(con, path, getattr(read_footer(path), "columns", ())) or {}
    except duckdb.Error as exc:
        return f"; it does not read whole: {str(exc).splitlines()[0][:200]}"
    changed = [f"{currency} {name}: recorded {value}, file {now.get(currency, {}).get(name, 'nothing')}"
               for currency, values in sorted(recorded.items()) for name, value in sorted(values.items())
               if now.get(currency, {}).get(name) != value]
    return "; its sums differ: " + ", ".join(changed[:4]) if changed else "; its sums per currency are as recorded"


def derived_files(lake: DerivedLake) -> list[Path]:
    """The derived files on disk: the rollups and placed parts of the configured sources, and every metric
    tops file."""
    return [path for table in DERIVED_TABLES
            for path in listed(lake.root / table, "source=*/*=*/*.parquet")
            if table == TOPS_TABLE or lake.counts(path.parts[-3].split("=", 1)[1])]


def record_verify(lake: DerivedLake, checks: Sequence[DerivedCheck]) -> None:
    found = [{"file": file_key(c.path), "record": c.record_id, "state": c.state, "detail": c.detail}
             for c in checks if c.damaged]
    problems = problems_kept(lake.read_state(VERIFY_STATE), found, {file_key(c.path) for c in checks},
                             lambda p: p["file"])
    lake.write_state(VERIFY_STATE, {"checked_at": utc_now_iso(), "files": len(checks), "problems": problems})


def _forget_problems(lake: DerivedLake, key: str) -> None:
    found = lake.read_state(VERIFY_STATE)
    if any(p["file"] == key for p in found.get("problems", [])):
        lake.write_state(VERIFY_STATE, {**found, "problems": [p for p in found["problems"] if p["file"] != key]})
