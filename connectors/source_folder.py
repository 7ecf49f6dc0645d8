"""The files of a source's local folder that spendlake may open: a symbolic link in the folder
whose target lies outside it is refused before it is opened, in the sentence DuckDB's sandbox
gives a billing file (service/core/errors.py sandbox_error). Followed, it would be read with the
service's rights: a file anyone who can write to a shared export folder names (`/etc/passwd`),
its first line echoed by the reader's error. A link to another file of the folder is read.

A file is listed (and checked) before it is opened: what Python reads itself is opened by
`opened_inside`, every folder from the source's folder down and the file itself without following
a link (O_NOFOLLOW), so a file or folder swapped for a link between the check and the open is
refused too. The files DuckDB opens by path cannot be opened so (it takes a path, not a
descriptor): its sandbox (service/core/connection.py: the lake and the sources' folders as its
allowed directories) refuses a link out for them."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO, NamedTuple

from service.core.errors import SourceError, sandbox_error

REFUSED = "a file of the folder is not read"


def inside(root: Path, path: Path, setting: str) -> Path:
    """`path`, a file listed under the resolved folder `root`; a SourceError naming the link and
    its target when it leads out of `root`. `setting`: the config key that names `root`."""
    if path.is_symlink() and not path.resolve().is_relative_to(root):
        raise sandbox_error(path, REFUSED, str(root), setting=setting)
    return path


class Folder(NamedTuple):
    """A source's resolved local folder and the config key that names it."""

    root: Path
    setting: str

    @classmethod
    def of(cls, path: str, setting: str) -> Folder:
        """The folder a source's `path` names: itself, or the folder of the file it names."""
        root = Path(path).expanduser().resolve()
        return cls(root if root.is_dir() else root.parent, setting)

    def open(self, path: Path) -> BinaryIO:
        return opened_inside(self.root, path, self.setting)


def opened_inside(root: Path, path: Path, setting: str) -> BinaryIO:
    """`path`, listed under the resolved folder `root`, opened for reading: a link inside `root`
    is followed to its target as `inside` allows, then that target is opened one name at a time
    from `root` with none followed, so no link (one swapped in after the check) leads out."""
    target = inside(root, path, setting).resolve()
    if not target.is_relative_to(root):  # a folder of `path` became a link out since it was listed
        raise sandbox_error(path, REFUSED, str(root), setting=setting)
    *folders, name = target.relative_to(root).parts
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in folders:
            folder, parent = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder), folder
            os.close(parent)
        # O_NONBLOCK: a FIFO swapped in would hold the open until someone writes to it
        opened = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
        if not stat.S_ISREG(os.fstat(opened).st_mode):
            os.close(opened)
            raise SourceError(f"{REFUSED}: {path} is not a regular file now (a FIFO or device put in its place)",
                              where=str(root), hint=f"leave only the export's files in the folder {setting} names")
        return os.fdopen(opened, "rb")
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a name of it is a link now
            raise sandbox_error(path, REFUSED, str(root), setting=setting) from None
        raise
    finally:
        os.close(folder)
