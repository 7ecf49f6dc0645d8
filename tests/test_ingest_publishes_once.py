"""An ingest run is one change of the lake (RELIABILITY 43): its deliveries are staged first
and put in place together, so a reader never sees some new periods beside others still old
(a re-delivered October and November read as the new October with the old November)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from connectors.focus import FocusConnector
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest import billing

HEADER = "BilledCost,EffectiveCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd,ChargeCategory\n"


def write_month(export: Path, month: str, cost: str) -> None:
    (export / f"{month}.csv").write_text(
        HEADER + f"{cost},{cost},USD,{month}-01T00:00:00Z,{month}-02T00:00:00Z,{month}-02T01:00:00Z,Usage\n")


def lake_total(lake: Lake) -> Decimal:
    return sum((t.billed_cost for e in lake.ledger() for t in e.totals), Decimal(0))


@pytest.fixture
def two_months(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "bill", "kind": "focus", "location": str(export)}]})
    for month, cost in (("2026-10", "100"), ("2026-11", "10")):
        write_month(export, month, cost)
    assert not billing.ingest(config).failed
    return config, export, Lake.of(config)


def test_43_a_reader_between_two_deliveries_of_one_run_sees_the_old_lake(two_months, monkeypatch):
    config, export, lake = two_months
    assert lake_total(lake) == Decimal(110)
    for month, cost in (("2026-10", "200"), ("2026-11", "20")):
        write_month(export, month, cost)
    seen: list[Decimal] = []
    read = FocusConnector.read

    def reading(self, delivery, *args, **kwargs):
        seen.append(lake_total(lake))  # what a reader sees while the run reads each delivery
        return read(self, delivery, *args, **kwargs)

    monkeypatch.setattr(FocusConnector, "read", reading)
    result = billing.ingest(config)
    assert [o.status for o in result.outcomes] == ["committed", "committed"]
    assert len(seen) >= 2 and set(seen) == {Decimal(110)}  # never 200 + 10
    assert lake_total(lake) == Decimal(220)
    assert not list(lake.staging.glob("costs-*"))  # nothing staged is left behind


def test_a_delivery_that_fails_fails_alone_and_the_others_are_published(two_months):
    config, export, lake = two_months
    write_month(export, "2026-10", "300")
    (export / "2026-11.csv").write_text(HEADER + "not a number,1,USD,2026-11-01T00:00:00Z,x,y,Usage\n")
    result = billing.ingest(config)
    assert sorted(o.status for o in result.outcomes) == ["committed", "failed"]
    assert {e.billing_period: e.totals[0].billed_cost for e in lake.ledger()} == {
        "2026-10": Decimal(300), "2026-11": Decimal(10)}  # November keeps its previous delivery


def test_a_failed_publish_fails_every_staged_delivery_and_keeps_the_lake(two_months, monkeypatch):
    from service.core.errors import SpendlakeError

    config, export, lake = two_months
    for month, cost in (("2026-10", "400"), ("2026-11", "40")):
        write_month(export, month, cost)

    def disk_full(lake, staged):
        raise SpendlakeError("cannot write the lake: No space left on device", where=str(lake.root))

    monkeypatch.setattr(billing, "publish_costs", disk_full)
    result = billing.ingest(config)
    assert [o.status for o in result.outcomes] == ["failed", "failed"]
    assert all("No space left" in str(o.error) for o in result.outcomes)
    assert lake_total(lake) == Decimal(110)
    assert lake.read_state("sources")["bill"]["failures_total"] == 1
