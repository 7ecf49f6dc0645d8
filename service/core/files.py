"""Atomic file writes and the names they may take inside the lake."""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Sequence
from pathlib import Path

from service.core.errors import DataError
from service.core.locks import check_still_held

PARTITION_VALUE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
TABLE_RE = re.compile(r"^[a-z][a-z0-9_]*$")  # a table's or a state file's name
DATA_FILE = "data.parquet"  # a partition's one file (service/core/lake.py)
LEDGER_FILE = "_ledger/deliveries.json"  # relative to the lake root; what marks a folder as a lake
# Folders whose files no source reads: hidden (`.x`), or a job's output still being written
# (Spark's `_temporary/`), as Arrow and Spark leave them: read, their rows count twice.
HIDDEN_FOLDER_PREFIXES = (".", "_")


def files_named(files: Sequence[str], otherwise: str, shown: int = 5) -> str:
    """A delivery's files as an error's `where`: each of a few; the first few and how many more
    of many (an export partitioned by hour has hundreds, and the error's own text names the file)."""
    if len(files) <= shown:
        return ", ".join(files) or otherwise
    return f"{', '.join(files[:shown])} and {len(files) - shown:,} more files"


def hidden_folder(name: str) -> bool:
    return name.startswith(HIDDEN_FOLDER_PREFIXES) and name not in (".", "..")


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class NotSynced(OSError):
    """The file is in place (every reader sees it) but its folder could not be synced after the
    rename: a crash may still lose it. A writer that would record the failure elsewhere (a mark
    beside the state: service/ingest/freshness.py) must not, or it counts twice."""


def write_json_atomic(path: Path, data: object) -> None:
    """Write JSON next to `path`, fsync, then rename over it: readers see old or new. An
    OSError names `path` (a write on a full disk carries no file name, the temp file's is noise);
    one after the rename is NotSynced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        check_still_held(path)  # a ledger or a record published: by the lake's writer, still its writer
        os.replace(tmp, path)
    except OSError as exc:
        if exc.filename not in (None, str(tmp)):
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
    finally:
        tmp.unlink(missing_ok=True)
    try:
        fsync_path(path.parent)
    except OSError as exc:
        raise NotSynced(exc.errno, exc.strerror or str(exc), str(path.parent)) from exc


def is_partition_value(value: str) -> bool:
    """Partition values become directory names: nothing that could traverse."""
    return bool(PARTITION_VALUE_RE.match(value)) and ".." not in value


def check_partition_value(name: str, value: str) -> str:
    if not is_partition_value(value):
        raise DataError(f"invalid {name} value {value!r} for a lake partition")
    return value


def listed(folder: Path, pattern: str, tries: int = 3) -> list[Path]:
    """`folder.glob(pattern)`, sorted; listed again when a folder in it went while it was listed (a writer
    removing a superseded version's folder, `forget` a source's): pathlib's glob lets that FileNotFoundError
    out, and a scrape beside the writer said the lake could not be read. The last of `tries` lets it out."""
    for _ in range(tries - 1):
        try:
            return sorted(folder.glob(pattern))
        except FileNotFoundError:
            continue  # the folder is gone: what is there now
    return sorted(folder.glob(pattern))


def install(staged: Path, target: Path) -> None:
    """fsync a staged file, then atomically put it in place of `target`."""
    fsync_path(staged)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, target)
    fsync_path(target.parent)


def resolved(path: str | os.PathLike[str]) -> Path:
    """`path` made absolute with its symbolic links followed; a link that loops (a config file or
    lake replaced by one while `serve` runs) as it stands, absolute: the next read of it then says
    what is wrong, where Path.resolve raised a RuntimeError the error handling does not know."""
    try:
        return Path(path).resolve()
    except RuntimeError:
        return Path(path).absolute()
