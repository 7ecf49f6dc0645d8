"""An Azure bill held by two `azure-cost` sources, one per cost type (README's advice: the actual
export's source holds BilledCost, the amortized export's EffectiveCost, of the same charges), is
exported with each cost counted once: a line's missing cost is filled from its other cost only
where no other source holds that cost for its billing account and period, else it is 0."""

from __future__ import annotations

import csv
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


def reference(name: str, column: str) -> Decimal:
    """The sample's cost in the samples' reference_sums.csv (computed from the raw file)."""
    with (SAMPLES / "reference_sums.csv").open(newline="") as handle:
        return next(Decimal(row[column]) for row in csv.DictReader(handle) if row["file"] == f"azure/{name}")


def measures(out, where: str = "true") -> tuple:
    """(ConsumedQuantity, PricingQuantity, ListCost, ContractedCost, BilledCost, EffectiveCost) summed."""
    [found] = duckdb.sql(f"SELECT sum(ConsumedQuantity), sum(PricingQuantity), sum(ListCost), sum(ContractedCost), "
                         f"sum(BilledCost), sum(EffectiveCost) FROM read_parquet('{out}/*/cost_and_usage.parquet') "
                         f"WHERE {where}").fetchall()
    return found


def test_two_sources_of_one_azure_bill_count_each_usage_lines_quantities_and_list_and_contracted_cost_once(tmp_path):
    """Both exports list the same usage (the actual export's 10 usage lines are among the amortized
    export's 28): exported as two sources, ConsumedQuantity was 238.43 (54.07 + 185.36), each usage line's
    list and contracted cost twice. The usage counts on the amortized export's lines, as the effective
    cost's; the purchase (the amortized export has none) on the actual export's; the costs are the
    invoice's and the amortized bill's, to the cent (reference_sums.csv)."""
    _, both = exported(tmp_path / "both", ("azea", "azure-cost", ACTUAL), ("azeam", "azure-cost", AMORTIZED))
    _, amortized = exported(tmp_path / "amortized", ("azeam", "azure-cost", AMORTIZED))
    _, actual = exported(tmp_path / "actual", ("azea", "azure-cost", ACTUAL))
    usage, purchases = measures(amortized), measures(actual, "ChargeCategory <> 'Usage'")
    expected = tuple(u + (p or 0) for u, p in zip(usage[:4], purchases[:4]))
    assert measures(both)[:4] == expected
    [(quantity,)] = duckdb.sql(f"SELECT sum(CAST(Quantity AS DECIMAL(38, 16))) FROM read_csv('{AMORTIZED}', "
                               "all_varchar = true) WHERE ChargeType = 'Usage'").fetchall()
    assert measures(both)[0] == quantity  # the usage once, as the amortized export lists it
    assert measures(both, "x_source = 'azea' AND ChargeCategory = 'Usage'")[:4] == (0, 0, 0, 0)
    assert measures(both)[4:] == (reference(ACTUAL.name, "billed"), reference(AMORTIZED.name, "effective"))
