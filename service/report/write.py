"""`spendlake report`: write the daily report for one day to a folder or an S3 prefix.

The report for day D covers D itself (00:00–24:00 UTC) and the month to date up to the end
of D; the default D is yesterday. Files go to `<out>/<D>/`: report.html (self-contained),
report.json, summary.md and one CSV per table. Writing is atomic per file (staged, fsynced,
renamed into place: service/core/publish.py) and deterministic: the same lake and day give
byte-identical files.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from service.core.config import Config
from service.core.config_paths import check_outside_lake
from service.core.coverage import last_whole_day
from service.core.errors import DataError, UsageError
from service.core.lake import Lake
from service.core.publish import split_s3_url, upload_s3, write_local
from service.core.timewindow import DATE_SHAPED_RE, MAX_INSTANT, iso_day, not_a_date
from service.report.data import gather
from service.report.model import Report
from service.report.render import render_files

log = logging.getLogger(__name__)

TIMED_DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d")  # a day as documented, then a time
GATHER_ATTEMPTS = 3  # gathers of one report while ingests keep committing, before giving up
# A day's report reaches back to the same days of the month before and ends at the day's end:
# both must be times Python can hold (0001-01-31 or 9999-12-31 overflowed into a traceback).
FIRST_DAY, LAST_DAY = date(1, 2, 1), MAX_INSTANT.date()


@dataclass(frozen=True)
class ReportResult:
    day: date
    location: str  # the folder or s3:// prefix holding the files
    files: tuple[str, ...]

    @property
    def html(self) -> str:
        return f"{self.location.rstrip('/')}/report.html"


def report_day(text: str | None, *, now: datetime | None = None, lake: Lake | None = None,
               option: str = "--date") -> date:
    """The day `--date` names; by default the last whole day of data in `lake`
    (service.core.coverage.last_whole_day), else yesterday."""
    if not text:
        last = last_whole_day(lake) if lake is not None else None
        return last or ((now or datetime.now(timezone.utc)) - timedelta(days=1)).date()
    try:
        day = iso_day(text)
    except ValueError as exc:
        if (day := _day_of_time(text)) is not None:  # a scheduler's timestamp: it names a day, give that one
            raise UsageError(f"{text.strip()!r} is a time, not a day", where=option, hint=f"use YYYY-MM-DD: {day}") \
                from None
        if DATE_SHAPED_RE.match(text):  # 2026-02-30 is written as asked: say why it is no day
            raise not_a_date(text, exc, "date", where=option, hint="use YYYY-MM-DD, e.g. 2026-02-28") from None
        raise UsageError(f"cannot read {text!r} as a date", where=option, hint="use YYYY-MM-DD") from None
    if not FIRST_DAY <= day <= LAST_DAY:
        raise UsageError(f"{text.strip()!r} is out of range", where=option,
                         hint=f"a report's day runs from {FIRST_DAY} to {LAST_DAY}; use YYYY-MM-DD")
    return day


def _day_of_time(text: str) -> str | None:
    """The UTC day a date and time names (`2026-12-05T00:00`), said as the hint gives it; else None
    (also for 20261120 or 2026-W47-5, which fromisoformat reads as midnight: no time, another form)."""
    if not TIMED_DAY_RE.match(text.strip()):
        return None
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None or moment.utcoffset() == timedelta(0):
        return str(moment.date())
    return f"{moment.astimezone(timezone.utc).date()} (the UTC day)"


def default_out(config: Config) -> str:
    return config.report.out or str(Path(config.lake).parent / "reports")


def write_report(config: Config, day: date, out: str | None = None) -> ReportResult:
    """Gather, render and write the report for `day`; returns where it went."""
    target = out or default_out(config)
    check_outside_lake(config, target, "reports", where="--out")
    files = render_files(gather_consistently(config, Lake.of(config), day))
    if target.startswith("s3://"):
        location = upload_report(files, target, day)
    else:
        location = str(write_local(files, Path(target) / day.isoformat(), last="report.html"))
    return ReportResult(day, location, tuple(files))


def gather_consistently(config: Config, lake: Lake, day: date) -> Report:
    """`gather`, again when an ingest committed while it read: each section reads the lake on
    its own, and a report whose sections saw two states would not tie out to one bill."""
    for _ in range(GATHER_ATTEMPTS):
        stamp = lake.ledger_stamp()
        report = gather(config, lake, day)
        if lake.ledger_stamp() == stamp:
            return report
        log.info("an ingest committed while the report was gathered: gathering again")
    raise DataError(f"the lake changed under the report {GATHER_ATTEMPTS} times", where=str(lake.root),
                    hint="run `spendlake report` again once the ingests running now have finished")


def upload_report(files: dict[str, bytes], url: str, day: date) -> str:
    """Put each file under s3://bucket/prefix/<day>/; report.html goes last, so a reader that
    finds it finds the rest."""
    bucket, prefix = split_s3_url(url)
    return upload_s3(files, bucket, "/".join(p for p in (prefix, day.isoformat()) if p), last="report.html",
                     what="the report")
