"""The lake folder a long-running process started on, held by its identity.

Every connection, lock and state write makes the lake's folders as it needs them, so a lake
moved or deleted under `spendlake serve` came back as a new empty folder at the same path:
the metrics read it as readable and $0, the API as a lake with no periods. The service pins
its lake's folder at start (device and inode); from then on a folder missing or replaced at
that path fails every read and write of this process naming it, and nothing is made there.
Commands, which start and end on one folder, pin nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from service.core.errors import DataError

_PINNED: dict[Path, tuple[int, int]] = {}


def pin_root(root: str | os.PathLike[str]) -> None:
    """Hold `root` (made now if missing, as at any start) as the folder this process runs on."""
    path = Path(root).resolve()
    path.mkdir(parents=True, exist_ok=True)
    stat = path.stat()
    _PINNED[path] = (stat.st_dev, stat.st_ino)


def check_root(root: Path) -> None:
    """A DataError when `root` is pinned and the folder there now is gone or another one."""
    pinned = _PINNED.get(root)
    if pinned is None:
        return
    try:
        stat = root.stat()
    except FileNotFoundError:
        found = "is gone (moved or deleted)"
    else:
        if (stat.st_dev, stat.st_ino) == pinned:
            return
        found = "is another folder than the one it started on (moved and replaced)"
    raise DataError(f"the lake folder {found} while spendlake ran", where=str(root),
                    hint="put the lake back where it was, or restart spendlake to run on the folder there now")
