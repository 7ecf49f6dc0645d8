"""The service's jobs on APScheduler, in UTC: ingest (then rules) on an interval, and the daily job.

- One instance per job (`max_instances=1`, `coalesce`): a fire that arrives while the
  previous run is still going is skipped, logged and counted (`spendlake_job_skipped_total`);
  so is a run that finds the lake held by another writer (a `spendlake ingest` or `rollup` run
  by hand, which does the same work): it is not a failure.
- The jobs take turns (ingest then rules, or verify then the report): each may hold a
  month's rollup in DuckDB, so two at once doubled the service's peak memory (bench/README).
  A job waiting for its turn is not running: its duration starts when its turn comes. A
  scrape that must compute the metric tops takes the same turn, or shows the previous ones
  (service/attribution/tops.py: ScrapeTops).
- The daily job (verify the lake, then the report) runs for the date of its latest scheduled fire. The last date done is
  kept in the lake (`_state/jobs.json`), so after downtime a missed run is made up once at
  start, and a fire for a date already done (a restart, a coalesced fire, a retry and the
  next day's fire that waited for the same turn) does nothing.
- A daily report that fails (or finds the lake held) is tried again, the report only, after
  `daily_retry`, doubling up to DAILY_RETRY_MAX, rather than waiting for the next day's fire
  (finance waited a day for a report a full disk or a busy lake had stopped for minutes), and at
  once after an ingest that succeeds (a report lacking a failing source's bill: daily.py), until
  the next fire's date comes: that fire's run (verify, then its report) takes over. The runs that
  failed are kept, and once a later run's report is written each is written again, oldest first,
  within the last week (an outage of days has each day's report, not only the last: undone_reports.py).
- APScheduler plans each next run from the previous one on the wall clock, so a clock set back
  (NTP setting right one that ran weeks ahead) held every job until it caught up: a job planned
  further ahead than its trigger can plan is run at once, which plans it again from there.
- `shutdown()` waits for the running step only: the rules after an ingest, the report after
  verify, a daily run waiting for its turn are left to the next start, which makes them up.
"""

from __future__ import annotations

import logging
import threading
import time as clock_time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobEvent
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from service.core.errors import LakeBusyError, SourceError, SpendlakeError, os_error
from service.core.lake import Lake
from service.core.units import iso_seconds, utc_iso_seconds, utc_now_iso
from service.core.timewindow import utc_now
from service.serve.metrics import JobMetrics
from service.serve.undone_reports import MAKE_UP_DAYS, STATE, mark_done, note_undone, undone_before

log = logging.getLogger(__name__)
DETAIL = logging.getLogger("service.ingest")  # not the service's events: shown with -v


class ToldFailure(SourceError):
    """A job failing only as its last run did, each cause told then (a period held back by a copy
    rewritten beside its original, until the copy goes): counted as a failure, logged as detail."""

DAILY_RETRY_MAX = timedelta(hours=1)
RETRY_JOB = "daily-retry"  # APScheduler's id of a report's retry; its metrics count under `daily`
CLOCK_CHECK = timedelta(minutes=1)  # how often the jobs' plan is checked against the wall clock


@dataclass(frozen=True)
class Tasks:
    """What the jobs do. `daily` receives the date it reports on (the day before its run);
    `verify` (re-hash the lake) runs just before it, and its failure does not stop the report."""

    ingest: Callable[[], None]
    rules: Callable[[], None] | None
    daily: Callable[[date], None]
    verify: Callable[[], None] | None = None
    # before the first ingest after a start or SIGHUP: store the rollups and metric tops this config lacks
    rollups: Callable[[], None] | None = None

    def names(self) -> tuple[str, ...]:
        return tuple(name for name in ("ingest", "rules", "verify", "daily") if getattr(self, name) is not None)


