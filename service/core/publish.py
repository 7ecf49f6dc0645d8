"""Publishing files outside the lake: a local folder, atomically per file, or an S3 prefix.

What `spendlake report` and `spendlake export` write goes through here. A local folder is
filled from a staging folder beside it (`.staging-<name>-<pid>-<uuid>`, fsynced), each file
renamed into place with `os.replace` and the one named `last` renamed last, so a reader that
finds that file finds the rest of this run's files; a writer killed with `kill -9` leaves its
staging folder, which the next run beside it removes (a live writer's is left alone). An S3
prefix gets one PUT per file (each object replaced atomically), `last` uploaded last.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

from service.core.errors import SpendlakeError, UsageError, naming, resource_error
from service.core.files import fsync_path

STAGING_PREFIX = ".staging-"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".json": "application/json",
                 ".md": "text/markdown; charset=utf-8", ".csv": "text/csv; charset=utf-8",
                 ".parquet": "application/vnd.apache.parquet"}


@contextmanager
def removed_if_failed(folder: Path) -> Iterator[None]:
    """On failure, remove `folder` and those of its parents that did not exist before, when empty:
    a full disk leaves no empty `<out>/<day>` (or `<out>`) behind. A folder that existed, a user's,
    is never removed; one holding files (another run's) is kept."""
    made = [path for path in (folder, *folder.parents) if not path.exists()]  # deepest first
    try:
        yield
    except BaseException:
        for path in made:
            with suppress(OSError):  # not empty, or gone already
                path.rmdir()
        raise


def staging_folder(folder: Path) -> Path:
    """A new, empty staging folder beside `folder` (abandoned ones there removed first)."""
    folder = folder.resolve()
    remove_abandoned_staging(folder.parent)
    staging = folder.parent / f"{STAGING_PREFIX}{folder.name}-{os.getpid()}-{uuid.uuid4().hex}"
    _into_made(staging.mkdir, folder.parent)
    return staging


def _into_made(action: Callable[[], object], folder: Path, tries: int = 3) -> None:
    """`action` (making or renaming something into `folder`) once `folder` is made. Another run
    failing at the same moment removes the folders it made when empty (removed_if_failed), one
    this run has just made too: that is 'No such file or directory' here, and the folder is
    made again (each failing run removes it once)."""
    for attempt in range(tries):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            action()
            return
        except FileNotFoundError:
            if attempt == tries - 1:
                raise


def publish_staged(staging: Path, folder: Path, *, last: str | None = None,
                   stale: Callable[[Path], bool] = lambda path: False) -> Path:
    """Rename every file of `staging` into `folder` (`last` last), remove the files of
    `folder` that this run did not write and `stale` says are out of date, fsync the folder."""
    folder = folder.resolve()
    names = sorted((p.name for p in staging.iterdir() if p.is_file()), key=lambda n: n == last)
    for name in names:
        fsync_path(staging / name)
    for name in names:
        _into_made(partial(os.replace, staging / name, folder / name), folder)
    for old in folder.iterdir():
        if old.is_file() and old.name not in names and stale(old):
            old.unlink()
    fsync_path(folder)
    return folder


AGAIN_BY_HAND = "then run the command again"  # what follows freeing space, for a command (not the service)


def write_local(files: Mapping[str, bytes], folder: Path, *, last: str | None = None,
                stale: Callable[[Path], bool] = lambda path: path.suffix == ".csv", what: str = "the report",
                named: str = "--out", then: str | None = None) -> Path:
    """Write `files` (name → bytes) into `folder` through a staging folder; stale CSVs of an
    earlier run go (a report's tables change with the data). A failure names the folder as
    `named` (`--out`, `report.out`) and says `then` after what to do (write_error)."""
    folder = folder.resolve()
    staging = None
    with removed_if_failed(folder):
        try:
            staging = staging_folder(folder)
            for name, data in files.items():
                with naming(folder / name), open(staging / name, "wb") as handle:
                    handle.write(data)
            return publish_staged(staging, folder, last=last, stale=stale)
        except OSError as exc:
            raise write_error(exc, folder, what, named=named, then=then) from None
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)


