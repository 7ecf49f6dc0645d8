"""Every real sample export reconciles: Σ attributed = Σ source per billing period and
currency, to the last decimal, with tag aliases, rules and shared splits in play."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pytest
from billing_helpers import failures, ingest_files
from conftest import SAMPLES
from test_samples import KIND_BY_FILE, SAMPLE_CASES

from service.attribution.api import attribute
from service.attribution.reconciliation import reconcile
from service.core.config import parse_config
from service.core.timewindow import Window
from tests.attribution_helpers import declared_sources

ATTRIBUTION = {
    "dimensions": {
        "team": {"tags": ["team", "org", "costcenter", "env"],
                 "rules": [{"match": {"region": "us-east-1"}, "value": "east"}]},
        "project": {"tags": ["project", "application", "app"]},
    },
    "shared": [
        {"match": {"charge_category": "Tax"}, "split": "proportional", "by": "team"},
        {"match": {"service": "AWS Support (Business)"}, "split": "even", "by": "team"},
        {"match": {"charge_category": "Credit"}, "split": "fixed", "by": "project", "weights": {"a": 0.3, "b": 0.7}},
    ],
}
EVERYTHING = Window(datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2100, 1, 1, tzinfo=timezone.utc))


@pytest.mark.parametrize("file", SAMPLE_CASES)
def test_every_sample_reconciles(tmp_path, file):
    kind = KIND_BY_FILE[file]
    lake, result = ingest_files(tmp_path, ("sample", kind, SAMPLES / file))
    assert failures(result) == []
    # ingest materialised the rollups (for the default config) before any query
    assert len(list((lake.root / "attribution_rollup").rglob("*.parquet"))) == len(lake.ledger())
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": ATTRIBUTION})
    checks = reconcile(lake, config)
    assert checks and all(check.ok for check in checks), [c for c in checks if not c.ok]
    # The ledger's totals (taken at commit) agree too, and so does a window holding everything.
    ledger = {(e.billing_period, t.currency): t.billed_cost for e in lake.ledger() for t in e.totals}
    billed = {(c.billing_period, c.currency): c.attributed_total for c in checks if c.cost == "billed"}
    assert billed == {k: v or Decimal(0) for k, v in ledger.items()}
    everything = attribute(lake, config, EVERYTHING, by=["team", "project"])
    per_currency: dict = {}
    for (_, currency), total in billed.items():
        per_currency[currency] = per_currency.get(currency, Decimal(0)) + total
    assert {currency: cost for currency, cost, _ in everything.totals} == per_currency