def latest_fire_date(now: datetime, daily_at: time) -> date:
    """The date of the most recent scheduled daily fire at or before `now` (UTC)."""
    now = now.astimezone(timezone.utc)
    today_fire = datetime.combine(now.date(), daily_at, tzinfo=timezone.utc)
    return now.date() if now >= today_fire else now.date() - timedelta(days=1)


def record_daily_run(lake: Lake, run_date: date, finished: datetime | None = None) -> None:
    """Record the daily run of `run_date` (the report of the day before) as done, `finished` (by
    default now) by the clock that ran it: a service started while that date's fire is the latest,
    or an earlier one, does not run it (`ServiceScheduler.daily_due`)."""
    state = lake.read_state(STATE)
    stamp = utc_now_iso() if finished is None else utc_iso_seconds(finished)
    state["daily"] = {"last_run_date": run_date.isoformat(), "finished_at": stamp}
    lake.write_state(STATE, state)


class ServiceScheduler:
    def __init__(self, lake: Lake, metrics: JobMetrics, tasks: Tasks, *, ingest_every: timedelta,
                 daily_at: time, clock: Callable[[], datetime] = utc_now,
                 daily_retry: timedelta = timedelta(minutes=5), clock_check: timedelta = CLOCK_CHECK):
        self.lake = lake
        self.metrics = metrics
        self.tasks = tasks
        self.ingest_every = ingest_every
        self.daily_at = daily_at
        self.clock = clock
        self.daily_retry = daily_retry
        self.clock_check = clock_check
        self._stopped = threading.Event()
        self._retry_delay = daily_retry  # doubled by each failure in a row; reset by a fire and a success
        self.turn = threading.Lock()  # one job at a time (see the module); a scrape computing tops takes it too
        # the start-up's make-up daily run waits for the first ingest: its report then reads the
        # rollups that ingest builds (after a config change it rolled the month up in memory)
        self.first_ingest = threading.Event()
        self.first_ingest.set()  # cleared by start()
        self.scheduler = BackgroundScheduler(
            timezone=timezone.utc,
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": 3600},
        )
        self.scheduler.add_listener(self._skipped, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
        self._restore_last_success()

    def _restore_last_success(self) -> None:
        """The last success of each job as the lake's state recorded it: a restart or a SIGHUP
        does not read as jobs that never succeeded (a staleness alert firing on every restart).
        A state that cannot be read leaves the gauges unset, said once."""
        try:
            recorded = self.lake.read_state(STATE).get("last_success", {})
        except (SpendlakeError, OSError) as exc:
            log.warning("the jobs' last successes are not restored: %s", exc)
            return
        for job in self.tasks.names():
            if job in recorded:
                self.metrics.last_success(job).set(iso_seconds(recorded[job]))

    def start(self) -> None:
        """Ingest at once and then every interval; the daily job at its time, and at once
        if the latest scheduled run has not been done (the make-up run: `makeup_text` says it)."""
        at_once = datetime.now(timezone.utc)  # APScheduler's own clock, whatever `self.clock` says
        self._stopped = threading.Event()  # before the jobs start: a shutdown sets the one they check
        self.first_ingest.clear()
        self.scheduler.add_job(self.run_ingest, IntervalTrigger(seconds=self.ingest_every.total_seconds(),
                                                                timezone=timezone.utc),
                               id="ingest", name="ingest", next_run_time=at_once)
        daily = CronTrigger(hour=self.daily_at.hour, minute=self.daily_at.minute, timezone=timezone.utc)
        makeup = self.daily_due(self.clock())
        if makeup:
            log.warning("%s", self.makeup_text(self.clock()))
        self.scheduler.add_job(self.run_daily, daily, id="daily", name="daily",
                               **({"next_run_time": at_once} if makeup else {}))
        self.scheduler.start()
        threading.Thread(target=self._watch_clock, args=(self._stopped,), name="clock-check", daemon=True).start()

    def makeup_text(self, now: datetime) -> str:
        """The start-up's make-up run, said with the day it reports on (the day before the latest fire's
        date: the date alone read as the day reported on) and why it runs: the last run the lake
        records, the runs missed between them not made up."""
        def due(run_date: date) -> str:
            return f"due {run_date} {self.daily_at.strftime('%H:%M')} UTC (the report of {run_date - timedelta(days=1)})"

        run_date = latest_fire_date(now, self.daily_at)
        done = self.lake.read_state(STATE).get("daily", {}).get("last_run_date")
        if done is None:
            why = "no daily run is recorded in the lake yet"
        elif (last := date.fromisoformat(done)) > run_date:
            why = f"the one recorded last is of a later date, {last}, by a clock that ran ahead"
        else:
            skipped = (run_date - last).days - 1
            why = f"the last one done was {due(last)}" + (
                f"; the {skipped} run(s) between, missed too, are not made up (`spendlake report --date DAY` writes "
                "one)" if skipped > 0 else "")
        return (f"the daily run {due(run_date)} was not done: {why}; running it now"
                + (" (verify, then the report)" if self.tasks.verify is not None else ""))

    def shutdown(self) -> None:
        """Stop firing and wait for running jobs to finish."""
        self._stopped.set()
        self.first_ingest.set()  # a make-up run waiting for an ingest that will not come goes on
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)

    def _watch_clock(self, stopped: threading.Event) -> None:
        """Run at once a job planned further ahead than its trigger plans (the wall clock was set
        back): its run plans the next one from the clock as it is now (see the module)."""
        longest = {"ingest": self.ingest_every, "daily": timedelta(days=1),
                   RETRY_JOB: max(DAILY_RETRY_MAX, self.daily_retry)}
        while not stopped.wait(self.clock_check.total_seconds()):  # a monotonic wait: no clock step shortens it
            now = datetime.now(timezone.utc)  # APScheduler's clock, as in start()
            for job in self.scheduler.get_jobs():
                if job.next_run_time and job.next_run_time > now + longest.get(job.id, timedelta(days=1)):
                    log.warning("job %s was planned for %s, further ahead than it plans: the clock was set back; "
                                "running it now", job.id, job.next_run_time.strftime("%Y-%m-%d %H:%M:%S"))
                    job.modify(next_run_time=now)

    # ---- jobs ------------------------------------------------------------------------------

    def run_ingest(self) -> None:
        try:
            with self.turn:
                if not self.first_ingest.is_set():
                    self._store_rollups()
                ingested = self.instrumented("ingest", self.tasks.ingest)
                if self.tasks.rules is not None and not self._stopping("the rules"):
                    self.instrumented("rules", self.tasks.rules)
            if ingested:
                self._retry_now()
        finally:
            self.first_ingest.set()

    def _retry_now(self) -> None:
        """A report waiting for its next try is tried once an ingest succeeds: the bill it lacked (a source
        failing, daily.py) may be in now, where it waited up to an hour more."""
        job = self.scheduler.get_job(RETRY_JOB) if self.scheduler.running else None
        if job is not None:
            job.modify(next_run_time=datetime.now(timezone.utc))  # APScheduler's clock, as in start()

    def _store_rollups(self) -> None:
        """The rollups and tops of this config, stored before the first ingest reads every source (minutes
        with many or remote ones): until they are, each request and scrape rolls the periods up from their
        raw lines (10+ s at 10M lines). A failure or a busy lake is said, not counted: the ingest that
        follows builds them too."""
        if self.tasks.rollups is None or self._stopping("storing the rollups"):
            return
        try:
            self.tasks.rollups()
        except LakeBusyError as exc:
            log.info("the rollups were not stored before the first ingest: %s", exc)
        except Exception as exc:
            log.warning("the rollups were not stored before the first ingest (it builds them after reading the "
                        "sources): %s", os_error(exc) if isinstance(exc, OSError) else exc)

    def run_daily(self, retry_of: date | None = None) -> None:
        """Verify, then the report of the latest fire's date; a failed report is retried (see the
        module). A retry of that date's run (`retry_of`) skips verify: the lake was verified for
        it; a retry that runs once the next fire's date has come does nothing: that fire's run takes over."""
        if self._due_date() is None:
            return
        self.first_ingest.wait()
        with self.turn:
            # asked again with the turn: a retry and the next day's fire may both have waited for
            # it, and the date is marked done before the turn is let go, so one of them runs it
            run_date = self._due_date()
            if run_date is None or self._stopping(f"the daily run of {run_date}"):
                return
            if retry_of not in (None, run_date):  # a report lacking a bill for good was tried hourly for weeks
                log.info("the daily run of %s is no longer tried: the run of %s takes over (and writes its report "
                         "again once its own is written)", retry_of, run_date)
                return
            if retry_of is None:  # a fire's own run: its back-off starts afresh, not at the last date's hour
                self._retry_delay = self.daily_retry
            if retry_of is None and self.tasks.verify is not None:
                self.instrumented("verify", self.tasks.verify)
                if self._stopping(f"the report of {run_date - timedelta(days=1)}"):
                    return
            if not self.instrumented("daily", lambda: self._daily(run_date)):
                self._keep_undone(run_date)
                self.retry_daily(run_date)
                return
            self._retry_delay = self.daily_retry
            self._make_up(run_date)

    def _keep_undone(self, run_date: date) -> None:
        """The failed run kept to be written again after a later run's report (undone_reports.py); a
        state the disk has no room for loses only that."""
        try:
            note_undone(self.lake, run_date)
        except (SpendlakeError, OSError) as exc:
            log.warning("the daily run of %s is not kept to be made up: %s", run_date, exc)

    def _make_up(self, run_date: date) -> None:
        """Once `run_date`'s report is written (its bills are in), the reports of the earlier runs not
        done, oldest first, each counted under `daily`; one failing stays kept for the next run."""
        try:
            undone, dropped = undone_before(self.lake, run_date)
        except (SpendlakeError, OSError) as exc:
            log.warning("the earlier daily runs not done are not made up now: %s", exc)
            return
        if dropped:
            log.warning("the reports of %s were not written whole and are more than %d days old: not written "
                        "again (`spendlake report --date DAY` writes one)",
                        ", ".join(str(day - timedelta(days=1)) for day in dropped), MAKE_UP_DAYS)
        for undone_date in undone:
            day = undone_date - timedelta(days=1)
            if self._stopping(f"the report of {day}, written again"):
                return
            log.info("writing the report of %s again: its daily run (due %s) was not done", day, undone_date)
            self.instrumented("daily", lambda: self._made_up(undone_date))

    def _made_up(self, run_date: date) -> None:
        self.tasks.daily(run_date - timedelta(days=1))
        mark_done(self.lake, run_date)

    def _stopping(self, step: str) -> bool:
        """True once a stop (SIGTERM, a SIGHUP's reload) is asked: only the running step is waited
        for, and `step`, queued behind it, is made up by the next start (its ingest runs the rules,
        an undone daily run is run again), not run toward the SIGKILL that ends a stop too long."""
        if self._stopped.is_set():
            log.info("stopping: %s left to the next start", step)
            return True
        return False

    def _daily(self, run_date: date) -> None:
        """The report of the day before `run_date`, then the run recorded as done (under the turn,
        as every state write of this job): a record the disk had no room for fails the run
        (counted, tried again) rather than escaping the job."""
        self.tasks.daily(run_date - timedelta(days=1))
        record_daily_run(self.lake, run_date, self.clock())

    def _due_date(self) -> date | None:
        """The latest fire's date while its daily run has not been done, else None (logged)."""
        now = self.clock()
        run_date = latest_fire_date(now, self.daily_at)
        if not self.daily_due(now):
            log.info("daily run of %s already done", run_date)
            return None
        return run_date

    def retry_daily(self, run_date: date) -> None:
        delay, self._retry_delay = self._retry_delay, min(self._retry_delay * 2, DAILY_RETRY_MAX)
        if not self.scheduler.running:  # shutting down: the next start makes the run up
            return
        when = datetime.now(timezone.utc) + delay  # APScheduler's clock, as in start()
        log.warning("the daily run of %s failed: trying the report again at %s", run_date, when.strftime("%H:%M:%S"))
        self.scheduler.add_job(self.run_daily, DateTrigger(when, timezone=timezone.utc), kwargs={"retry_of": run_date},
                               id=RETRY_JOB, name=RETRY_JOB, replace_existing=True)

    def daily_due(self, now: datetime) -> bool:
        """True when the latest scheduled daily fire has not run to completion yet. A run recorded
        for the next fire's date was made before its fire: by `spendlake demo` between midnight and
        `daily_at`, which records its report as the next fire's run, finished by `now` (the latest
        fire is not due: its report, older than the demo's, would be written after it, and the next
        fire's again), or by a clock running ahead, finished after `now` (or unstamped). A clock
        ahead, or a record of any later date (a demo of a future window: `demo --start 2027-03-01`
        records 2027-03-03), would leave no report until the clock caught up: the latest fire is due."""
        daily = self.lake.read_state(STATE).get("daily", {})
        if daily.get("last_run_date") is None:
            return True
        done, latest = date.fromisoformat(daily["last_run_date"]), latest_fire_date(now, self.daily_at)
        if done <= latest:
            return done < latest
        finished = daily.get("finished_at")
        ahead_of_its_fire = done == latest + timedelta(days=1) and isinstance(finished, str)
        return not ahead_of_its_fire or iso_seconds(finished) > now.timestamp()

    def instrumented(self, job: str, task: Callable[[], None]) -> bool:
        started = clock_time.perf_counter()
        try:
            task()
        except LakeBusyError as exc:  # a `spendlake ingest` by hand is doing this work: not a failure
            log.warning("job %s skipped: %s", job, exc)
            self.metrics.skipped(job).inc()
            return False
        except ToldFailure as exc:  # counted; said once, when it began (`status` keeps telling it)
            DETAIL.info("job %s failed as its last run did: %s", job, exc)
            self.metrics.failures(job).inc()
            return False
        except Exception as exc:  # a job failure is counted and logged; the service keeps running
            if isinstance(exc, OSError):  # a full disk, a read-only lake: one sentence, as the CLI says it
                exc = os_error(exc)
            if isinstance(exc, SpendlakeError):  # it names what, where and what next: one line (traceback at -v)
                log.error("job %s failed: %s", job, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            else:
                log.exception("job %s failed", job)
            self.metrics.failures(job).inc()
            return False
        finally:
            self.metrics.duration(job).observe(clock_time.perf_counter() - started)
        self.metrics.last_success(job).set_to_current_time()
        self._record_success(job)
        return True

    def _record_success(self, job: str) -> None:
        """Keep the success in the lake's state (jobs run one at a time: no other writer of it);
        a disk that has no room for it loses only the restart's reading of it."""
        try:
            state = self.lake.read_state(STATE)
            state["last_success"] = {**state.get("last_success", {}), job: utc_now_iso()}
            self.lake.write_state(STATE, state)
        except (SpendlakeError, OSError) as exc:
            log.warning("job %s: its success is not recorded in the lake's state: %s", job, exc)

    def _skipped(self, event: JobEvent) -> None:
        reason = "the previous run is still going" if event.code == EVENT_JOB_MAX_INSTANCES else "it was missed"
        job = "daily" if event.job_id == RETRY_JOB else event.job_id  # the job the alerts and RUNBOOK name
        log.warning("skipped a fire of job %s: %s", job, reason)
        self.metrics.skipped(job).inc()
