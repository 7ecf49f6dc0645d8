"""The lake's locks: one file per name under `<lake>/_locks/`, held with flock(2).

A writer (ingest, `spendlake rollup`, the service's jobs) holds `ingest` exclusively and
writes its pid and host into the file (`holder`), so a second writer is refused naming the
holder (a lake on a shared volume is locked from several machines: a pid alone names no
process). A container restarted after a crash often runs its new process under the same pid
and hostname, so the holder also carries a token drawn once per process: a commit the crashed
one announced is never taken for the new holder's. A reader may ask which writer holds it
(`lock_holder`): it takes and drops a shared lock, which fails while the exclusive one is
held, in this process or another. The kernel drops a lock when its process dies, so a holder
is alive whatever the clocks say. A writer also locks the folder `<name>.held/` beside the
file, so removing the file while it is held lets no second writer in, and names itself in it
(`holder`), so readers still tell its commits from those of a writer that died.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import socket
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from service.core.errors import DataError, LakeBusyError, os_error

_PROCESS = secrets.token_hex(6)  # a forked child differs by its pid
HOLDER = "holder"  # the file in `<name>.held/` naming the holder, as its lock file does
LOOK_SECONDS = 0.2  # a lock held this long is held by a writer, not looked at by a reader
# held for a whole `serve`, one per lake; its jobs take the writers' locks for what they write, so a
# serve whose `service.lock` was removed still publishes under them
NOT_WRITERS = frozenset({"service"})
_HELD: dict[Path, tuple[tuple[Path, tuple[int, int] | None], ...]] = {}  # lock file → (place, identity) held
_command = ""  # what this process is ("spendlake serve"), written under the holder: `serve`'s jobs hold `ingest`


def set_command(command: str) -> None:
    """Name this process in the locks it takes, so a writer refused names it as it is."""
    global _command
    _command = command

@contextmanager
def hold_lock(locks: Path, name: str) -> Iterator[None]:
    """An exclusive, non-blocking lock; the holder's pid and host are written into the lock file."""
    path = locks / f"{name}.lock"
    try:
        locks.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:  # a read-only lake: say so before anything runs
        _not_a_link(path)
        raise os_error(exc) from None
    try:
        try:
            _exclusive(fd)
        except BlockingIOError:
            held_by, _, command = os.pread(fd, 400, 0).decode(errors="replace").strip().partition("\n")
            raise LakeBusyError(f"another {command.strip() or 'spendlake ' + name} holds the lake "
                                f"(pid {held_by.strip() or 'unknown'})", where=str(path),
                                hint="wait for it to finish, or stop that process") from None
        pin = _pinned(locks, name, path)
        try:
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{holder()}\n{_command}".encode(), 0)
                if pin is not None:  # named in the folder too: the lock file may be removed while held
                    _write(locks / f"{name}.held" / HOLDER, holder())
            except OSError as exc:  # a full disk: name the lock file, not an anonymous descriptor
                raise os_error(exc, str(path)) from None
            _HELD[path] = ((path, _identity(fd)),) + (() if pin is None else ((locks / f"{name}.held", _identity(pin)),))
            yield
        finally:
            _HELD.pop(path, None)
            if pin is not None:
                os.close(pin)
    finally:
        os.close(fd)


def check_still_held(written: Path) -> None:
    """Before a writer publishes `written` (a ledger, a snapshot record: service.core.files): each
    lock this process holds on that lake still at its place, its file or its `.held/` folder the
    very one it locked. `rm -rf <lake>/_locks` while held took both away, a second writer then made
    and locked new ones beside it, and both committed over each other; one of the two still in
    place means no other writer can hold that name. A LakeBusyError, and nothing published, if not."""
    for path, places in tuple(_HELD.items()):  # a copy: the service's jobs take and drop locks in threads
        if path.stem not in NOT_WRITERS and written.is_relative_to(path.parent.parent) and not any(_identity(at) == was for at, was in places):
            raise LakeBusyError(
                f"the lake's {path.stem} lock this process held was removed or replaced while held ({path} and "
                f"{path.stem}.held/ are gone or others'): another writer may have taken the lake, so nothing of "
                f"this change is published", where=str(path),
                hint=f"make sure no other spendlake writer runs (`fuser -v {path.parent}/*`), then run this again; "
                     f"never remove {path.parent.name}/ while spendlake runs")


