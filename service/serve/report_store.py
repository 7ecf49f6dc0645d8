"""Reading the daily reports where `spendlake report` writes them (service/report/write.py):
`<out>/<YYYY-MM-DD>/` holding report.html, report.json, summary.md and one CSV per table, in a
local folder or under an `s3://bucket/prefix`.

Only those names are ever read: a day is a real date, a file one of the report's names, and
both are checked before any path or key is made of them. Locally each step is opened relative
to the one before without following a link (`O_NOFOLLOW`, `dir_fd`), so a symlink in the
reports folder, a day folder that is a symlink or a FIFO named like a report is refused, also
when it is swapped in between the check and the read. On S3 only ListObjectsV2 and GetObject
are used, on keys under the prefix, each page's or file's calls ending by report.deadline_seconds
and each attempt's connect and reads by report.timeout_seconds (`S3Reports.held`). A day without
report.html is not served: the writer puts it last, so it is being written (or its run failed).
Listing the days reads the day folders' names (on S3 their common prefixes), and only the days a
page shows have their files listed.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from typing import BinaryIO

from connectors.aws_client import held_to, make_client
from service.core.config import ReportConfig
from service.core.errors import SourceError, SpendlakeError
from service.core.publish import split_s3_url, unanswered_hint
from service.report.write import ENDPOINT_ANSWERS, LIMITS
from service.serve.http import Streamed

log = logging.getLogger(__name__)

LAST = "report.html"  # written last: a day that has it has the rest
FILE_NAME = re.compile(r"report\.html|report\.json|summary\.md|[a-z][a-z0-9_]{0,99}\.csv")  # a table's key.csv
DAY_NAME = re.compile(r"\d{4}-\d{2}-\d{2}")
CHUNK = 256 * 1024
S3_HINT = "the service needs s3:ListBucket and s3:GetObject on the report.out prefix"


class ReportNotFound(SpendlakeError):
    """No such report, or not one this service serves: a 404 with the reason."""


def incomplete(day: date) -> str:
    return (f"the report of {day} is not complete: {LAST} is written last "
            "(being written now, or its run failed)")


def report_day(text: str) -> date | None:
    """The day a folder name is, or None."""
    if not DAY_NAME.fullmatch(text):
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class ReportFile:
    name: str
    size: int
    modified: datetime


@dataclass(frozen=True)
class ReportDay:
    day: date
    files: tuple[ReportFile, ...]  # report.html, report.json, summary.md, then the CSVs by name

    @property
    def complete(self) -> bool:
        return any(f.name == LAST for f in self.files)


@dataclass(frozen=True)
class OpenedFile:
    stream: Streamed
    etag: str
    modified: datetime

    @property
    def last_modified(self) -> str | None:
        """The HTTP date (whole seconds); None while that second is not over: a rewrite within it
        would carry the same date, so a client's If-Modified-Since (curl -z) could not tell the
        two apart and would get a 304 for the old copy. The ETag tells them apart meanwhile."""
        second = self.modified.astimezone(timezone.utc).replace(microsecond=0)
        if datetime.now(timezone.utc) < second + timedelta(seconds=1):
            return None
        return format_datetime(second, usegmt=True)


def _chunks(handle: BinaryIO, length: int) -> Iterator[bytes]:
    """At most `length` bytes of `handle`: a file that grew while sent does not overrun."""
    left = length
    while left > 0 and (chunk := handle.read(min(CHUNK, left))):
        left -= len(chunk)
        yield chunk


def newest_first(days: dict[date, list[ReportFile]]) -> list[ReportDay]:
    return [ReportDay(day, tuple(sorted(files, key=lambda f: (f.name.endswith(".csv"), f.name))))
            for day, files in sorted(days.items(), reverse=True)]


class LocalReports:
    def __init__(self, root: Path):
        self.root = root
        self.where = str(root)

    def dates(self) -> list[date]:
        """The day folders, newest first (their names only: no file is looked at); a missing
        folder has none."""
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise self.unreadable(exc, self.root) from None
        days = (report_day(entry.name) for entry in entries if entry.is_dir(follow_symlinks=False))
        return sorted((day for day in days if day is not None), reverse=True)

    def days(self, dates: Sequence[date]) -> list[ReportDay]:
        """The report files of these days, newest first."""
        return newest_first({day: self.files(self.root / day.isoformat()) for day in dates})

    def complete(self, day: date) -> bool:
        path = self.root / day.isoformat() / LAST
        try:
            return stat.S_ISREG(os.lstat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            raise self.unreadable(exc, path) from None

    def files(self, folder: Path) -> list[ReportFile]:
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:  # removed since the reports folder was listed
            return []
        except OSError as exc:
            raise self.unreadable(exc, folder) from None
        kept = []
        for entry in entries:
            if FILE_NAME.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:  # a stale CSV the writer removed after the listing
                    continue
                kept.append(ReportFile(entry.name, info.st_size, datetime.fromtimestamp(info.st_mtime, timezone.utc)))
        return kept

    def open(self, day: date, name: str) -> OpenedFile:
        folder = self.root / day.isoformat()
        try:
            root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)  # the configured folder may be a link
        except FileNotFoundError:
            raise ReportNotFound(f"no reports yet: {self.root} does not exist") from None
        except OSError as exc:
            raise self.unreadable(exc, self.root) from None
        try:
            day_fd = self.open_below(root, day.isoformat(), folder, "a report folder", os.O_DIRECTORY,
                                     missing=f"no report of {day} in {self.root}")
            try:
                if name != LAST:  # the others are served once the run that wrote them is done
                    os.close(self.open_below(day_fd, LAST, folder / LAST, "a report file", missing=incomplete(day)))
                fd = self.open_below(day_fd, name, folder / name, "a report file",
                                     missing=incomplete(day) if name == LAST else None)
            finally:
                os.close(day_fd)
        finally:
            os.close(root)
        handle = os.fdopen(fd, "rb")
        info = os.fstat(fd)
        return OpenedFile(Streamed(_chunks(handle, info.st_size), info.st_size, handle.close),
                          f'"{info.st_ino:x}-{info.st_size:x}-{info.st_mtime_ns:x}"',
                          datetime.fromtimestamp(info.st_mtime, timezone.utc))

    def open_below(self, folder_fd: int, name: str, path: Path, what: str, flags: int = 0, *,
                   missing: str | None = None) -> int:
        """`name` in the folder `folder_fd`, opened without following a link (non-blocking, so a
        FIFO cannot hold the thread), when it is a plain folder or file as `flags` asks."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | flags, dir_fd=folder_fd)
        except FileNotFoundError:
            raise ReportNotFound(missing or f"no {path.name} in {path.parent}") from None
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise self.unreadable(exc, path) from None
            log.warning("reports: %s is a link or not %s; not served", path, what)
            raise ReportNotFound(f"{path} is a link or not {what}: not served (the report writer makes "
                                 "plain folders and files)") from None
        if not flags and not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            log.warning("reports: %s is not a regular file; not served", path)
            raise ReportNotFound(f"{path} is not {what}")
        return fd

    def unreadable(self, exc: OSError, path: Path) -> SpendlakeError:
        if exc.errno == errno.ENOTDIR:
            return ReportNotFound(f"{path} is a file, not a folder of reports")
        return SourceError(f"cannot read the reports: {exc.strerror or exc}", where=str(path),
                           hint="check that the service's user may read the report.out folder")


