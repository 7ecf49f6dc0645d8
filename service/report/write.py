"""`spendlake report`: write the daily report for one day to a folder or an S3 prefix.

The report for day D covers D itself (00:00–24:00 UTC) and the month to date up to the end
of D; the default D is yesterday. Files go to `<out>/<D>/`: report.html (self-contained),
report.json, summary.md and one CSV per table. Writing is atomic per file (staged, fsynced,
renamed into place) and deterministic: the same lake and day give byte-identical files.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from service.core.config import Config
from service.core.errors import SpendlakeError, UsageError
from service.core.lake import Lake
from service.report.data import gather
from service.report.render import render_files

CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".json": "application/json",
                 ".md": "text/markdown; charset=utf-8", ".csv": "text/csv; charset=utf-8"}


@dataclass(frozen=True)
class ReportResult:
    day: date
    location: str  # the folder or s3:// prefix holding the files
    files: tuple[str, ...]

    @property
    def html(self) -> str:
        return f"{self.location.rstrip('/')}/report.html"


def report_day(text: str | None, *, now: datetime | None = None) -> date:
    if not text:
        return ((now or datetime.now(timezone.utc)) - timedelta(days=1)).date()
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"cannot read {text!r} as a date", where="--date", hint="use YYYY-MM-DD") from None


def default_out(config: Config) -> str:
    return config.report.out or str(Path(config.lake).parent / "reports")


def write_report(config: Config, day: date, out: str | None = None) -> ReportResult:
    """Gather, render and write the report for `day`; returns where it went."""
    files = render_files(gather(config, Lake.of(config), day))
    target = out or default_out(config)
    if target.startswith("s3://"):
        location = upload_s3(files, target, day)
    else:
        location = str(write_local(files, Path(target) / day.isoformat()))
    return ReportResult(day, location, tuple(files))


STAGING_PREFIX = ".staging-"


def write_local(files: dict[str, bytes], folder: Path) -> Path:
    """Stage every file beside `folder`, fsync, then rename each into place; drop stale CSVs.
    Staging folders left by a writer that was killed are removed first."""
    folder = folder.resolve()
    remove_abandoned_staging(folder.parent)
    staging = folder.parent / f"{STAGING_PREFIX}{folder.name}-{os.getpid()}-{uuid.uuid4().hex}"
    try:
        staging.mkdir(parents=True)
        for name, data in files.items():
            with open(staging / name, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        folder.mkdir(exist_ok=True)
        for name in files:
            os.replace(staging / name, folder / name)
        for stale in folder.glob("*.csv"):
            if stale.name not in files:
                stale.unlink()
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise SpendlakeError(f"cannot write the report: {exc.strerror or exc}", where=str(folder),
                             hint="check the --out folder's permissions and free space") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def remove_abandoned_staging(parent: Path) -> None:
    """`.staging-<day>-<pid>-<uuid>` folders whose writer is gone (a `kill -9`); a live
    writer's folder, another report being written at this moment, is left alone."""
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


def upload_s3(files: dict[str, bytes], url: str, day: date) -> str:
    """Put each file under s3://bucket/prefix/<day>/ (each PUT replaces one object atomically);
    report.html goes last, so a reader that finds it finds the rest."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    if not bucket:
        raise UsageError(f"no bucket in {url!r}", where="--out", hint="use s3://bucket/prefix")
    prefix = "/".join(p for p in (prefix.strip("/"), day.isoformat()) if p)
    client = boto3.client("s3")
    try:
        for name in sorted(files, key=lambda n: n == "report.html"):
            client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=files[name],
                              ContentType=CONTENT_TYPES[Path(name).suffix])
    except (BotoCoreError, ClientError) as exc:
        raise SpendlakeError(f"cannot upload the report: {exc}", where=f"s3://{bucket}/{prefix}/",
                             hint="check the bucket name and that the credentials allow s3:PutObject") from None
    return f"s3://{bucket}/{prefix}/"
