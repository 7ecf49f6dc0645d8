"""The scrape-time collector: freshness per source, caching per lake change, a valid page."""

from __future__ import annotations

import subprocess
import time
from datetime import datetime, timezone

import pytest
from conftest import require_binary
from prometheus_client import CollectorRegistry, generate_latest
from servicekit import MemoryConnector, commit, make_config

from connectors.base import CONNECTORS
from service.core.lake import Lake
from service.ingest import ingest
from service.metrics import JobMetrics, LakeCollector

ROWS = [("2026-11-20 00:00:00", "2026-11-20 01:00:00", "USD", "3.5", {"team": "nlp"}),
        ("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "1.25", {"team": "vision"})]


@pytest.fixture
def memory_source(monkeypatch):
    monkeypatch.setitem(CONNECTORS, "focus", MemoryConnector)
    monkeypatch.setattr(MemoryConnector, "ROWS", list(ROWS))
    return MemoryConnector


def scrape(collector: LakeCollector) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def test_success_sets_last_success_and_a_failure_leaves_it_and_is_counted(tmp_path, memory_source):
    config = make_config(tmp_path)
    registry = scrape(LakeCollector(config))
    last = ("spendlake_source_last_success_timestamp_seconds", {"source": "cur"})
    assert registry.get_sample_value(*last) is None
    assert registry.get_sample_value("spendlake_source_failures_total", {"source": "cur"}) == 0

    before = time.time()
    assert not ingest(config).failed
    succeeded_at = registry.get_sample_value(*last)
    assert before - 1 <= succeeded_at <= time.time()
    end = datetime(2026, 11, 27, 6, tzinfo=timezone.utc).timestamp()
    assert registry.get_sample_value("spendlake_source_data_end_timestamp_seconds", {"source": "cur"}) == end

    memory_source.ROWS = None  # the bucket becomes unreadable
    assert ingest(config).failed
    assert registry.get_sample_value(*last) == succeeded_at
    assert registry.get_sample_value("spendlake_source_failures_total", {"source": "cur"}) == 1
    assert registry.get_sample_value("spendlake_lake_readable") == 1


def test_collector_recomputes_only_when_the_lake_changes_or_the_page_ages(tmp_path):
    config = make_config(tmp_path)
    now = [1000.0]
    collector = LakeCollector(config, max_age_seconds=300, clock=lambda: now[0])
    calls = []
    compute = collector.compute
    collector.compute = lambda: calls.append(1) or compute()
    registry = scrape(collector)

    generate_latest(registry)
    generate_latest(registry)
    assert len(calls) == 1
    commit(Lake(config.lake), "cur", ROWS)
    generate_latest(registry)
    assert len(calls) == 2
    assert registry.get_sample_value("spendlake_source_data_end_timestamp_seconds", {"source": "cur"}) is not None
    now[0] += 301  # relative windows (24h, 7d) move with time even when the lake does not
    generate_latest(registry)
    assert len(calls) == 3


def test_an_unreadable_lake_is_reported_not_raised(tmp_path):
    config = make_config(tmp_path)
    state = config.lake / "_state" / "sources.json"
    state.parent.mkdir(parents=True)
    state.write_text("{not json")
    registry = scrape(LakeCollector(config))
    assert registry.get_sample_value("spendlake_lake_readable") == 0


def test_the_scraped_page_passes_promtool_check_metrics(tmp_path, memory_source):
    promtool = require_binary("promtool")
    config = make_config(tmp_path)
    ingest(config)
    registry = CollectorRegistry()
    jobs = JobMetrics(registry, ["ingest", "daily"])
    jobs.duration.labels("ingest").observe(1.5)
    jobs.failures.labels("daily").inc()
    jobs.last_success.labels("ingest").set_to_current_time()
    registry.register(LakeCollector(config))
    page = generate_latest(registry)
    assert b'spendlake_source_last_success_timestamp_seconds{source="cur"}' in page
    checked = subprocess.run([promtool, "check", "metrics"], input=page, capture_output=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert not checked.stdout.strip() and not checked.stderr.strip()
