"""`spendlake serve`: one process per lake running the scheduler and the HTTP server.

Start: take the lake's service lock (a second service refuses, naming the holder's pid; a lake
this process may not write is served for reads only, its jobs failing: reads_only.py), bind, start the jobs. SIGTERM/SIGINT: stop accepting requests, wait for running jobs,
release the lock, return (exit 0). SIGHUP: read the config file again; when it loads, wait
for running jobs (still answering HTTP), let go of the lake, and start again with it in the same
process, on the same listening socket when the address is unchanged (a port closed and bound
again refused the scrapes and probes in between); a config that does not load, or that the
service could not start with (a new address taken, a new lake another service holds: found before
letting go), is logged and the running one goes on.
(Without a handler SIGHUP killed the process at once, running jobs and all.)
"""

from __future__ import annotations

import logging
import signal
import threading
import time as clock_time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, disable_created_metrics

from service.attribution import TOPS_FORMAT, tops_owner
from service.serve.app import Api, api_token
from service.serve.exposure import exposure_warning
from service.serve.daily import write_daily_report
from service.serve.config_watch import CHANGED_MESSAGE, GONE_MESSAGE, REFUSED_MESSAGE, ConfigWatch, as_read
from service.serve.listener import make_server, pinned_after
from service.core.config import Config
from service.core.errors import LakeBusyError, SourceError, SpendlakeError, os_error
from service.core.lake import Lake
from service.core.logs import hide
from service.core.output import printable
from service.core.serving import serving_or_reading
from service.core.timewindow import utc_now
from service.serve.metrics import JobMetrics, LakeCollector, LastGood, kept_by_reload
from service.serve.reads_only import reads_only, reads_only_warning
from service.serve.scheduler import STATE as JOBS_STATE, ServiceScheduler, Tasks, ToldFailure

if TYPE_CHECKING:
    from service.ingest.inventory import InventoryOutcome

log = logging.getLogger(__name__)
SERVED = "tops_owner"  # in _state/jobs.json: whose metric tops the service stored last (served_before)
SERVED_FORMAT = "tops_format"  # and their form: the tops of a version before an upgrade are not shown
EARLIER_KEPT = 3  # replaced configs whose tops a scrape may show: reloads in a row before any build is done
# what the service says of itself that asks the operator to act
ASKING = ("warning:", "SIGHUP:", CHANGED_MESSAGE, REFUSED_MESSAGE, GONE_MESSAGE)


def announce(line: str) -> None:
    """What the service says of itself (serving, a config changed or not reloaded, stopping) as a log line,
    stamped like the others, so when a SIGHUP was taken or refused can be told from the log."""
    log.log(logging.WARNING if line.startswith(ASKING) else logging.INFO, line)
INGEST_DETAIL = logging.getLogger("service.ingest")  # not the service's events: `spendlake serve` shows them with -v


def run_ingest(config: Config, taken: list[InventoryOutcome] | None = None) -> None:
    """Billing exports, then inventory snapshots (`taken`: those the start took before it stored the
    rollups, StartInventory), then the rollups once for both; a failing source fails the job (counted)
    after the others have committed, its FAILED line said as the job's failure (one line, not three),
    logged once while it fails as the last run did."""
    from service.ingest.billing import ingest
    from service.ingest.inventory import run_inventory
    from service.ingest.rollups import refreshed

    result = ingest(config, published=_log_outcomes, rollups=not config.inventory)
    warnings = result.warnings  # the rollup build's, which the CLI prints as `warning:`
    failed = result.failed
    errors = [failure for o in failed for failure in _failures(o.lines())]
    told = all(o.copy_told for o in failed)  # each failure as the last run's, told then
    if config.inventory:
        try:
            outcomes = run_inventory(config, rollups=False) if taken is None else taken
        except Exception:
            _refresh_anyway(config)  # the bills committed above: queries would roll them up in memory until next hour
            raise
        for outcome in outcomes:
            _log_lines("inventory", outcome.lines(), quiet=not outcome.rows and not outcome.failed)
        errors += [failure for o in outcomes for failure in _failures(o.lines())]
        told = told and not any(o.failed for o in outcomes)
        warnings += refreshed(config)
    for warning in warnings:
        log.warning("ingest: %s", printable(warning))
    if errors:
        raise (ToldFailure if told else SourceError)("; ".join(errors))


def _refresh_anyway(config: Config) -> None:
    """The rollups of the bills the job committed, when its inventory failed before building them;
    a failure of this build is logged, the inventory's failure is the job's."""
    from service.ingest.rollups import refreshed

    try:
        for warning in refreshed(config):
            log.warning("ingest: %s", printable(warning))
    except Exception as exc:  # e.g. another writer took the lake: its own run builds them
        log.warning("ingest: attribution rollups not refreshed after the inventory failed: %s", printable(str(exc)))


