"""An inventory source's inputs fingerprinted: local files read before are not read again.

A source that reads local files alone (`path`: no API, bucket or URL; the connector's
`inputs()`) gets a digest of what decides its snapshot: the SHA-256 of every file under its
paths (by name: a file changed in place with the same size and time is read again, as one
added or removed), its config entry, DuckDB's and pyarrow's versions, the tz database's,
spendlake's own code and the connector's (a fix in a reader is read again once). A run whose
digest is the one its source's last read recorded, and whose partitions are still the files that read wrote (each one's record and bytes; for a
table of snapshot dates, the same date), reads nothing: its partitions are `unchanged`, as
a read that staged the same bytes would have found them (`commit.unchanged`), where the demo's
hourly inventory read and staged its 746,322 GPU rows and 666 job records for nothing
(bench/README.md).

What a digest cannot hold is not recorded: a read that logged a warning (said again on the
next run, which reads), a failed one, one whose files changed while it read (their size,
time or inode before and after), a source that asks anything but files. Recorded in
`_state/inventory_inputs.json` per source (forget drops it).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import os
import sys
import threading
import zoneinfo
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path

import duckdb

from service.core.commit import in_place
from service.core.config import InventorySource
from service.core.coverage import parse_utc
from service.core.integrity import sha256_file
from service.core.lake import Lake
from service.core.snapshot_ledger import read_record
from service.core.timewindow import iso_utc
from service.ingest.periods import read_cache

log = logging.getLogger(__name__)

STATE = "inventory_inputs"  # {source: {"digest", "day", "partitions": [{"part", "sha256", "rows"}], "skipped", "data_through"}}
FORMAT = "inventory-inputs/2"


@dataclass(frozen=True)
class LastRead:
    """What the source's last read of the same files found: each partition's rows (part, as an
    outcome names it: `<table> <key>=<value>`) and file, the files it skipped and why, how far
    its data reached."""

    counts: dict[str, int]
    files: dict[str, Path]
    skipped: dict[str, str]
    data_through: datetime | None


@dataclass(frozen=True)
class Inputs:
    """What a source reads, as this run found it before reading: `digest`, and each file's
    (size, mtime_ns, inode) to tell one that changed while it was read."""

    source: str
    digest: str
    stats: tuple[tuple[str, int, int, int], ...]

    def last_read(self, lake: Lake, day: str, snapshot_dates: bool) -> LastRead | None:
        """The source's last read when this run's inputs are its inputs (and, `snapshot_dates`,
        its day this run's) and its partitions are still the files it wrote (`commit.in_place`,
        which reads each file's bytes); else None."""
        read = read_cache(lake, STATE).get(self.source)
        if not read or read["digest"] != self.digest or (snapshot_dates and read["day"] != day):
            return None
        files = {found["part"]: partition_file(lake, self.source, found["part"]) for found in read["partitions"]}
        if not all(in_place(lake, files[found["part"]], found["sha256"], None) for found in read["partitions"]):
            return None
        return LastRead({found["part"]: found["rows"] for found in read["partitions"]}, files,
                        dict(read["skipped"]), parse_utc(read["data_through"]) if read["data_through"] else None)

    def remember(self, lake: Lake, day: str, files: dict[str, Path], counts: dict[str, int],
                 skipped: dict[str, str], data_through: datetime | None) -> None:
        """Record this run's read of the inputs (`files`: each part's file, stored or found
        unchanged, `counts` its rows), unless they changed while it read them; an earlier record
        of other inputs goes. Not recorded (a full disk): read again next run."""
        state = read_cache(lake, STATE)
        entry = None if _stats([Path(path) for path, *_ in self.stats]) != self.stats else {
            "digest": self.digest, "day": day, "skipped": dict(skipped),
            "data_through": iso_utc(data_through) if data_through else None,
            "partitions": [{"part": part, "sha256": (read_record(lake.root, file) or {}).get("sha256"),
                            "rows": counts[part]} for part, file in files.items()]}  # a list: told in the read's order
        if entry is None:
            log.debug("inventory source %s: its files changed while they were read: read again next run", self.source)
        if state.get(self.source) == entry:
            return
        state.pop(self.source, None)
        state.update({self.source: entry} if entry else {})
        try:
            lake.write_state(STATE, state)
        except OSError as exc:
            log.info("inventory source %s: what its files were is not recorded (%s): they are read again next run",
                     self.source, exc)


def inputs(connector: object, source: InventorySource) -> Inputs | None:
    """The source's inputs as they are now, or None when it reads anything but local files."""
    paths = getattr(connector, "inputs", lambda: None)()
    if paths is None:
        return None
    digest = hashlib.sha256(FORMAT.encode())
    config = json.dumps(source.model_dump(mode="json"), sort_keys=True, default=str)
    code = _code_digest(Path(__file__).parents[1], _connector_code(type(connector)))
    for part in (duckdb.__version__, _readers(), code, config):
        digest.update(part.encode() + b"\0")
    if not all(path.is_dir() or path.is_file() for path in paths):
        return None  # missing, or a FIFO: the read says what it is
    files = sorted({file for path in paths for file in _files(path)})
    stats = _stats(files)  # before hashing: a file rewritten after its hash differs from them after the read
    try:
        for file in files:
            digest.update(f"{file}\0{_content(file, paths)}\0".encode())
    except OSError:  # unreadable: the read says it
        return None
    return Inputs(source.name, digest.hexdigest(), stats)


def _readers() -> str:
    """What reads the files besides spendlake's code and DuckDB: pyarrow's version and the tz database
    zoneinfo reads (its folders with their tzdata.zi's version line, and the tzdata package's version)."""
    said = [f"pyarrow {_version('pyarrow')}", f"tzdata {_version('tzdata')}"]
    for folder in zoneinfo.TZPATH:
        try:
            with open(Path(folder, "tzdata.zi"), encoding="utf-8", errors="replace") as version:
                said.append(f"{folder} {version.readline().strip()}")
        except OSError:
            said.append(folder)
    return "\0".join(said)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def _connector_code(kind: type) -> Path:
    """The connector's code: its package's folder, or its module's file alone when that is a top-level
    module (a plugin installed as one file: its folder is site-packages)."""
    file = Path(inspect.getfile(kind))
    module = sys.modules.get(kind.__module__)
    return file.parent if module is not None and getattr(module, "__package__", None) else file


def partition_file(lake: Lake, source: str, part: str) -> Path:
    """The file of `part` (`<table> <key>=<value>`, as an outcome names it)."""
    table, partition = part.split(" ", 1)
    key, value = partition.split("=", 1)
    return lake.partition_file(table, [("source", source), (key, value)])


@contextmanager
def warnings_said() -> Iterator[list[logging.LogRecord]]:
    """The warnings this thread logs inside the block (another thread's, serve's, are not its)."""
    said: list[logging.LogRecord] = []
    handler = _Said(said, threading.get_ident())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield said
    finally:
        root.removeHandler(handler)


class _Said(logging.Handler):
    def __init__(self, said: list[logging.LogRecord], thread: int):
        super().__init__(logging.WARNING)
        self.said, self.thread = said, thread

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.said.append(record)


def _files(path: Path) -> Iterator[Path]:
    """Every file under `path` (hidden ones too: a folder renamed visible changes the digest),
    not following links to folders, as the readers do not."""
    if not path.is_dir():
        yield path
        return
    for folder, _, names in os.walk(path):
        yield from (Path(folder, name) for name in names if Path(folder, name).is_file())


def _content(file: Path, paths: list[Path]) -> str:
    """The file's SHA-256; a link out of its source's folders is not opened (the read refuses it,
    connectors/source_folder.py): its target is what it holds here."""
    target = file.resolve()
    if file.is_symlink() and not any(target.is_relative_to(path.resolve()) for path in paths if path.is_dir()):
        return f"a link to {target}"
    return sha256_file(file)


def _stats(files: list[Path]) -> tuple[tuple[str, int, int, int], ...]:
    found = []
    for file in files:
        try:
            stat = file.stat()
            found.append((str(file), stat.st_size, stat.st_mtime_ns, stat.st_ino))
        except OSError:
            found.append((str(file), -1, -1, -1))
    return tuple(found)


@functools.cache
def _code_digest(*paths: Path) -> str:
    """The Python code under `paths` (a folder's every .py file, or a file alone): spendlake's and its
    connector's (a reader changed reads again)."""
    digest = hashlib.sha256()
    for path in paths:
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(f"{file.relative_to(path) if path.is_dir() else file.name}\0".encode() + file.read_bytes())
    return digest.hexdigest()
