"""A local file's version, what a listing records of it (size, times, inode), and a cheap digest
of its bytes: how ingest tells a file replaced from one moved or copied with its times
(connectors/storage.py lists through them)."""

from __future__ import annotations

import hashlib
import os


def local_version(path: str) -> str | None:
    """A local file's version as a listing gives it (stat_version); None when it is gone."""
    try:
        return stat_version(os.stat(path))
    except (FileNotFoundError, NotADirectoryError):
        return None


def stat_version(stat: os.stat_result) -> str:
    """Size, modification and change times, inode: a file rewritten with the same size within one
    mtime tick, or given its old mtime back (`cp -p`, `os.utime`), still changes its ctime in
    place, and a file put in its place has another inode."""
    return f"{stat.st_size}-{stat.st_mtime_ns}-{stat.st_ctime_ns}-{stat.st_ino}"


def moved_alike(was: str, now: str) -> bool:
    """Whether a local file of version `now` may be one of version `was` moved or copied with its
    times (to another disk: `mv`, `cp -a`, `rsync -a`): the same size and modification time, the
    inode and change time of its new place. False for S3 versions (ETags)."""
    before, after = was.split("-"), now.split("-")
    return len(before) == len(after) == 4 and before[:2] == after[:2]


SAMPLE_EDGE, SAMPLE_BLOCK, SAMPLE_BLOCKS = 64 * 1024, 4096, 16


def sampled_digest(path: str) -> str | None:
    """A cheap digest of a local file's bytes, recorded when it is read and compared when it seems
    moved (`moved_alike` tells only size and modification time): its first and last 64 KiB and
    16 blocks of 4 KiB spread between them, a re-export's changed figures being spread too (a
    change in the middle between those blocks alone goes unseen); None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            fd = handle.fileno()
            size = os.fstat(fd).st_size
            digest.update(os.pread(fd, SAMPLE_EDGE, 0))
            inner = size - 2 * SAMPLE_EDGE
            for n in range(1, SAMPLE_BLOCKS + 1) if inner > 0 else ():
                digest.update(os.pread(fd, SAMPLE_BLOCK, SAMPLE_EDGE + inner * n // (SAMPLE_BLOCKS + 1)))
            digest.update(os.pread(fd, SAMPLE_EDGE, max(size - SAMPLE_EDGE, 0)))
    except OSError:
        return None
    return f"{size}-{digest.hexdigest()[:32]}"
