"""A lake scrapes cannot read is logged when the cause first appears, not on every scrape: a
damaged partition over a weekend wrote the same ERROR line at each scrape (every minute with the
shipped Prometheus config, and at each `/readyz`), burying the jobs' lines around it."""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, generate_latest
from servicekit import make_config

from service.serve.metrics import LakeCollector


def unreadable_lake(tmp_path):
    """A config whose lake's source state is damaged, and a registry scraping it uncached."""
    config = make_config(tmp_path)
    state = config.lake / "_state" / "sources.json"
    state.parent.mkdir(parents=True)
    state.write_text("{not json")
    registry = CollectorRegistry()
    registry.register(LakeCollector(config, max_age_seconds=0))
    return config, registry


def said(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "service.serve.metrics" and r.levelno >= logging.INFO]


def test_a_lake_that_cannot_be_read_is_said_once_until_it_reads_again(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="service.serve.metrics")
    config, registry = unreadable_lake(tmp_path)
    state = config.lake / "_state" / "sources.json"
    for _ in range(3):
        generate_latest(registry)
    [error] = said(caplog)
    assert error.startswith(f"metrics: cannot read the lake at {config.lake}: ") and "sources.json" in error
    assert registry.get_sample_value("spendlake_lake_readable") == 0

    state.write_text("{}")
    generate_latest(registry)
    generate_latest(registry)
    assert said(caplog)[1:] == [f"metrics: the lake at {config.lake} reads again"]
    assert registry.get_sample_value("spendlake_lake_readable") == 1

    state.write_text("{not json")  # damaged again: said again
    generate_latest(registry)
    assert len(said(caplog)) == 3 and said(caplog)[2] == error


def test_concurrent_scrapes_of_a_lake_that_cannot_be_read_say_it_once(tmp_path, caplog, monkeypatch):
    """Prometheus and a person's curl scrape at once: the errors said are the collector's state,
    computed under its lock, so two scrapes never both find the cause new (serve42 checked)."""
    import threading
    import time

    from service.serve import metrics

    error = metrics.log.error
    monkeypatch.setattr(metrics.log, "error", lambda *args: time.sleep(0.1) or error(*args))  # a slow log handler
    caplog.set_level(logging.INFO, logger="service.serve.metrics")
    config, registry = unreadable_lake(tmp_path)
    start = threading.Barrier(8)

    def scrape():
        start.wait()
        generate_latest(registry)

    scrapes = [threading.Thread(target=scrape) for _ in range(8)]
    for thread in scrapes:
        thread.start()
    for thread in scrapes:
        thread.join()
    assert len(said(caplog)) == 1 and "sources.json" in said(caplog)[0]