def _identity(at: int | Path) -> tuple[int, int] | None:
    """The (device, inode) of an open descriptor or of what is at a path now (None: nothing)."""
    try:
        found = os.fstat(at) if isinstance(at, int) else os.stat(at)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _pinned(locks: Path, name: str, path: Path) -> int | None:
    """The lock held on `<name>.held/` too, a directory `rm _locks/*` leaves: a lock file removed
    while held (taken for a stale one) is made again by the next writer, whose flock on the new
    file then succeeds beside the holder's. None where a directory cannot be locked (NFS emulates
    flock with write locks, which a directory opened to read cannot take): the file alone, as before."""
    held = locks / f"{name}.held"
    try:
        held.mkdir(exist_ok=True)
        pin = os.open(held, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        _not_a_link(held)
        if held.exists() and not held.is_dir():  # the guard would be off without a word
            raise DataError(f"{held} is a file, not the folder spendlake locks beside {path.name}: without it a "
                            f"lock file removed while held would let a second writer in", where=str(held),
                            hint=f"make sure no spendlake writer runs (`fuser -v {path}`), then remove the file "
                                 f"(`rm {held}`); the next writer makes the folder again") from None
        return None
    try:
        _exclusive(pin)
    except BlockingIOError:
        os.close(pin)
        raise LakeBusyError(f"another spendlake {name} holds the lake (its lock file was removed or replaced while "
                            f"held, so its pid is not recorded; {name}.held/ is still locked)", where=str(path),
                            hint="wait for it to finish, or stop that process (`fuser -v` on the folder names it)") \
            from None
    except OSError:
        os.close(pin)
        return None
    return pin


def _exclusive(fd: int) -> None:
    """flock(fd) exclusively, or BlockingIOError once it stayed held for LOOK_SECONDS: a reader
    asking who holds it (`lock_holder`) holds it shared for a moment, and is no writer to refuse."""
    deadline = time.monotonic() + LOOK_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def holder() -> str:
    """This process as a lock holder: its pid, host and token ("4242 on host-1 #3f9a0c1d2e4b")."""
    return f"{os.getpid()} on {socket.gethostname()} #{_PROCESS}"


def lock_holder(locks: Path, name: str) -> str | None:
    """The `holder` of the `name` lock while a writer holds it, from its lock file, or from its
    `.held/` folder when that file was removed or replaced while held (the folder still locked:
    see `_pinned`); "" while one does that has not written itself yet; None while none does."""
    try:
        fd = os.open(locks / f"{name}.lock", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # never locked, removed, or not readable: the folder tells
        fd = None
    if fd is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # the first line: the command below it is no part of the holder's identity
            return os.pread(fd, 300, 0).decode(errors="replace").partition("\n")[0].strip()
        finally:
            os.close(fd)  # drops the shared lock taken to look
    held = locks / f"{name}.held"
    return _holder_in(held) if _held(held) else None


def _write(path: Path, text: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError:
        _not_a_link(path)
        raise
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _not_a_link(path: Path) -> None:
    """A DataError when `path`, a lock file, its `.held/` folder or the holder in it, is a symbolic
    link: they are opened with O_NOFOLLOW, as writing through one would truncate and write the file
    it points to, outside the lake (one planted in `_locks/`)."""
    if path.is_symlink():
        raise DataError(f"{path} is a symbolic link (to {os.readlink(path)}), which spendlake does not open: its "
                        f"lock would write where the link points", where=str(path),
                        hint=f"make sure no spendlake runs on this lake, then remove the link (`rm {path}`); the next "
                             f"command makes the file again") from None


def _holder_in(held: Path) -> str:
    """The holder named in a held `<name>.held/` folder; "" when not (yet) written there, or removed.
    Read while the folder is locked, so it is the holder's, or a moment after its lock, the previous
    one's: which a reader takes for the writer of a commit that died, and waits, as for "" .
    Opened as the lock opens it, not following a link (in the folder opened so too), and read only
    when a file, its first line: a link planted there (to a secret, /dev/zero) or a FIFO, which
    held a reader (`status`, every query looking for a commit in flight) for good, reads as ""."""
    try:
        folder = os.open(held, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return ""
    try:
        fd = os.open(HOLDER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return ""
    finally:
        os.close(folder)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.pread(fd, 300, 0).decode(errors="replace").partition("\n")[0].strip()
    except OSError:
        return ""
    finally:
        os.close(fd)


def _held(folder: Path) -> bool:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:  # a folder that cannot be locked (NFS): `_pinned` holds none there
        return False
    finally:
        os.close(fd)
