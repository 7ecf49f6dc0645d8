"""The service's daily report (the scheduler's `daily` task), and when its run is not done.

The report is of the day before the run, or of the data's last whole day when the bill has not
reached that day's end yet (a report of a day without its data would show a false drop). A run
whose report lacks a billing source's bill because that source's ingest is failing (or has never
run), or that finds no bill in the lake at all, fails: counted under `daily` and tried again as a
failed report is (scheduler.py), so the report is written again
once the source ingests. Such a run was recorded as done: a first ingest stopped by a full disk left
the day's report "No spend", its budgets "ok", never written again after the ingest committed.
"""

from __future__ import annotations

import logging
from datetime import date, timedelta

from service.core.config import Config
from service.core.coverage import empty_lake, last_whole_day
from service.core.errors import DataError
from service.core.lake import Lake
from service.core.timewindow import day_start
from service.ingest.freshness import SourceFreshness, source_freshness
from service.report.write import ReportResult, write_report

log = logging.getLogger("service.serve.service")  # the service's own events, as they were logged
# the retry's schedule is the scheduler's (its log line gives each try's time): said here without its figures
SERVICE_AGAIN = "the service writes the report again by itself (its log says when)"
UNINGESTED = ("failing", "not ingested")  # a source's states (freshness.STATES) whose bill an ingest may yet bring


def write_daily_report(config: Config, day: date) -> ReportResult:
    """The report of `day` (the day before the run), or of the data's last whole day; raises a
    DataError, once it is written, when it lacks a bill a failing source has not brought, and
    writes none without any bill (as `spendlake report` refuses an empty lake)."""
    lake = Lake.of(config)
    if config.sources and not lake.snapshot().checks:  # a config of inventory alone has no bill to wait for
        what, _ = empty_lake(lake, nothing=f"no report of {day} written")
        failing = lacking_bills(config, lake, day)
        raise DataError(what + (f"; billing sources {_named(failing)}" if failing else ""),
                        hint=f"{SERVICE_AGAIN} until an ingest commits a bill")
    last = last_whole_day(lake)
    if last is not None:
        day = min(day, last)
    result = write_report(config, day, again=SERVICE_AGAIN)
    log.info("daily report for %s written to %s", day, result.location)
    if lacking := lacking_bills(config, lake, day):
        raise DataError(f"the report of {day} is written without the bill of {_named(lacking)}",
                        where=result.location, hint=f"{SERVICE_AGAIN} until the source has ingested")
    return result


def lacking_bills(config: Config, lake: Lake, day: date) -> list[SourceFreshness]:
    """The billing sources whose data does not reach `day`'s end while their last ingest failed or
    none has run: a lagging export whose ingests succeed is the report's note, not this."""
    until = day_start(day) + timedelta(days=1)
    billing = {source.name for source in config.sources}
    return [row for row in source_freshness(config, lake, until) if row.source in billing
            and row.state in UNINGESTED and (row.data_through is None or row.data_through < until)]


def _named(rows: list[SourceFreshness]) -> str:
    """`ml-org (its ingest is failing), gcp (not ingested yet)`."""
    said = {"failing": "its ingest is failing", "not ingested": "not ingested yet"}
    return ", ".join(f"{row.source} ({said[row.state]})" for row in rows)
