"""Issue 17.1: a lake written before the cost table kept every FOCUS column still answers every
query, beside partitions with the new columns, until the next ingest rewrites it."""

from __future__ import annotations

import os
from dataclasses import replace
from decimal import Decimal

import pytest

from billing_helpers import failures, ingest_files, sums
from conftest import SAMPLES

from service.attribution.reconciliation import reconcile
from service.core.config import parse_config
from service.core.integrity import sha256_file
from service.core.lake import Lake
from service.core.parquet_footer import read_footer
from service.core.schema import COST_COLUMN_NAMES
from service.ingest.billing import ingest
from tests.attribution_helpers import declared_sources

# The cost table as it was: 35 columns, ConsumedQuantity a DOUBLE.
OLD_COLUMNS = (
    "BillingAccountId", "BillingAccountName", "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart",
    "ChargePeriodEnd", "BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "BillingCurrency",
    "ChargeCategory", "ChargeClass", "ChargeDescription", "ProviderName", "ServiceName", "ServiceCategory",
    "ResourceId", "ResourceName", "ResourceType", "RegionId", "AvailabilityZone", "SubAccountId", "SubAccountName",
    "SkuId", "PricingCategory", "ConsumedQuantity", "ConsumedUnit", "InvoiceId", "Tags", "x_line_item_type",
    "x_usage_type", "x_instance_type", "x_operation", "x_credits",
)
CUR = ("cur", "aws-cur", SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv")
FOCUS = ("focus", "focus", SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv")


def make_old(lake: Lake, source: str) -> None:
    """Rewrite `source`'s partitions as an older spendlake wrote them (and its ledger to match)."""
    con = lake.connect()
    for entry in [e for e in lake.ledger() if e.source == source]:
        path = lake.partition_file("costs", [("source", source), ("billing_period", entry.billing_period)])
        columns = ", ".join(f'CAST("{c}" AS DOUBLE) AS "{c}"' if c == "ConsumedQuantity" else f'"{c}"'
                            for c in OLD_COLUMNS)
        old = path.with_name("old.parquet.tmp")
        con.execute(f"COPY (SELECT {columns} FROM read_parquet(?)) TO '{old}' (FORMAT parquet)", [str(path)])
        os.replace(old, path)
        lake.record([replace(entry, size=path.stat().st_size, sha256=sha256_file(path))])
    con.close()


@pytest.mark.slow
def test_old_partitions_union_with_new_ones_until_the_next_ingest_rewrites_them(tmp_path):
    lake, result = ingest_files(tmp_path, CUR, FOCUS)
    assert failures(result) == []
    before = sums(lake)
    make_old(lake, "cur")
    cur_file = lake.partition_file("costs", [("source", "cur"), ("billing_period", "2023-11")])
    assert read_footer(cur_file).columns == OLD_COLUMNS

    # every query reads both: the old partition's new columns are NULL, its types the new ones
    assert sums(lake) == before
    con = lake.query()
    assert con.execute("SELECT source, count(PricingUnit), typeof(any_value(ConsumedQuantity)) FROM costs "
                       "GROUP BY 1 ORDER BY 1").fetchall() == [("cur", 0, "DECIMAL(38,16)"),
                                                                ("focus", 1000, "DECIMAL(38,16)")]
    assert con.execute("SELECT sum(ConsumedQuantity) FROM costs WHERE source = 'cur' "
                       "AND x_usage_type = 'USW2-Requests-Tier3'").fetchone()[0] > 0
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake)})
    checks = reconcile(lake, config)
    assert checks and all(c.ok for c in checks)
    # verify's deep check (tag keys and usage end against the ledger) passes an old partition and its entry
    assert [(c.source, c.state) for c in lake.verify(record=False)] == [("cur", "ok"), ("focus", "ok")]

    # the next ingest rewrites the old partition (same delivery, new columns); the one after is a no-op
    config = parse_config({"lake": str(lake.root), "sources": [
        {"name": n, "kind": k, "location": str(p)} for n, k, p in (CUR, FOCUS)]})
    again = ingest(config)
    assert {o.source: o.status for o in again.outcomes} == {"cur": "committed", "focus": "unchanged"}
    assert read_footer(cur_file).columns == COST_COLUMN_NAMES
    assert sums(lake) == before
    assert lake.query().execute("SELECT count(PricingUnit) FROM costs WHERE source = 'cur'").fetchone()[0] == 1269
    assert [o.status for o in ingest(config).outcomes] == ["unchanged", "unchanged"]
    assert sum(t.billed_cost for e in lake.ledger() if e.source == "cur" for t in e.totals) == Decimal("1.6823086974")
