"""Marks of a source's failures the lake's `sources` state could not record (its file not
written: a full disk), one file each in `<lake>/_state/sources.unrecorded/`.

The state file is the failure counter (service/ingest/freshness.py): a CLI ingest that failed
and could not write it left the source as it was (`not ingested`, failures_total 0) for every
later `status` and for the service. A mark is named `<source>@<time>@<token>`, so a full disk
that lets no byte be written still makes it (a name takes an inode, no data block) and says
which source failed and when; the file holds the error when the disk had room for it.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from service.core.files import listed

FOLDER = "sources.unrecorded"
_TIME = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class Mark:
    path: Path
    source: str
    failed_at: str  # the failure's UTC time, as the state holds times ("2026-11-30T05:00:00Z")
    error: str | None  # None: the disk had no room for the error's text


def folder(root: Path) -> Path:
    return root / "_state" / FOLDER


def ready(root: Path) -> None:
    """Make the marks' folder while the disk has room: a new folder takes a data block (a new
    name in an existing one takes none), so a full disk could refuse the first mark's folder."""
    try:
        folder(root).mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # leave() tries again, and says so if it cannot


def leave(root: Path, source: str, failed_at: str, error: str) -> Path:
    """Mark `source`'s failure at `failed_at`; an OSError when not even its name can be made
    (a read-only disk)."""
    when = datetime.fromisoformat(failed_at.replace("Z", "+00:00")).strftime(_TIME)
    path = folder(root) / f"{source}@{when}@{secrets.token_hex(4)}"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _write_all(fd, error.encode())
    except OSError:  # no room for the text: the name alone says it, and the error is unknown
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    return path


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def marks(root: Path) -> list[Mark]:
    """The marks left, oldest first; a name not of a mark (a stray file) is no mark."""
    found = []
    for path in listed(folder(root), "*@*@*"):
        source, when, _ = path.name.split("@", 2)
        try:
            failed_at = datetime.strptime(when, _TIME).replace(tzinfo=timezone.utc)
            text = path.read_bytes().decode(errors="replace")
        except (ValueError, OSError):  # not a mark's name, or removed as it was listed
            continue
        found.append(Mark(path, source, failed_at.isoformat().replace("+00:00", "Z"), text or None))
    return sorted(found, key=lambda mark: (mark.failed_at, mark.path.name))


def remove(found: list[Mark]) -> None:
    """Remove marks counted in the state; one that stays is told apart by its name there."""
    for mark in found:
        try:
            mark.path.unlink()
        except OSError:
            continue


def names(root: Path) -> tuple[str, ...]:
    """The marks' names (what a change of them changes: the metrics page's key)."""
    return tuple(path.name for path in listed(folder(root), "*@*@*"))
