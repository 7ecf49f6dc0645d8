"""The budget series last read are stored (`_state/metrics_last_good.json`) as the service's loop
ends: the loop stored them only when no scrape held the collector, so a SIGHUP or SIGTERM just
after a scrape under load left them unstored and a restart on a damaged lake showed no budgets
(test_a_sighup_on_a_damaged_lake_keeps_the_last_good_budget_series failed at that file)."""

from __future__ import annotations

import threading

from servicekit import commit, write_config

from service.core.config import load_config
from service.core.lake import Lake
from service.serve.metrics import LakeCollector


def test_the_loop_end_stores_the_budgets_a_scrape_holding_the_collector_read(tmp_path):
    (tmp_path / "export").mkdir()
    config = load_config(str(write_config(tmp_path, {
        "lake": str(tmp_path / "lake"), "service": {"listen": "127.0.0.1:0"},
        "sources": [{"name": "cur", "kind": "focus", "location": str(tmp_path / "export")}],
        "budgets": [{"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": "20"}]})))
    lake = Lake(tmp_path / "lake")
    commit(lake, "cur", [("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "24", {"team": "nlp"})])
    collector = LakeCollector(config)
    list(collector.collect())  # a scrape read the budgets
    stored = tmp_path / "lake" / "_state" / "metrics_last_good.json"
    collector._lock.acquire()  # another scrape computes
    collector.keep_last_good()  # the loop's turn: skipped, it never waits for a scrape
    assert not stored.exists()
    threading.Timer(0.5, collector._lock.release).start()
    collector.keep_last_good(wait=True)  # the loop ends: waits for the scrape, then stores
    assert '"nlp-monthly"' in stored.read_text(encoding="utf-8")