def _log_outcomes(result) -> None:
    """What the run committed, logged when its deliveries are in place (before the rollups)."""
    for outcome in result.outcomes:
        _log_lines("ingest", outcome.lines(), quiet=outcome.status == "unchanged" or outcome.copy_told)
        for warning in outcome.warnings:
            log.warning("ingest: %s", printable(warning))


FAILED = ": FAILED: "  # an outcome's failure line: `<source> <periods or kind>: FAILED: <error>`


def _failures(lines: list[str]) -> list[str]:
    """The failure lines of an outcome as the job's failure says them: `<source> ...: <error>`."""
    return [line.replace(FAILED, ": ", 1) for line in lines if FAILED in line]


def _log_lines(job: str, lines: list[str], *, quiet: bool) -> None:
    """A commit, restore or skip is an event of the service's log; a delivery already ingested,
    a copy skipped as the last run skipped it, or an inventory source with nothing new, every hour,
    is ingest's detail (shown with -v). A failure is the job's: its line says it (scheduler)."""
    for line in lines:
        if FAILED not in line:
            (INGEST_DETAIL if quiet else log).info("%s: %s", job, printable(line))


def run_rules(config: Config) -> None:
    from service.findings.run import run_rules as evaluate

    errors = evaluate(config).result.errors
    if errors:  # the other rules' findings are stored; the job still counts as failed
        raise SpendlakeError("; ".join(f"rule {o.rule}: {o.message}" for o in errors))


def verify_lake(config: Config) -> None:
    """Re-hash and re-sum every partition, re-hash every inventory snapshot and derived file;
    a damaged one fails the job (and the metrics say which; a damaged derived file is computed
    by readers meanwhile, and written again by the next ingest)."""
    from service.core.derived_sweep import derived_error, verify_derived
    from service.core.integrity import partition_error
    from service.core.snapshot_ledger import snapshot_error
    from service.core.snapshot_verify import verify_snapshots

    lake = Lake.of(config)
    bad = [check for check in lake.verify() if not check.ok]
    damaged = [check for check in verify_snapshots(lake) if not check.ok]
    altered = [check for check in verify_derived(lake) if check.failed]
    if bad:
        raise partition_error(bad)
    if damaged:
        raise snapshot_error(damaged)
    if altered:
        raise derived_error(altered)


def store_rollups(config: Config) -> None:
    """`spendlake rollup` (under the lake lock, published atomically), run by the service before its first
    ingest after a start or SIGHUP: a config whose rollups are stored builds nothing; one changed since the
    last build (the service restarted or reloaded with other attribution) has them stored before the
    sources are read, said in the log."""
    from service.ingest.rollups import rollup

    started = clock_time.monotonic()
    done = rollup(config)
    lake = Lake.of(config)
    state = lake.read_state(JOBS_STATE)
    lake.write_state(JOBS_STATE, {**state, SERVED: tops_owner(config), SERVED_FORMAT: TOPS_FORMAT})
    for warning in done.warnings:
        log.warning("rollup: %s", printable(warning))
    if done.built:
        log.info("stored the attribution rollups of %d period(s) this config lacked, and its metric tops, in %.1f s "
                 "(requests and scrapes until then rolled them up from the raw lines)", done.built,
                 clock_time.monotonic() - started)


class StartInventory:
    """serve's first ingest after a start or SIGHUP, and the rollups stored before it (the scheduler's
    `rollups` task): the inventory snapshots are taken first and handed to that ingest, which takes none
    of its own. Taken after the build, a snapshot that changed tags or jobs made the rollups just stored
    stale, and the ingest built them all again (the demo with its attribution and a tag edited: 27 s,
    then 21 s more)."""

    def __init__(self, config: Config):
        self.config = config
        self.taken: list[InventoryOutcome] | None = None

    def store_rollups(self) -> None:
        from service.ingest.inventory import run_inventory

        self.taken = run_inventory(self.config, rollups=False) if self.config.inventory else None
        store_rollups(self.config)

    def ingest(self) -> None:
        taken, self.taken = self.taken, None  # taken once: the next run's inventory is its own
        run_ingest(self.config, taken)


def served_before(lake: Lake, config: Config) -> tuple[str, ...]:
    """The `tops_owner` of the config the service stored tops for before this start, when it was another
    (a restart with changed attribution): its tops stand in while this config's are built (ScrapeTops).
    Not when they are of another form (TOPS_FORMAT, or noted before it was: a restart onto a new version):
    their labels are not this version's (a run's without `folded`), and a scrape showing them answered 500."""
    try:
        state = lake.read_state(JOBS_STATE)
    except (SpendlakeError, OSError):  # the scheduler says what is wrong with the state
        return ()
    owner = state.get(SERVED) if state.get(SERVED_FORMAT) == TOPS_FORMAT else None
    return (owner,) if owner and owner != tops_owner(config) else ()