class S3Reports:
    def __init__(self, url: str, settings: ReportConfig):
        self.bucket, prefix = split_s3_url(url, where="report.out")
        self.base = f"{prefix}/" if prefix else ""
        self.where = f"s3://{self.bucket}/{self.base}"
        self.settings = settings
        self._client = None
        self._held = threading.local()  # the deadline of what this thread asks now (held)

    @property
    def client(self):
        """One client for all the server's threads: each attempt's connect and reads within
        report.timeout_seconds, each listing or file its thread asks for by its deadline (held)."""
        if self._client is None:
            settings = self.settings
            client = make_client("s3", config_path="report", profile=settings.profile,
                                 endpoint_url=settings.endpoint_url, max_attempts=settings.max_attempts,
                                 timeout=settings.timeout_seconds)
            self._client = held_to(client, lambda: getattr(self._held, "deadline", None), self.where, ENDPOINT_ANSWERS)
        return self._client

    @contextmanager
    def held(self) -> Iterator[None]:
        """What follows in this thread, its S3 calls, their attempts and backoffs, ends by one
        report.deadline_seconds from now; within another `held`, by that one's."""
        if getattr(self._held, "deadline", None) is not None:
            yield
            return
        self._held.deadline = self.settings.start_deadline("report")
        try:
            yield
        finally:
            self._held.deadline = None

    def dates(self) -> list[date]:
        """The day folders, newest first: their common prefixes, a thousand a request, not their files."""
        found = []
        with self.held(), s3_errors(self.where):
            for page in self.pages(Prefix=self.base, Delimiter="/"):
                found += [report_day(p["Prefix"][len(self.base):-1]) for p in page.get("CommonPrefixes", [])]
        return sorted((day for day in found if day is not None), reverse=True)

    def days(self, dates: Sequence[date]) -> list[ReportDay]:
        """The report files of these days (a run of `dates()`), newest first: one listing from
        the oldest's folder to the newest's, a thousand keys a request."""
        if not dates:
            return []
        wanted = set(dates)
        listed = self.listed(self.base, after=min(wanted), through=max(wanted))
        return newest_first({day: files for day, files in listed.items() if day in wanted})

    def complete(self, day: date) -> bool:
        return any(f.name == LAST for f in self.listed(f"{self.base}{day.isoformat()}/").get(day, []))

    def pages(self, **params) -> Iterator[dict]:
        return self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, **params)

    def listed(self, prefix: str, *, after: date | None = None,
               through: date | None = None) -> dict[date, list[ReportFile]]:
        """The report files under `prefix` (the reports' prefix or one day's), by day; with
        `after`/`through` only the folders of those days and the ones between (keys come in order)."""
        found: dict[date, list[ReportFile]] = {}
        start = {"StartAfter": f"{self.base}{after.isoformat()}"} if after else {}
        end = f"{self.base}{through.isoformat()}/" if through else None
        with self.held(), s3_errors(f"s3://{self.bucket}/{prefix}"):
            for page in self.pages(Prefix=prefix, **start):
                for item in page.get("Contents", []):
                    if end and item["Key"] > end and not item["Key"].startswith(end):  # past `through`
                        return found
                    folder, _, name = item["Key"][len(self.base):].partition("/")
                    day = report_day(folder)
                    if day is not None and FILE_NAME.fullmatch(name):
                        found.setdefault(day, []).append(ReportFile(name, item["Size"], item["LastModified"]))
        return found

    def open(self, day: date, name: str) -> OpenedFile:
        """The file, its listing and GET by one deadline; its body then streamed, each read within
        report.timeout_seconds."""
        folder = f"{self.base}{day.isoformat()}/"
        with self.held():
            files = {f.name for f in self.listed(folder).get(day, [])}
            if not files:
                raise ReportNotFound(f"no report of {day} in {self.where}")
            if LAST not in files:
                raise ReportNotFound(incomplete(day))
            if name not in files:
                raise ReportNotFound(f"no {name} in {self.where}{day.isoformat()}/")
            with s3_errors(f"s3://{self.bucket}/{folder}{name}"):
                answer = self.client.get_object(Bucket=self.bucket, Key=folder + name)
        body = answer["Body"]
        return OpenedFile(Streamed(body.iter_chunks(CHUNK), answer["ContentLength"], body.close),
                          answer["ETag"], answer["LastModified"])


@contextmanager
def s3_errors(url: str) -> Iterator[None]:
    """A failed S3 call as a SourceError naming the object and the permissions the service
    needs; a key gone between the listing and the read is a 404."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            raise ReportNotFound(f"{url} is gone (the report is being written again?)") from None
        raise SourceError(f"cannot read the reports: {exc}", where=url, hint=S3_HINT) from None
    except BotoCoreError as exc:
        raise SourceError(f"cannot read the reports: {exc}", where=url,
                          hint=unanswered_hint(exc, LIMITS) or S3_HINT) from None


def report_store(out: str, settings: ReportConfig) -> LocalReports | S3Reports:
    """Where the reports are; `settings` (the config's `report`) for S3's calls."""
    return S3Reports(out, settings) if out.startswith("s3://") else LocalReports(Path(out))
