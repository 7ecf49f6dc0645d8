"""An Azure bill held by two `azure-cost` sources, one per cost type (README's advice: the actual
export's source holds BilledCost, the amortized export's EffectiveCost, of the same charges), is
exported with each cost counted once: a line's missing cost is filled from its other cost only
where no other source holds that cost for its billing account and period, else it is 0."""

from __future__ import annotations

from decimal import Decimal

import duckdb

from billing_helpers import failures, ingest_files, sums
from conftest import SAMPLES

from service.core.config import parse_config
from service.export import ExportOptions, export_focus

ACTUAL = SAMPLES / "azure" / "ea_actual_trey_research_small.csv"
AMORTIZED = SAMPLES / "azure" / "ea_amortized_trey_research_small.csv"
BILLED, EFFECTIVE = Decimal("8.545007786742"), Decimal("16.296932136637")  # the samples' own sums


def exported(tmp_path, *sources):
    """The FOCUS export of a lake of `sources` ((name, kind, location)): its folder."""
    lake, result = ingest_files(tmp_path, *sources)
    assert failures(result) == []
    config = parse_config({"lake": str(lake.root),
                           "sources": [{"name": n, "kind": k, "location": str(loc)} for n, k, loc in sources]})
    out = tmp_path / "out"
    export_focus(config, ExportOptions(str(out), version="1.2", since=None, until=None, sources=()))
    return lake, out


def test_two_sources_of_one_azure_bills_costs_export_each_cost_once_and_read_back_as_the_lakes(tmp_path):
    """Each source's missing cost was filled from its other: BilledCost 24.342787922911 (the
    amortized export's lines billed 15.797780136169 besides the invoice's 8.545007786742),
    EffectiveCost 21.591939923379 (the actual export's lines 5.295007786742 besides the amortized
    16.296932136637); read back, the inflated figures were the lake's (break47)."""
    lake, out = exported(tmp_path / "a", ("azea", "azure-cost", ACTUAL), ("azeam", "azure-cost", AMORTIZED))
    assert sums(lake, "billing_period") == [("2023-09", 39, BILLED, EFFECTIVE)]
    back, result = ingest_files(tmp_path / "b", ("back", "focus", out))
    assert failures(result) == []
    per_source = duckdb.sql(f"SELECT x_source, count(*), sum(BilledCost), sum(EffectiveCost) FROM "
                            f"read_parquet('{out}/*/cost_and_usage.parquet') GROUP BY ALL ORDER BY ALL").fetchall()
    # the actual export's lines bill what they bill, their effective cost the amortized export's lines'
    assert per_source == [("azea", 11, BILLED, 0), ("azeam", 28, 0, EFFECTIVE)]
    assert sums(back, "billing_period") == [("2023-09", 39, BILLED, EFFECTIVE)]


def test_one_source_of_an_azure_bill_still_fills_the_cost_its_export_lacks(tmp_path):
    """FOCUS wants both costs on every line: with no other source of the bill, an actual export's
    line is effective at its billed cost (a purchase at 0); the sum is its bill."""
    lake, out = exported(tmp_path / "a", ("azea", "azure-cost", ACTUAL))
    back, result = ingest_files(tmp_path / "b", ("back", "focus", out))
    assert failures(result) == []
    [(purchases,)] = lake.query().execute("SELECT sum(BilledCost) FROM costs "
                                          "WHERE ChargeCategory = 'Purchase'").fetchall()
    assert purchases > 0  # the sample's reservation purchase
    assert sums(back, "billing_period") == [("2023-09", 11, BILLED, BILLED - purchases)]
