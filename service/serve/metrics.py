"""Prometheus metrics: a collector that reads the lake at scrape time, and job instruments.

Derived numbers (spend, findings, freshness) come from `LakeCollector`, computed when
Prometheus scrapes and cached until the lake changes, so nothing goes stale; what needs the
whole window summed or allocated (spend, shared clusters, commitments) is read from the tops
ingest stored for the lake's state (service/attribution/tops.py). A cost group the lake cannot
give now (a damaged partition; budgets beside a writer) shows what was last read, marked by
`spendlake_metrics_last_good`, so cost alerts do not resolve because of it (budgets, which
have no stored tops, as the service last stored them: stored_families.py). Job events
(durations, failures, skipped fires) are instruments updated by the scheduler.

Label values are bounded: a metric keeps the `top_n` largest label values and folds the
rest into `other`; resource ids never become labels. Money is `_usd` (USD rows only:
currencies are never summed together), times are seconds since the epoch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone

import duckdb
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.attribution import ScrapeTops, metrics_anchor, tops_owner
from service.core.config import Config
from service.core.errors import SpendlakeError
from service.core.files import listed
from service.core.lake import Lake
from service.core.timewindow import month_text
from service.ingest.freshness import unrecorded_key
from service.serve.cluster_families import cluster_families
from service.serve.families import (budget_families, commitment_families, data_through_families, findings_families,
                                    integrity_families, source_families, spend_families, tops_state_family)
from service.serve.stored_families import STATE as STORED_STATE, STORED_GROUPS, StoredFamilies, budgets_key

log = logging.getLogger(__name__)

JOB_BUCKETS = (0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600)
# The groups cost alerts read: while the lake cannot be read they show the last families read
# (in this process, across reloads), not nothing, so the alerts stay; the integrity, freshness and data-through
# families always say what is true now.
LAST_GOOD_GROUPS = frozenset({"spend", "findings", "budgets", "commitments", "clusters"})
# Budgets sum each budget's month from the lake (no stored tops): beside a writer or a service
# job, whose new state has no stored rollups yet, that rolls the month up from its raw lines,
# seconds and a second DuckDB beside the writer's, so the last read ones are shown meanwhile.
HELD_BACK_GROUPS = frozenset({"budgets"})
TOPS_GROUPS = frozenset({"spend", "commitments", "clusters"})  # read from the stored metric tops
# The tables' files a scrape's cache key reads, partitions (`data.parquet`) and derived files (`<version>.parquet`:
# one written in place changes the integrity family at once, not when the cached page expires): not under
# `_staging`, which every rollup and ingest run removes and makes again (Lake.clean_staging): a scrape listing it
# then answered 500.
TABLE_FILES = "[a-z]*/*=*/*=*/*.parquet"


@dataclass
class LastGood:
    """The cost groups' families last read, shared with the collector of the service a SIGHUP
    starts; and the month the stored groups' (budgets) summed, the data's end's: once the data's
    end is in another month they are shown no more (a budget's month to date is of its month)."""

    groups: dict[str, list[Metric]] = field(default_factory=dict)
    months: dict[str, str] = field(default_factory=dict)


def kept_by_reload(last_good: LastGood, old: Config, new: Config) -> LastGood:
    """The last good groups a reload from `old` to `new` keeps showing, as a restart shows them:
    not those whose stored form is of another config (budgets: of other budgets or attribution; the tops' groups:
    of another attribution or top_n), whose series would stay, marked last good, until the lake
    could be read."""
    other = (STORED_GROUPS if budgets_key(old) != budgets_key(new) else frozenset()) | (
        TOPS_GROUPS if tops_owner(old) != tops_owner(new) else frozenset())
    return LastGood({name: found for name, found in last_good.groups.items() if name not in other},
                    {name: month for name, month in last_good.months.items() if name not in other})


# `job` is the label issue 6's contract names; Prometheus sets its own `job` (the scrape job's name) and stores
# ours as `exported_job`, so each series also carries `task`, the same value, which the shipped rules and
# dashboard read under any scrape config (honor_labels or not).
JOB_LABELS = ["job", "task"]


class JobMetrics:
    """Instruments the scheduler updates: one series per job from the start, so a job that
    never failed shows 0 rather than nothing."""

    def __init__(self, registry: CollectorRegistry, jobs: Iterable[str]):
        self._duration = Histogram("spendlake_job_duration_seconds", "Wall time of a scheduled job run.", JOB_LABELS,
                                   registry=registry, buckets=JOB_BUCKETS)
        self._failures = Counter("spendlake_job_failures_total", "Scheduled job runs that failed.", JOB_LABELS,
                                 registry=registry)
        self._skipped = Counter("spendlake_job_skipped_total",
                                "Scheduled fires skipped: the previous run was still going, the fire was missed, "
                                "or another spendlake process held the lake.",
                                JOB_LABELS, registry=registry)
        self._last_success = Gauge("spendlake_job_last_success_timestamp_seconds",
                                   "When a scheduled job last finished without error.", JOB_LABELS,
                                   registry=registry)
        for job in jobs:
            self.duration(job)
            self.failures(job)
            self.skipped(job)

    def duration(self, job: str) -> Histogram:
        return self._duration.labels(job, job)

    def failures(self, job: str) -> Counter:
        return self._failures.labels(job, job)

    def skipped(self, job: str) -> Counter:
        return self._skipped.labels(job, job)

    def last_success(self, job: str) -> Gauge:
        return self._last_success.labels(job, job)


class LakeCollector(Collector):
    """Reads the lake when scraped; recomputes only when a lake file changed or the
    cached page is older than `max_age_seconds`. `turn`: the lock the service's jobs take
    turns with; tops missing from the lake are computed only while holding it (ScrapeTops).
    `last_good`: the cost groups last read, shared with the collector of the service a SIGHUP
    replaces (a reload on a damaged lake would otherwise drop its budget series); `earlier`: the
    `tops_owner` of the configs that service, or the one before a restart, ran (ScrapeTops)."""

    def __init__(self, config: Config, *, max_age_seconds: float = 300, clock: Callable[[], float] = time.time,
                 turn: threading.Lock | None = None, last_good: LastGood | None = None,
                 earlier: tuple[str, ...] = ()):
        self.config = config
        self.earlier = earlier  # the tops_owner of configs replaced: their tops until this one's are stored
        self.turn = turn
        self.lake = Lake.of(config)
        self.max_age_seconds = max_age_seconds
        self.clock = clock
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._computed_at = 0.0
        self._families: list[Metric] = []
        self._last_good = LastGood() if last_good is None else last_good
        self._stored = StoredFamilies(self.lake, config)
        self._kept: dict[str, list[Metric]] = {}  # what keep_last_good stored last
        self._said: set[str] = set()  # the errors the last scrape logged or found logged: under _lock, as compute()

    def describe(self) -> list[Metric]:
        return []  # nothing to declare up front: registering must not read the lake

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            key = self.fingerprint()
            now = self.clock()
            if key != self._key or now - self._computed_at >= self.max_age_seconds:
                self._families, current = self.compute()
                # A page showing the previous state's tops is not kept: the tops stored when the
                # writer lets go, or computed once the jobs' turn is free, change no file the
                # fingerprint reads, so it would be served for up to max_age_seconds.
                self._key, self._computed_at = (key if current else None), now
            return iter(list(self._families))

    def fingerprint(self) -> tuple:
        """What a change of the lake touches: the ledger, job/source state and table files, and the
        source failures a full disk kept out of the state. A table's folder removed as it is listed
        (`forget`) is listed again (files.listed): the key is the lake after it, which the page, computed
        next, reads, and what the writer removes after changes the key again."""
        root = self.lake.root
        # (not the last good families the scrape stores itself: storing them would compute the page again)
        states = [p for p in listed(root / "_state", "*.json") if p.stem != STORED_STATE]
        paths = [root / "_ledger" / "deliveries.json", *states, *listed(root, TABLE_FILES)]
        stats = []
        for path in paths:
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            stats.append((str(path), stat.st_mtime_ns, stat.st_size))
        return tuple(stats), unrecorded_key(self.lake)  # failures a full disk kept out of the files

    def compute(self) -> tuple[list[Metric], bool]:
        """Every family group on its own: a group that cannot be read is logged, and
        `spendlake_lake_readable` drops to 0, while the others still report; a cost group
        (LAST_GOOD_GROUPS) shows what it last read, marked, and any other is left out. With
        whether the tops-based families describe the lake's current state."""
        now = datetime.fromtimestamp(self.clock(), timezone.utc)
        # the stored tops file is read once per scrape; a state that cannot be read shows the previous one's
        tops = ScrapeTops(self.lake, self.config, now, self.turn, previous_when_unreadable=True, earlier=self.earlier)
        groups = {
            "sources": lambda: source_families(self.config, self.lake),
            "integrity": lambda: integrity_families(self.lake),
            "data_through": lambda: data_through_families(self.config, self.lake),
            "spend": lambda: spend_families(tops),
            "findings": lambda: findings_families(self.config, self.lake),
            "budgets": lambda: budget_families(self.config, self.lake, now),
            "commitments": lambda: commitment_families(tops),
            "clusters": lambda: cluster_families(self.config, tops),
            "tops_state": lambda: tops_state_family(tops),
        }
        families: list[Metric] = []
        errors: dict[str, None] = {}  # each cause logged once per scrape, in order
        last_good = GaugeMetricFamily(
            "spendlake_metrics_last_good", "1 when the group's cost families are those the last scrape that read "
            "them found (budgets: also as the service stored them, after a restart): the lake cannot be read (a "
            "damaged partition: spendlake_lake_partitions_damaged), so a cost alert does not resolve because of the "
            "damage, or (budgets) a writer or job is at work; 0 when read now.",
            labels=["group"])
        held_back = self._busy()
        kept, months = self._last_good.groups, self._last_good.months
        month = self._month(now)
        for name, group in groups.items():
            found, fresh = None, False
            if name in STORED_GROUPS and name not in kept and (stored := self._stored.load(name, month)):
                kept[name], months[name] = stored, month  # a service (re)started: what it stored before
            if name in STORED_GROUPS and months.get(name) != month:
                kept.pop(name, None)  # another month's
            if not (name in HELD_BACK_GROUPS and held_back and name in kept):
                try:
                    found, fresh = group(), True
                except (SpendlakeError, duckdb.Error, OSError) as exc:
                    errors[str(exc)] = None
            if name in TOPS_GROUPS and tops.unreadable:  # the previous state's stored tops (after a restart)
                errors[str(tops.unreadable)], fresh = None, False
            if name in LAST_GOOD_GROUPS:
                if fresh:
                    kept[name], months[name] = found, month
                found = kept.get(name, found)
                if found is not None:
                    last_good.add_metric([name], 0 if fresh else 1)
            families += found or []
        for error in errors.keys() - self._said:  # said when it appears, not at each scrape while it lasts
            log.error("metrics: cannot read the lake at %s: %s", self.lake.root, error)
        if self._said and not errors:
            log.info("metrics: the lake at %s reads again", self.lake.root)
        self._said = set(errors)
        readable = GaugeMetricFamily("spendlake_lake_readable", "1 when the last scrape could read all of the lake.")
        readable.add_metric([], 0 if errors else 1)
        return [readable, last_good, *families], tops.current and not held_back

    def keep_last_good(self, wait: bool = False) -> None:
        """Store the budget families last read when they changed: called by the service's own
        loop, never by a scrape (`/metrics` writes nothing to the lake); not while a scrape computes
        (the loop answers signals: it never waits for one), but with `wait` as the loop ends (a stop
        or SIGHUP just after a scrape under load left them unstored: a restart showed none)."""
        if not self._lock.acquire(blocking=wait):
            return
        try:
            found = {name: (self._last_good.groups[name], self._last_good.months[name])
                     for name in STORED_GROUPS if name in self._last_good.groups}
        finally:
            self._lock.release()
        for name, (families, month) in found.items():
            if families is not self._kept.get(name):
                self._stored.store(name, families, month)
                self._kept[name] = families

    def _month(self, now: datetime) -> str:
        """The month the budgets sum to date now: the data's end's (the clock's when the ledger
        cannot be read)."""
        try:
            return month_text(metrics_anchor(self.lake, now))
        except (SpendlakeError, duckdb.Error, OSError):
            return month_text(now)

    def _busy(self) -> bool:
        """A writer holds the lake, or one of the service's jobs has its turn."""
        return self.lake.writing() or (self.turn is not None and self.turn.locked())
