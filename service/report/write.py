"""`spendlake report`: write the daily report for one day to a folder or an S3 prefix.

The report for day D covers D itself (00:00–24:00 UTC) and the month to date up to the end
of D; the default D is yesterday. Files go to `<out>/<D>/`: report.html (self-contained),
report.json, summary.md and one CSV per table. Writing is atomic per file (staged, fsynced,
renamed into place: service/core/publish.py) and deterministic: the same lake and day give
byte-identical files.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from connectors.aws_client import held_client
from service.core.config import Config, ReportConfig
from service.core.config_paths import check_outside_lake
from service.core.coverage import last_whole_day
from service.core.errors import DataError, UsageError
from service.core.lake import Lake
from service.core.publish import split_s3_url, upload_s3, write_local
from service.core.timewindow import MAX_INSTANT, parse_day
from service.report.data import gather
from service.report.model import Report
from service.report.render import render_files

log = logging.getLogger(__name__)

LIMITS = "report.timeout_seconds / report.max_attempts"  # what to raise when the S3 endpoint is slow
ENDPOINT_ANSWERS = "check that the S3 endpoint of the reports answers"  # besides raising report.deadline_seconds
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
    day = parse_day(text, option=option, example="2026-02-28")
    if not FIRST_DAY <= day <= LAST_DAY:
        raise UsageError(f"{text.strip()!r} is out of range", where=option,
                         hint=f"a report's day runs from {FIRST_DAY} to {LAST_DAY}; use YYYY-MM-DD")
    return day


def default_out(config: Config) -> str:
    return config.report.out or str(Path(config.lake).parent / "reports")


def write_report(config: Config, day: date, out: str | None = None, *, again: str | None = None) -> ReportResult:
    """Gather, render and write the report for `day`; returns where it went. A failure names the
    folder by the flag or key that set it, and says what happens next: the service says `again` (how
    it tries the report again by itself), a command is run again."""
    target = out or default_out(config)
    named = folder_named(config, out, serving=again is not None)
    check_outside_lake(config, target, "reports", where=named)
    files = render_files(gather_consistently(config, Lake.of(config), day, again=again))
    if target.startswith("s3://"):
        location = upload_report(files, target, day, config.report)
    else:
        location = str(write_local(files, Path(target) / day.isoformat(), last="report.html", named=named,
                                   then=again))
    return ReportResult(day, location, tuple(files))


def folder_named(config: Config, out: str | None, *, serving: bool) -> str:
    """What a failure to write names the report's folder by: a command's `--out` (given or not, the way
    to another folder), the service's `report.out` (the default's when the config does not set it)."""
    if not serving or out is not None:
        return "--out"
    return "report.out" + ("" if config.report.out else " (not set: the default)")


def gather_consistently(config: Config, lake: Lake, day: date, *, again: str | None = None) -> Report:
    """`gather`, again when an ingest committed while it read: each section reads the lake on
    its own, and a report whose sections saw two states would not tie out to one bill. Giving up
    says what happens next: the service's `again` (its next try), a command is run again."""
    for _ in range(GATHER_ATTEMPTS):
        stamp = lake.ledger_stamp()
        report = gather(config, lake, day)
        if lake.ledger_stamp() == stamp:
            return report
        log.info("an ingest committed while the report was gathered: gathering again")
    raise DataError(f"the lake changed under the report {GATHER_ATTEMPTS} times", where=str(lake.root),
                    hint=again or "run `spendlake report` again once the ingests running now have finished")


def upload_report(files: dict[str, bytes], url: str, day: date, settings: ReportConfig) -> str:
    """Put each file under s3://bucket/prefix/<day>/; report.html goes last, so a reader that
    finds it finds the rest. All the uploads end by report.deadline_seconds, each attempt's connect
    and reads by report.timeout_seconds: an endpoint that stops answering fails the report, never holds it."""
    bucket, prefix = split_s3_url(url)
    folder = "/".join(p for p in (prefix, day.isoformat()) if p)
    client = held_client("s3", settings, config_path="report", region=None, deadline=settings.start_deadline("report"),
                         where=f"s3://{bucket}/{folder}/", smaller=ENDPOINT_ANSWERS)
    return upload_s3(files, client, bucket, folder, last="report.html", what="the report", limits=LIMITS)
