"""The files of a source's local folder that spendlake may open: a symbolic link in the folder
whose target lies outside it is refused before it is opened, in the sentence DuckDB's sandbox
gives a billing file (service/core/errors.py sandbox_error). Followed, it would be read with the
service's rights: a file anyone who can write to a shared export folder names (`/etc/passwd`),
its first line echoed by the reader's error. A link to another file of the folder is read."""

from __future__ import annotations

from pathlib import Path

from service.core.errors import sandbox_error


def inside(root: Path, path: Path, setting: str) -> Path:
    """`path`, a file listed under the resolved folder `root`; a SourceError naming the link and
    its target when it leads out of `root`. `setting`: the config key that names `root`."""
    if path.is_symlink() and not path.resolve().is_relative_to(root):
        raise sandbox_error(path, "a file of the folder is not read", str(root), setting=setting)
    return path