def default_tasks(config: Config) -> Tasks:
    from service.findings.run import rules_for

    rules_for(config)  # a bad `rules:` section stops the service at start-up, not at the first run
    start = StartInventory(config)
    return Tasks(ingest=start.ingest, rules=lambda: run_rules(config),
                 daily=lambda day: write_daily_report(config, day), verify=lambda: verify_lake(config),
                 rollups=start.store_rollups)


@dataclass
class Requests:
    """What the signal handlers ask of the running service: flags only, safe from a handler."""

    stop: bool = False
    reload: bool = False


class Service:
    def __init__(self, config: Config, *, listen: str | None = None, tasks: Tasks | None = None,
                 clock: Callable[[], datetime] = utc_now, reload: Callable[[], Config] | None = None,
                 requests: Requests | None = None):
        self.config = config
        self.listen_option = listen  # --listen outlives a reload; service.listen may change with it
        self.listen = listen or config.service.listen
        # what an address that cannot be bound is named as: the flag or key that set it, or the key of the default
        set_by = "service.listen" + ("" if "listen" in config.service.model_fields_set else " (not set: the default)")
        self.listen_from = "--listen" if listen else set_by
        self.given_tasks = tasks
        self.tasks = tasks or default_tasks(config)
        self.token = api_token(config)
        hide(self.token or "")  # a client that puts it in a URL's path or an unknown parameter: the access log
        self.clock = clock
        self.lake = Lake.of(config)
        self.bound = None  # the server bound on this config's address before it serves (run's, a reload's)
        self.config_read = as_read(self.lake.config_file)  # the file as `config` was read from it
        self.reload = reload
        self.requests = requests or Requests()
        self.handed = None  # (server, thread) of the service before a reload, still listening here
        self.earlier: tuple[str, ...] = ()  # tops_owner of the configs reloads replaced on this lake, newest first
        self.last_good = LastGood()  # the metrics' cost groups last read (LakeCollector), kept by a reload

    def stop(self) -> None:
        """Safe from a signal handler: sets a flag, takes no lock."""
        self.requests.stop = True

    def reloaded(self, announce: Callable[[str], None], watch: ConfigWatch | None = None) -> Service | None:
        """The service of the config file as it reads now, or None (said why, and `watch` told the
        file as refused) to keep this one."""
        if self.reload is None:
            announce("SIGHUP: no config file to read again; still serving the running config")
            return None
        read = as_read(self.lake.config_file)  # before reading it: an edit meanwhile is a new one
        if read[0] is None and self.lake.config_file is not None:  # not "pass --config PATH": it was passed
            announce(f"SIGHUP: {GONE_MESSAGE} ({self.lake.config_file})")
            if watch is not None:
                watch.refused(read, GONE_MESSAGE)
            return None
        try:
            successor = Service(self.reload(), listen=self.listen_option, tasks=self.given_tasks, clock=self.clock,
                                reload=self.reload, requests=self.requests)
            self.taken_over_by(successor)
        except (SpendlakeError, OSError) as exc:  # OSError: a new lake folder that cannot be made (/proc/x)
            exc = os_error(exc, "lake") if isinstance(exc, OSError) else exc
            announce(f"SIGHUP: the config was not reloaded, still serving the running one: {exc}")
            if watch is not None:
                watch.refused(read, str(exc))
            return None
        if successor.lake.root == self.lake.root:  # another lake's last read series would be its own
            successor.last_good = kept_by_reload(self.last_good, self.config, successor.config)
            successor.earlier = (tops_owner(self.config), *self.earlier)[:EARLIER_KEPT]
        return successor

    def taken_over_by(self, successor: Service) -> None:
        """What only starting `successor` would find wrong, found while this service still runs (it used to
        be found after this one let go, and the process exited): another service holding its new lake, its
        new address taken (bound here, served once it runs); then its lake folder pinned (made when missing).
        Raises SpendlakeError, or OSError for a folder that cannot be made (/proc/x)."""
        holder = successor.lake.lock_holder("service") if successor.lake.root != self.lake.root else None
        if holder is not None:
            raise LakeBusyError(f"another spendlake serve holds the lake {successor.lake.root} (pid {holder or '?'})",
                                where="lake", hint="stop that service, or keep this service's lake")
        if successor.listen != self.listen:
            successor.bound = make_server(None, successor.listen, where=successor.listen_from, hint=(
                f"choose a free address for service.listen in {successor.config.file} and send SIGHUP again; "
                "the running service keeps its address meanwhile"))
        pinned_after(successor.bound, successor.lake.root)

    @contextmanager
    def _unserved_closed(self) -> Iterator[None]:
        """The address bound for this run let go when the run fails before serving it (then it is the server's)."""
        try:
            yield
        finally:
            if self.bound is not None:
                self.bound.server_close()
                self.bound = None

    def run(self, announce: Callable[[str], None] = announce) -> Service | None:
        """Serve until asked to stop (returns None) or to reload a config that loads (returns
        the service to run next, once this one has let go of the lake and the port)."""
        successor = None
        read_only = self.config.service.read_only  # by its config: no lock, no job, nothing written (reads_only.py)
        if self.handed is None and self.bound is None:  # a start's: a reload's is bound or handed (taken_over_by)
            self.bound = pinned_after(make_server(None, self.listen, where=self.listen_from), self.lake.root)
        # its sources recorded: status and forget tell them; on a lake it may not write, reads only (reads_only.py)
        with (self._unserved_closed(),
              nullcontext() if read_only else serving_or_reading(self.lake, self.config) as refused):
            tasks = self.tasks if refused is None else reads_only(self.tasks, self.lake.root, refused)
            writes = refused is None and not read_only
            registry = CollectorRegistry()
            job_metrics = JobMetrics(registry, jobs=() if read_only else tasks.names())
            hours, minutes = (int(p) for p in self.config.service.daily_at.split(":"))
            scheduler = ServiceScheduler(self.lake, job_metrics, tasks,
                                         ingest_every=timedelta(minutes=self.config.service.ingest_every_minutes),
                                         daily_at=time(hours, minutes), clock=self.clock)
            collector = LakeCollector(self.config, turn=scheduler.turn, last_good=self.last_good,
                                      earlier=self.earlier or served_before(self.lake, self.config))
            registry.register(collector)
            watch = ConfigWatch(self.lake.config_file, announce, self.config_read, validate=self.reload)
            registry.register(watch)
            api = Api(self.config, registry, token=self.token, clock=self.clock, listen=self.listen)
            if self.handed:  # answered by the previous config's Api until this one is ready
                server, thread = self.handed
                server.RequestHandlerClass.api = api
            else:
                server, self.bound = self.bound or make_server(api, self.listen, where=self.listen_from), None
                server.RequestHandlerClass.api = api
                thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
                thread.start()
            try:
                host, port = server.server_address[:2]
                host = f"[{host}]" if ":" in host else host
                announce(f"spendlake serving http://{host}:{port} (lake {self.lake.root})")
                if refused is not None or read_only:
                    announce(reads_only_warning(self.lake.root, refused))
                if warning := exposure_warning(server.server_address[0], self.token, self.config.service.metrics_auth):
                    announce(warning)
                if not read_only:
                    scheduler.start()
                # Poll rather than block on a lock: a signal delivered to another thread only
                # runs its handler when the main thread next executes Python code.
                while not self.requests.stop and successor is None:
                    if self.requests.reload:
                        self.requests.reload = False
                        successor = self.reloaded(announce, watch)
                        if successor is not None:
                            watch.reloading(successor.config_read)
                    else:
                        watch.check()
                        if writes:  # here, not in a scrape: /metrics writes nothing
                            collector.keep_last_good()
                        clock_time.sleep(0.2)
                if writes:
                    collector.keep_last_good(wait=True)  # what the last scrape read, stored before letting go
                announce(f"{'reloading' if successor and not self.requests.stop else 'stopping'}: "
                         "waiting for running jobs")
            finally:
                if successor is not None:  # a reload: the probes keep answering while running jobs finish
                    scheduler.shutdown()
                if successor is not None and not self.requests.stop and successor.listen == self.listen:
                    successor.handed = (server, thread)
                else:
                    server.shutdown()
                    server.server_close()
                scheduler.shutdown()
        if successor is None or self.requests.stop:
            announce("stopped")
            return None
        announce("starting again with the reloaded config")
        return successor


def serve(config: Config, *, listen: str | None = None, tasks: Tasks | None = None,
          announce: Callable[[str], None] = announce, reload: Callable[[], Config] | None = None) -> None:
    """Run until SIGTERM or SIGINT; SIGHUP starts again with `reload()`'s config when it loads."""
    disable_created_metrics()  # `_created` series only add noise to every scrape
    requests = Requests()
    service: Service | None = Service(config, listen=listen, tasks=tasks, reload=reload, requests=requests)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: setattr(requests, "stop", True))
    signal.signal(signal.SIGHUP, lambda *_: setattr(requests, "reload", True))
    while service is not None:
        service = service.run(announce)
