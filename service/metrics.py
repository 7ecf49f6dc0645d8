"""Prometheus metrics: a collector that reads the lake at scrape time, and job instruments.

Derived numbers (spend, findings, freshness) come from `LakeCollector`, computed when
Prometheus scrapes and cached until the lake changes, so nothing goes stale. Job events
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
from datetime import datetime

import duckdb
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from service.core.config import Config
from service.core.errors import SpendlakeError
from service.core.lake import Lake

log = logging.getLogger(__name__)

JOB_BUCKETS = (0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600)


class JobMetrics:
    """Instruments the scheduler updates: one series per job from the start, so a job that
    never failed shows 0 rather than nothing."""

    def __init__(self, registry: CollectorRegistry, jobs: Iterable[str]):
        self.duration = Histogram("spendlake_job_duration_seconds", "Wall time of a scheduled job run.", ["job"],
                                  registry=registry, buckets=JOB_BUCKETS)
        self.failures = Counter("spendlake_job_failures_total", "Scheduled job runs that failed.", ["job"],
                                registry=registry)
        self.skipped = Counter("spendlake_job_skipped_total",
                               "Scheduled fires skipped because the previous run was still going or was missed.",
                               ["job"], registry=registry)
        self.last_success = Gauge("spendlake_job_last_success_timestamp_seconds",
                                  "When a scheduled job last finished without error.", ["job"], registry=registry)
        for job in jobs:
            self.duration.labels(job)
            self.failures.labels(job)
            self.skipped.labels(job)


class LakeCollector(Collector):
    """Reads the lake when scraped; recomputes only when a lake file changed or the
    cached page is older than `max_age_seconds` (relative windows such as 24h move)."""

    def __init__(self, config: Config, *, max_age_seconds: float = 300, clock: Callable[[], float] = time.time):
        self.config = config
        self.lake = Lake(config.lake)
        self.max_age_seconds = max_age_seconds
        self.clock = clock
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._computed_at = 0.0
        self._families: list[Metric] = []

    def describe(self) -> list[Metric]:
        return []  # nothing to declare up front: registering must not read the lake

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            key = self.fingerprint()
            now = self.clock()
            if key != self._key or now - self._computed_at >= self.max_age_seconds:
                self._families = self.compute()
                self._key, self._computed_at = key, now
            return iter(list(self._families))

    def fingerprint(self) -> tuple:
        """What a change of the lake touches: the ledger, job/source state and table files."""
        root = self.lake.root
        paths = [root / "_ledger" / "deliveries.json", *sorted((root / "_state").glob("*.json")),
                 *sorted(root.glob("*/*=*/*=*/data.parquet"))]
        stats = []
        for path in paths:
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            stats.append((str(path), stat.st_mtime_ns, stat.st_size))
        return tuple(stats)

    def compute(self) -> list[Metric]:
        readable = GaugeMetricFamily("spendlake_lake_readable", "1 when the last scrape could read the lake.")
        families: list[Metric] = []
        try:
            families += self.source_families()
            con = self.lake.query()
            try:
                families += self.data_end_families(con)
            finally:
                con.close()
        except (SpendlakeError, duckdb.Error, OSError) as exc:
            log.error("metrics: cannot read the lake at %s: %s", self.lake.root, exc)
            readable.add_metric([], 0)
            return [readable]
        readable.add_metric([], 1)
        return [readable, *families]

    def source_families(self) -> list[Metric]:
        state = self.lake.read_state("sources")
        last = GaugeMetricFamily("spendlake_source_last_success_timestamp_seconds",
                                 "When the source last ingested without error.", labels=["source"])
        failures = CounterMetricFamily("spendlake_source_failures", "Ingest runs of the source that failed.",
                                       labels=["source"])
        for source in self.config.sources:  # configured sources only: a bounded label set
            record = state.get(source.name, {})
            if record.get("last_success"):
                last.add_metric([source.name], iso_seconds(record["last_success"]))
            failures.add_metric([source.name], int(record.get("failures_total", 0)))
        return [last, failures]

    def data_end_families(self, con: duckdb.DuckDBPyConnection) -> list[Metric]:
        end = GaugeMetricFamily("spendlake_source_data_end_timestamp_seconds",
                                "End of the latest charge period the lake holds for the source.", labels=["source"])
        configured = {s.name for s in self.config.sources}
        rows = con.execute("SELECT source, epoch(max(ChargePeriodEnd)) FROM costs GROUP BY source").fetchall()
        for source, seconds in rows:
            if source in configured and seconds is not None:
                end.add_metric([source], float(seconds))
        return [end]


def iso_seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