def write_error(exc: OSError, where: Path | str, what: str, *, named: str = "--out",
                then: str | None = None) -> SpendlakeError:
    """A failed write as our error; a file where the output folder or one of its parents
    should be is a wrong choice of folder (exit 2) naming that file, not the OS's 'Not a directory';
    a full disk says so, naming the file it could not write. `named`: what set the folder (`--out`,
    or `report.out` for the service's reports); `then`: what happens next (the service writes the
    report again by itself), where a command's (None) is run again by hand."""
    blocking = None if str(where).startswith("s3://") else file_in_the_way(Path(where))
    if blocking is not None:
        return UsageError(f"{blocking} is a file, not a folder: {what} cannot be written under it",
                          hint="choose an output folder that is not a file or inside one, or move that file away")
    limit = resource_error(exc, exc.filename or str(where))
    if limit is not None:  # a full disk, a quota, a size limit: said as every command says them
        limit.hint = (f"free space on the {named} folder's file system (or choose another folder), "
                      f"{then or AGAIN_BY_HAND}; "
                      "what the folder held before is intact")
        return limit
    elsewhere = ("write elsewhere with --out DIR (a lake you may only read: --out a folder of your own)"
                 if named == "--out" else f"set {named} to another folder")
    return SpendlakeError(f"cannot write {what}: {exc.strerror or exc}", where=str(where),
                          hint=f"check the folder's permissions and free space, or {elsewhere}"
                               + (f"; {then}" if then else ""))  # a command's is plain


def file_in_the_way(path: Path) -> Path | None:
    """The nearest of `path` and its parents that exists, when it is not a folder."""
    for folder in (path, *path.parents):
        if folder.exists():
            return None if folder.is_dir() else folder
    return None


def remove_abandoned_staging(parent: Path) -> None:
    """`.staging-<name>-<pid>-<uuid>` folders whose writer is gone (a `kill -9`); a live
    writer's folder, another run writing at this moment, is left alone."""
    for staging in parent.glob(f"{STAGING_PREFIX}*") if parent.is_dir() else ():
        pid = staging.name.rsplit("-", 2)[-2] if staging.name.count("-") >= 3 else ""
        if not pid.isdigit() or not _alive(int(pid)):
            shutil.rmtree(staging, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True



def split_s3_url(url: str, where: str = "--out") -> tuple[str, str]:
    """(bucket, prefix without slashes at its ends) of `s3://bucket/prefix`."""
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    if not bucket:
        raise UsageError(f"no bucket in {url!r}", where=where, hint="use s3://bucket/prefix")
    return bucket, prefix.strip("/")


def unanswered_hint(exc: BaseException, limits: str | None) -> str | None:
    """What to do when botocore's `exc` is an S3 endpoint not reached or not answering in time, after
    the retries (else None); `limits`: the settings of the client's timeout and attempts, to raise."""
    from botocore.exceptions import ConnectionError as NoConnection
    from botocore.exceptions import HTTPClientError  # a read timeout among them

    if not isinstance(exc, (NoConnection, HTTPClientError)):
        return None
    return "check that the S3 endpoint answers" + (f", or raise {limits}" if limits else ", and run again")


def upload_s3(files: Mapping[str, bytes | Path], client: Any, bucket: str, prefix: str, *, last: str | None = None,
              what: str = "the files", limits: str | None = None) -> str:
    """PUT each file (bytes, or a local file sent in parts when large) under
    `s3://bucket/prefix/<name>` with `client` (boto3's, its timeouts and deadline the caller's), `last`
    last; returns the prefix's URL. `limits`: the settings of the client's timeout and attempts, when
    it has them (`report.timeout_seconds / report.max_attempts`)."""
    from boto3.exceptions import S3UploadFailedError  # what upload_file raises for a ClientError
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        for name in sorted(files, key=lambda n: n == last):
            key = f"{prefix}/{name}" if prefix else name
            content_type = CONTENT_TYPES.get(Path(name).suffix, "application/octet-stream")
            body = files[name]
            if isinstance(body, Path):
                client.upload_file(str(body), bucket, key, ExtraArgs={"ContentType": content_type})
            else:
                client.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type)
    except (BotoCoreError, ClientError, S3UploadFailedError) as exc:
        raise SpendlakeError(f"cannot upload {what}: {exc}", where=f"s3://{bucket}/{prefix}/", hint=unanswered_hint(
            exc, limits) or "check the bucket name and that the credentials allow s3:PutObject") from None
    return f"s3://{bucket}/{prefix}/" if prefix else f"s3://{bucket}/"
