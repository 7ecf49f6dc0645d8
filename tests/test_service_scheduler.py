"""The scheduler (RELIABILITY 22-24): make-up runs once, idempotent daily output, no overlap,
UTC whatever the host's time zone, failures counted."""

from __future__ import annotations

import errno
import json
import logging
import threading
import time
from datetime import date, datetime, timedelta, timezone
from datetime import time as daytime
from pathlib import Path

import apscheduler.schedulers.base as apscheduler_base
import pytest
from apscheduler.events import EVENT_JOB_MISSED, JobEvent
from prometheus_client import CollectorRegistry
from servicekit import commit, make_config

import service.serve.scheduler as scheduler_module
from service.core.errors import SourceError
from service.core.lake import Lake
from service.serve.metrics import JobMetrics
from service.serve.scheduler import RETRY_JOB, ServiceScheduler, Tasks, latest_fire_date, record_daily_run
from service.serve.service import default_tasks
from service.serve.undone_reports import note_undone

SIX = daytime(6, 0)


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def wait_for(predicate, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class Harness:
    def __init__(self, lake: Lake, clock, ingest=lambda: None, rules=None, every=timedelta(hours=1), **options):
        self.reports: list[date] = []
        self.registry = CollectorRegistry()
        self.metrics = JobMetrics(self.registry, ["ingest", "rules", "daily"])
        tasks = Tasks(ingest=ingest, rules=rules, daily=self.reports.append)
        self.scheduler = ServiceScheduler(lake, self.metrics, tasks, ingest_every=every, daily_at=SIX, clock=clock,
                                          **options)

    def value(self, name: str, job: str) -> float | None:
        return self.registry.get_sample_value(name, {"job": job, "task": job})


def test_latest_fire_date():
    assert latest_fire_date(utc(2026, 11, 30, 5, 59), SIX) == date(2026, 11, 29)
    assert latest_fire_date(utc(2026, 11, 30, 6, 0), SIX) == date(2026, 11, 30)


def test_22_down_across_the_report_time_makes_up_exactly_once(tmp_path):
    lake = Lake(tmp_path / "lake")
    lake.write_state("jobs", {"daily": {"last_run_date": "2026-11-28"}})
    now = [utc(2026, 11, 30, 5, 0)]  # down from before 06:00 on the 29th until 05:00 on the 30th

    first = Harness(lake, lambda: now[0])
    first.scheduler.start()
    wait_for(lambda: first.value("spendlake_job_duration_seconds_count", "daily") == 1)
    first.scheduler.shutdown()
    assert first.reports == [date(2026, 11, 28)]  # the 29th's run reports on the 28th
    assert lake.read_state("jobs")["daily"]["last_run_date"] == "2026-11-29"

    second = Harness(lake, lambda: now[0])  # restarted again before 06:00: nothing to make up
    second.scheduler.start()
    real_now = datetime.now(timezone.utc)
    next_six = datetime.combine(latest_fire_date(real_now, SIX) + timedelta(days=1), SIX, tzinfo=timezone.utc)
    assert second.scheduler.scheduler.get_job("daily").next_run_time == next_six  # not "now"
    second.scheduler.shutdown()
    assert second.reports == []

    now[0] = utc(2026, 11, 30, 6, 0, 1)  # the regular fire, then a duplicate (coalesced or manual) one
    third = Harness(lake, lambda: now[0])  # one not stopped: a stopped one leaves a run to the next start
    third.scheduler.run_daily()
    third.scheduler.run_daily()
    assert third.reports == [date(2026, 11, 29)]


def test_daily_fires_at_the_same_utc_time_across_a_dst_change(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        harness = Harness(Lake(tmp_path / "lake"), lambda: utc(2026, 10, 24, 7))
        harness.scheduler.start()
        trigger = harness.scheduler.scheduler.get_job("daily").trigger
        harness.scheduler.shutdown()
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    fires, previous = [], utc(2026, 10, 24, 7)
    for _ in range(3):  # Berlin leaves summer time on 25 October
        previous = trigger.get_next_fire_time(None, previous + timedelta(seconds=1))
        fires.append(previous.astimezone(timezone.utc))
    assert fires == [utc(2026, 10, 25, 6), utc(2026, 10, 26, 6), utc(2026, 10, 27, 6)]


@pytest.mark.slow
def test_23_the_daily_job_writes_the_report_and_the_same_date_twice_gives_identical_files(tmp_path):
    config = make_config(tmp_path)
    lake = Lake(config.lake)
    commit(lake, "cur", [("2026-11-28 03:00:00", "2026-11-28 04:00:00", "USD", "2.5", {}),
                         ("2026-11-02 03:00:00", "2026-11-02 04:00:00", "USD", "1", {}),
                         ("2026-11-29 03:00:00", "2026-11-29 04:00:00", "EUR", "7", {})])
    daily = default_tasks(config).daily
    first = daily(date(2026, 11, 28))
    folder = Path(first.location)
    content = {name: (folder / name).read_bytes() for name in first.files}
    time.sleep(0.01)
    second = daily(date(2026, 11, 28))
    assert second == first and {name: (folder / name).read_bytes() for name in second.files} == content
    assert folder == config.lake.parent / "reports" / "2026-11-28"
    (spend,) = [s for s in json.loads(content["report.json"])["sections"] if s["key"] == "spend"]
    (table,) = [t for t in spend["tables"] if t["key"] == "totals"]
    totals = {row["window"]: row for row in table["rows"]}
    assert (totals["day"]["currency"], totals["day"]["cost"]) == ("USD", "2.500000000000")
    assert totals["mtd"]["cost"] == "3.500000000000"
    assert "EUR" not in json.dumps(spend)  # the 29th is after the reported day
    (bills,) = [s for s in json.loads(content["report.json"])["sections"] if s["key"] == "bills"]
    assert "EUR" in json.dumps(bills)  # the November bill, as the ledger holds it, has the 29th's charge
    assert sorted(p.name for p in folder.parent.iterdir()) == ["2026-11-28"]  # nothing staged left


def test_24_a_slow_job_never_overlaps_and_skipped_fires_are_counted(tmp_path, caplog):
    running, overlaps, runs = [0], [], []
    guard = threading.Lock()

    def slow_ingest():
        with guard:
            running[0] += 1
            overlaps.append(running[0])
        time.sleep(0.6)
        with guard:
            running[0] -= 1
        runs.append(1)

    lake = Lake(tmp_path / "lake")
    done = latest_fire_date(datetime.now(timezone.utc), SIX).isoformat()
    lake.write_state("jobs", {"daily": {"last_run_date": done}})  # keep the daily job out of it
    harness = Harness(lake, lambda: datetime.now(timezone.utc), ingest=slow_ingest, every=timedelta(seconds=0.2))
    with caplog.at_level(logging.WARNING, logger="service.serve.scheduler"):
        harness.scheduler.start()
        wait_for(lambda: len(runs) >= 2)
        harness.scheduler.shutdown()
    assert max(overlaps) == 1
    assert harness.value("spendlake_job_skipped_total", "ingest") >= 1
    assert "skipped a fire of job ingest: the previous run is still going" in caplog.text


def test_24_the_jobs_take_turns_so_a_report_never_runs_beside_an_ingest(tmp_path):
    """Each may hold a month's rollup in memory: side by side the service's peak doubled."""
    spans: dict[str, tuple[float, float]] = {}

    def job(name):
        def run(*_):
            started = time.monotonic()
            time.sleep(0.3)
            spans[name] = (started, time.monotonic())
        return run

    lake = Lake(tmp_path / "lake")  # no daily run done yet: the make-up run starts with the first ingest
    registry = CollectorRegistry()
    tasks = Tasks(ingest=job("ingest"), rules=job("rules"), daily=job("daily"), verify=job("verify"))
    scheduler = ServiceScheduler(lake, JobMetrics(registry, tasks.names()), tasks, ingest_every=timedelta(hours=1),
                                 daily_at=SIX, clock=lambda: datetime.now(timezone.utc))
    scheduler.start()
    wait_for(lambda: len(spans) == 4)
    scheduler.shutdown()
    ordered = sorted(spans.values())
    assert all(end <= next_start for (_, end), (next_start, _) in zip(ordered, ordered[1:])), spans
    assert spans["ingest"] < spans["rules"] < spans["verify"] < spans["daily"]  # the make-up run after the first ingest
    assert lake.read_state("jobs")["daily"]["last_run_date"]


def test_a_failing_job_is_counted_and_rules_still_run(tmp_path):
    ran_rules = []

    def broken_ingest():
        raise RuntimeError("bucket unreachable")

    harness = Harness(Lake(tmp_path / "lake"), lambda: utc(2026, 11, 30, 5), ingest=broken_ingest,
                      rules=lambda: ran_rules.append(1))
    harness.scheduler.run_ingest()
    assert harness.value("spendlake_job_failures_total", "ingest") == 1
    assert harness.value("spendlake_job_last_success_timestamp_seconds", "ingest") is None
    assert ran_rules == [1] and harness.value("spendlake_job_last_success_timestamp_seconds", "rules") > 0
    assert harness.value("spendlake_job_duration_seconds_count", "ingest") == 1



def test_an_ingest_that_finds_the_lake_held_by_a_cli_ingest_is_skipped_not_failed(tmp_path, caplog):
    """`spendlake ingest` run by hand (the RUNBOOK says to) while the service's ingest fires:
    the service's run was a failure, counted on the "Job failures" panel, with a traceback."""
    config = make_config(tmp_path)
    lake = Lake.of(config)
    ran_rules = []
    tasks = default_tasks(config)
    harness = Harness(lake, lambda: utc(2026, 11, 30, 5), ingest=tasks.ingest, rules=lambda: ran_rules.append(1))
    with lake.lock("ingest"), caplog.at_level(logging.WARNING, logger="service.serve.scheduler"):
        harness.scheduler.run_ingest()
    assert harness.value("spendlake_job_failures_total", "ingest") == 0
    assert harness.value("spendlake_job_skipped_total", "ingest") == 1
    assert harness.value("spendlake_job_last_success_timestamp_seconds", "ingest") is None
    assert ran_rules == [1]
    [record] = caplog.records
    assert record.getMessage().startswith("job ingest skipped: ") and "another spendlake ingest holds the lake" in \
        record.getMessage() and record.exc_info is None


def test_a_job_failing_on_a_named_error_logs_one_line_an_unexpected_one_its_traceback(tmp_path, caplog):
    """Expired credentials fail every hourly ingest: each was a traceback of dozens of lines
    around the one that says what to do."""
    def denied():
        raise SourceError("access denied (AccessDenied)", where="s3://bills/cur/", hint="check the role's policy")

    harness = Harness(Lake(tmp_path / "lake"), lambda: utc(2026, 11, 30, 5), ingest=denied, rules=lambda: 1 / 0)
    with caplog.at_level(logging.INFO, logger="service.serve.scheduler"):
        harness.scheduler.run_ingest()
    ingest, rules = caplog.records
    assert ingest.getMessage() == "job ingest failed: s3://bills/cur/: access denied (AccessDenied) — check the role's policy"
    assert not ingest.exc_info and rules.exc_info[0] is ZeroDivisionError
    assert harness.value("spendlake_job_failures_total", "ingest") == harness.value("spendlake_job_failures_total", "rules") == 1

def test_11_53_a_job_on_a_full_disk_logs_one_line_naming_the_file_and_is_counted(tmp_path, caplog):
    """A state file the disk had no room for (`_state/sources.json` after an inventory) was a
    traceback of 40 lines in the service's log; the CLI said it in one sentence."""
    full = str(tmp_path / "lake" / "_state" / "sources.json")

    def state_write():
        raise OSError(errno.ENOSPC, "No space left on device", full)

    harness = Harness(Lake(tmp_path / "lake"), lambda: utc(2026, 11, 30, 5), ingest=state_write)
    with caplog.at_level(logging.INFO, logger="service.serve.scheduler"):
        harness.scheduler.run_ingest()
    [record] = caplog.records
    assert record.getMessage().startswith(f"job ingest failed: {full}: disk full: [Errno 28] No space left on device")
    assert "free disk space on the lake's file system" in record.getMessage() and not record.exc_info
    assert harness.value("spendlake_job_failures_total", "ingest") == 1


def test_a_failed_daily_run_is_not_marked_done(tmp_path):
    lake = Lake(tmp_path / "lake")
    harness = Harness(lake, lambda: utc(2026, 11, 30, 7))
    harness.scheduler.tasks = Tasks(ingest=lambda: None, rules=None, daily=lambda day: 1 / 0)
    harness.scheduler.run_daily()
    assert harness.value("spendlake_job_failures_total", "daily") == 1
    assert lake.read_state("jobs") == {"daily_undone": ["2026-11-30"]}  # kept to be written again, not done
    assert harness.scheduler.daily_due(utc(2026, 11, 30, 7))


def test_22_a_daily_run_the_disk_had_no_room_to_record_is_counted_and_tried_again(tmp_path, monkeypatch, caplog):
    """The report was written, `_state/jobs.json` was not: the OSError escaped the job (an
    APScheduler traceback, no failure counted, no retry until a restart made the run up)."""
    lake = Lake(tmp_path / "lake")
    write_state, refused = lake.write_state, []

    def full_disk(name, data):
        if name == "jobs" and "daily" in data and not refused:  # the daily run's record, not a job's success
            refused.append(name)
            raise OSError(errno.ENOSPC, "No space left on device", str(lake.state_file(name)))
        write_state(name, data)

    monkeypatch.setattr(lake, "write_state", full_disk)
    harness = Harness(lake, lambda: utc(2026, 11, 30, 7))
    harness.scheduler.daily_retry = harness.scheduler._retry_delay = timedelta(seconds=0.2)
    with caplog.at_level(logging.WARNING, logger="service.serve.scheduler"):
        harness.scheduler.start()  # nothing done yet: the make-up run at once
        wait_for(lambda: lake.read_state("jobs").get("daily"))
        harness.scheduler.shutdown()
    assert harness.reports == [date(2026, 11, 29)] * 2  # written again alike (RELIABILITY 23)
    assert harness.value("spendlake_job_failures_total", "daily") == 1
    assert lake.read_state("jobs")["daily"]["last_run_date"] == "2026-11-30"
    assert any("jobs.json: disk full" in r.getMessage() for r in caplog.records)


def test_a_failed_daily_report_is_tried_again_with_a_backoff_not_the_next_day(tmp_path, caplog):
    """The report only (the lake was verified), after daily_retry then twice that, until it is written."""
    lake = Lake(tmp_path / "lake")
    attempts, verified = [], []

    def report(day):
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise OSError("No space left on device")

    registry = CollectorRegistry()
    metrics = JobMetrics(registry, ["ingest", "verify", "daily"])
    scheduler = ServiceScheduler(lake, metrics, Tasks(ingest=lambda: None, rules=None, daily=report,
                                                      verify=lambda: verified.append(1)),
                                 ingest_every=timedelta(hours=1), daily_at=SIX, clock=lambda: utc(2026, 11, 30, 7),
                                 daily_retry=timedelta(seconds=0.3))
    with caplog.at_level(logging.WARNING, logger="service.serve.scheduler"):
        scheduler.start()  # nothing done yet: the make-up run at once
        wait_for(lambda: lake.read_state("jobs").get("daily"))
        scheduler.shutdown()
    assert len(attempts) == 3 and verified == [1]
    assert 0.3 <= attempts[1] - attempts[0] and 0.6 <= attempts[2] - attempts[1]
    assert registry.get_sample_value("spendlake_job_failures_total", {"job": "daily", "task": "daily"}) == 2
    assert lake.read_state("jobs")["daily"]["last_run_date"] == "2026-11-30"
    assert sum("trying the report again at" in r.getMessage() for r in caplog.records) == 2


def test_a_retry_once_the_next_fires_date_has_come_leaves_the_report_to_that_fires_run(tmp_path):
    """A retry skips verify for the date whose lake was verified; one that runs once the next fire's date has come
    was that date's run, so a report lacking a bill for good (a source's bucket closed) was tried hourly day after
    day: it does nothing now, and the fire's run verifies the lake for its date and writes its report."""
    lake = Lake(tmp_path / "lake")
    now, reported, verified = [utc(2026, 11, 30, 7)], [], []

    def report(day):
        reported.append(day)
        raise OSError("No space left on device")

    registry = CollectorRegistry()
    scheduler = ServiceScheduler(lake, JobMetrics(registry, ["ingest", "verify", "daily"]),
                                 Tasks(ingest=lambda: None, rules=None, daily=report,
                                       verify=lambda: verified.append(now[0].date())),
                                 ingest_every=timedelta(hours=1), daily_at=SIX, clock=lambda: now[0])
    scheduler.first_ingest.set()  # not started: each fire and retry is run here
    scheduler.run_daily()
    now[0] = utc(2026, 12, 1, 7)  # the retry runs after the next day's fire time
    scheduler.run_daily(retry_of=date(2026, 11, 30))
    assert reported == [date(2026, 11, 29)] and verified == [date(2026, 11, 30)]
    scheduler.run_daily()  # the fire of the 1st
    assert reported == [date(2026, 11, 29), date(2026, 11, 30)]
    assert verified == [date(2026, 11, 30), date(2026, 12, 1)]
    assert registry.get_sample_value("spendlake_job_failures_total", {"job": "daily", "task": "daily"}) == 2


def test_the_next_fires_failed_run_is_tried_again_after_the_first_delay_not_the_last_days(tmp_path):
    """review54 item 8: the back-off was reset on success only; after a day of failures it sat at
    DAILY_RETRY_MAX, so the next day's failed run was first tried again after an hour, not 5 minutes."""
    now = [utc(2026, 11, 30, 7)]

    def report(day):
        raise OSError("No space left on device")

    scheduler = ServiceScheduler(Lake(tmp_path / "lake"), JobMetrics(CollectorRegistry(), ["ingest", "verify", "daily"]),
                                 Tasks(ingest=lambda: None, rules=None, daily=report, verify=lambda: None),
                                 ingest_every=timedelta(hours=1), daily_at=SIX, clock=lambda: now[0],
                                 daily_retry=timedelta(minutes=5))
    scheduler.first_ingest.set()
    scheduler.scheduler.start(paused=True)  # running, so each retry is planned; none fires
    try:
        scheduler.run_daily()
        for _ in range(5):
            scheduler.run_daily(retry_of=date(2026, 11, 30))
        now[0] = utc(2026, 12, 1, 7)
        scheduler.run_daily(retry_of=date(2026, 11, 30))  # gives way to the fire of the 1st
        before = datetime.now(timezone.utc)
        scheduler.run_daily()  # the fire of the 1st, failing
        planned = scheduler.scheduler.get_job(RETRY_JOB).next_run_time - before
    finally:
        scheduler.scheduler.shutdown(wait=False)
    assert timedelta(minutes=5) <= planned < timedelta(minutes=6)


@pytest.mark.parametrize("done, due", [(None, True), ("2026-11-29", True), ("2026-11-30", False),
                                       ("2027-01-04", True)])  # recorded while the clock ran a month ahead
def test_22_daily_due_and_a_clock_set_back_is_not_a_month_without_reports(tmp_path, done, due):
    lake = Lake(tmp_path / "lake")
    if done:
        lake.write_state("jobs", {"daily": {"last_run_date": done}})
    harness = Harness(lake, lambda: utc(2026, 11, 30, 7))
    assert harness.scheduler.daily_due(utc(2026, 11, 30, 7)) is due


@pytest.mark.parametrize("now, due", [(utc(2026, 12, 7, 2, 30), False),  # serve started after the demo
                                      (utc(2026, 12, 7, 6), False),  # the fire whose report the demo wrote
                                      (utc(2026, 12, 8, 6), True)])
def test_a_demo_run_before_the_report_time_is_the_next_fires_run_not_a_clock_that_ran_ahead(tmp_path, now, due):
    """break51b item 3: `spendlake demo` at 02:26 UTC wrote the report of the 6th and recorded it as
    the run of the 7th (the next 06:00 fire, as the README says); a serve started after it read the
    later date as a clock that ran ahead, wrote the 5th's report and set the record back to the 6th,
    and at 06:00 wrote the 6th's again. A record later than the latest fire, finished by now, was
    made ahead of its fire, not by a clock ahead: nothing is due until the fire after it."""
    lake = Lake(tmp_path / "lake")
    record_daily_run(lake, date(2026, 12, 7), utc(2026, 12, 7, 2, 26))  # as the demo records it, at 02:26
    assert Harness(lake, lambda: now).scheduler.daily_due(now) is due


@pytest.mark.parametrize("now", [utc(2026, 12, 7, 2, 30), utc(2026, 12, 7, 7), utc(2027, 1, 6, 7),
                                 utc(2027, 2, 25, 7)])
def test_a_demo_of_a_future_window_leaves_serves_daily_reports_due(tmp_path, now):
    """review51 item 3: `spendlake demo --days 2 --start 2027-03-01` run on 2026-12-07 records the run
    of 2027-03-03, finished by now; read as a run ahead of its fire, no daily report was written for
    about three months. Only the next fire's date is a run ahead of its fire."""
    lake = Lake(tmp_path / "lake")
    record_daily_run(lake, date(2027, 3, 3), utc(2026, 12, 7, 2, 26))
    assert Harness(lake, lambda: now).scheduler.daily_due(now)


def test_a_run_recorded_by_a_clock_ahead_is_told_by_its_stamp_after_now_and_due_again(tmp_path):
    """The clock that ran ahead a day stamped its run of the 8th at 07:00 on the 8th; set right on
    the 7th at 07:00, the 7th's fire is due (as an unstamped record of a later date, test_22)."""
    lake = Lake(tmp_path / "lake")
    now = [utc(2026, 12, 8, 7)]
    harness = Harness(lake, lambda: now[0])
    harness.scheduler.start()
    wait_for(lambda: harness.reports)
    harness.scheduler.shutdown()
    assert harness.reports == [date(2026, 12, 7)]
    assert lake.read_state("jobs")["daily"] == {"last_run_date": "2026-12-08", "finished_at": "2026-12-08T07:00:00Z"}
    now[0] = utc(2026, 12, 7, 7)
    assert harness.scheduler.daily_due(now[0])


def test_a_retry_and_the_next_fire_waiting_together_write_the_date_once(tmp_path):
    """A retry of the date's run holding the turn, and a fire of that date waiting for it (the start's make-up
    run, a coalesced fire): the fire asks again once it has the turn and finds the date done (it verified and
    wrote the same report again). A retry of an earlier date does nothing (the test above)."""
    lake = Lake(tmp_path / "lake")
    reported, verified, release = [], [], threading.Event()

    def report(day):
        reported.append(day)
        release.wait(10)

    scheduler = ServiceScheduler(lake, JobMetrics(CollectorRegistry(), ["ingest", "verify", "daily"]),
                                 Tasks(ingest=lambda: None, rules=None, daily=report, verify=lambda: verified.append(1)),
                                 ingest_every=timedelta(hours=1), daily_at=SIX, clock=lambda: utc(2026, 12, 1, 7))
    asked, daily_due = [], scheduler.daily_due
    scheduler.daily_due = lambda now: asked.append(now) or daily_due(now)
    retry = threading.Thread(target=scheduler.run_daily, kwargs={"retry_of": date(2026, 12, 1)})
    retry.start()
    wait_for(lambda: reported)  # the retry is writing the report of the 30th, holding the turn
    fire = threading.Thread(target=scheduler.run_daily)
    before = len(asked)
    fire.start()
    wait_for(lambda: len(asked) > before)  # the fire found the date not done yet: it waits for the turn
    release.set()
    retry.join(10)
    fire.join(10)
    assert reported == [date(2026, 11, 30)] and verified == []  # the retry's date was verified before it failed
    assert lake.read_state("jobs")["daily"]["last_run_date"] == "2026-12-01"


def test_a_skipped_retry_of_the_report_counts_under_the_daily_job(tmp_path):
    """Its runs count under `daily` (failures, a busy lake); so do its missed fires, not under a
    `daily-retry` series no alert or RUNBOOK line names."""
    harness = Harness(Lake(tmp_path / "lake"), lambda: utc(2026, 11, 30, 7))
    harness.scheduler._skipped(JobEvent(EVENT_JOB_MISSED, RETRY_JOB, None))
    assert harness.value("spendlake_job_skipped_total", "daily") == 1
    assert harness.value("spendlake_job_skipped_total", RETRY_JOB) is None


def test_a_wall_clock_set_back_does_not_hold_the_jobs_until_it_catches_up(tmp_path, monkeypatch):
    """NTP setting right a clock that ran 40 days ahead: APScheduler plans each next run from the
    previous one on the wall clock, so the next ingest (and report) waited 40 days."""
    ahead = [timedelta(days=40)]

    class Wall(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.now(tz) + ahead[0]

    monkeypatch.setattr(apscheduler_base, "datetime", Wall)
    monkeypatch.setattr(scheduler_module, "datetime", Wall)
    ingests = []
    harness = Harness(Lake(tmp_path / "lake"), lambda: Wall.now(timezone.utc), ingest=lambda: ingests.append(1),
                      every=timedelta(seconds=1), clock_check=timedelta(seconds=0.1))
    harness.scheduler.start()
    try:
        wait_for(lambda: len(ingests) >= 2)
        ahead[0] = timedelta(0)
        done = len(ingests)
        wait_for(lambda: len(ingests) >= done + 2, timeout=5)
        assert harness.scheduler.scheduler.get_job("daily").next_run_time < Wall.now(timezone.utc) + timedelta(days=1)
    finally:
        harness.scheduler.shutdown()


@pytest.mark.parametrize("recorded, why", [
    (None, "no daily run is recorded in the lake yet"),
    ("2026-11-29", "the last one done was due 2026-11-29 06:00 UTC (the report of 2026-11-28)"),
    ("2026-11-26", "the last one done was due 2026-11-26 06:00 UTC (the report of 2026-11-25); the 3 run(s) between, "
                   "missed too, are not made up (`spendlake report --date DAY` writes one)"),
    ("2026-12-05", "the one recorded last is of a later date, 2026-12-05, by a clock that ran ahead")])
def test_the_make_up_run_names_the_report_day_it_makes_up_and_why(tmp_path, caplog, recorded, why):
    """The line said 'the daily run of 2026-11-30 (the report of 2026-11-29) has not happened': the run's date read
    as a day reported on, and nothing of why, nor of the days missed before that are not made up."""
    lake = Lake(tmp_path / "lake")
    if recorded:
        lake.write_state("jobs", {"daily": {"last_run_date": recorded}})
    harness = Harness(lake, lambda: utc(2026, 11, 30, 7))
    with caplog.at_level(logging.WARNING, logger="service.serve.scheduler"):
        harness.scheduler.start()
        wait_for(lambda: harness.reports)
        harness.scheduler.shutdown()
    assert harness.reports == [date(2026, 11, 29)]
    assert (f"the daily run due 2026-11-30 06:00 UTC (the report of 2026-11-29) was not done: {why}; running it now"
            in [r.getMessage() for r in caplog.records]), [r.getMessage() for r in caplog.records]


def test_a_restart_reads_each_jobs_last_success_back_from_the_lake(tmp_path):
    """spendlake_job_last_success_timestamp_seconds was unset after a restart or SIGHUP until each
    job ran again: a staleness alert on it fired on every restart (the daily job's, for a day)."""
    lake = Lake(tmp_path / "lake")
    lake.write_state("jobs", {"daily": {"last_run_date": "2026-11-30"}})  # nothing to make up
    first = Harness(lake, lambda: utc(2026, 11, 30, 7))
    first.scheduler.start()
    wait_for(lambda: first.value("spendlake_job_last_success_timestamp_seconds", "ingest"))
    first.scheduler.shutdown()
    succeeded = first.value("spendlake_job_last_success_timestamp_seconds", "ingest")
    assert time.time() - 60 < succeeded <= time.time()

    def failing():
        raise SourceError("access denied listing the export", where="s3://bills/")

    second = Harness(lake, lambda: utc(2026, 11, 30, 7), ingest=failing)  # restarted; its ingest fails
    assert second.value("spendlake_job_last_success_timestamp_seconds", "ingest") == int(succeeded)  # before any run
    second.scheduler.start()
    wait_for(lambda: second.value("spendlake_job_failures_total", "ingest") == 1)
    second.scheduler.shutdown()
    assert second.value("spendlake_job_last_success_timestamp_seconds", "ingest") == int(succeeded)  # kept
    assert second.value("spendlake_job_last_success_timestamp_seconds", "daily") is None  # never succeeded
    assert lake.read_state("jobs")["daily"] == {"last_run_date": "2026-11-30"}  # the other keys kept


def test_a_start_stores_the_rollups_its_config_lacks_before_the_first_ingest_reads_the_sources(tmp_path):
    """A restart (or SIGHUP) with a config whose rollups were not stored: every request and scrape rolled the
    periods up from their raw lines until the first ingest had read every source and built them at its end
    (minutes with remote sources). The service stores them first, as `spendlake rollup` does, once per start."""
    from service.attribution.tops import tops_file
    from service.serve.service import store_rollups

    config = make_config(tmp_path)
    lake = Lake.of(config)
    commit(lake, "cur", [("2026-11-20 00:00:00", "2026-11-20 01:00:00", "USD", "3", {"team": "nlp"})])
    rollups = lambda: sorted(lake.root.glob("attribution_rollup/**/*.parquet"))  # noqa: E731
    assert rollups() == [] and not tops_file(lake, config, lake.snapshot()).exists()
    at_ingest, builds = [], []

    def ingest():
        at_ingest.append((len(rollups()), tops_file(lake, config, lake.snapshot()).exists()))

    harness = Harness(lake, lambda: utc(2026, 11, 30, 7), ingest=ingest, every=timedelta(seconds=0.3))
    harness.scheduler.tasks = Tasks(ingest=ingest, rules=None, daily=harness.reports.append,
                                    rollups=lambda: builds.append(store_rollups(config)))
    lake.write_state("jobs", {"daily": {"last_run_date": "2026-11-30"}})
    harness.scheduler.start()
    wait_for(lambda: len(at_ingest) >= 2)
    harness.scheduler.shutdown()
    assert at_ingest[0] == (1, True)  # stored before the first ingest began
    assert len(builds) == 1  # once per start, not before every ingest


def test_an_outage_of_days_has_each_days_report_written_again_oldest_first_once_a_later_one_is(tmp_path, caplog):
    """A billing source failing from the 30th to the 2nd failed the runs of the 1st, 2nd and 3rd (each report lacking
    its bill); each run's retries ended at the next fire, so once the source ingested again on the 4th only the 3rd's
    report was written whole, the 30th, 1st and 2nd never again. They are kept in the lake (a restart each day here)
    and written again, oldest first, after the 4th's run writes its report; one more than a week old is not."""
    lake = Lake(tmp_path / "lake")
    failing, reported = [True], []

    def report(day):
        reported.append(day)
        if failing[0]:
            raise SourceError("the report lacks the bill of cur (its ingest is failing)")

    record_daily_run(lake, date(2026, 11, 30))
    note_undone(lake, date(2026, 11, 20))  # an outage's day too old to write again
    for run_day in (1, 2, 3, 4):
        failing[0] = run_day < 4
        registry = CollectorRegistry()
        scheduler = reporting_scheduler(lake, registry, report, utc(2026, 12, run_day, 7))
        scheduler.run_daily()
    assert reported == [date(2026, 11, 30), date(2026, 12, 1), date(2026, 12, 2),  # the outage's runs
                        date(2026, 12, 3), date(2026, 11, 30), date(2026, 12, 1), date(2026, 12, 2)]
    assert lake.read_state("jobs")["daily_undone"] == []
    # this process's (the 4th's): four reports written, none failed
    assert registry.get_sample_value("spendlake_job_failures_total", {"job": "daily", "task": "daily"}) == 0
    assert "the reports of 2026-11-19 were not written whole and are more than 7 days old" in caplog.text
    scheduler.run_daily()  # the 4th again (a restart): done, nothing written again
    assert len(reported) == 7


def reporting_scheduler(lake: Lake, registry: CollectorRegistry, report, now: datetime) -> ServiceScheduler:
    """A scheduler not started (its fires are run by the test) whose daily task is `report`, at `now`."""
    scheduler = ServiceScheduler(lake, JobMetrics(registry, ["ingest", "daily"]),
                                 Tasks(ingest=lambda: None, rules=None, daily=report),
                                 ingest_every=timedelta(hours=1), daily_at=SIX, clock=lambda: now)
    scheduler.first_ingest.set()
    return scheduler


def test_a_report_written_again_that_fails_stays_kept_for_the_next_run(tmp_path):
    """The run of the 1st was not done; the 2nd's writes its report, then the 1st's again, which fails: counted, kept."""
    lake = Lake(tmp_path / "lake")
    reported = []

    def report(day):
        reported.append(day)
        if day == date(2026, 11, 30):
            raise OSError("No space left on device")

    note_undone(lake, date(2026, 12, 1))
    registry = CollectorRegistry()
    reporting_scheduler(lake, registry, report, utc(2026, 12, 2, 7)).run_daily()
    assert reported == [date(2026, 12, 1), date(2026, 11, 30)]
    assert lake.read_state("jobs")["daily_undone"] == ["2026-12-01"]
    assert registry.get_sample_value("spendlake_job_failures_total", {"job": "daily", "task": "daily"}) == 1
