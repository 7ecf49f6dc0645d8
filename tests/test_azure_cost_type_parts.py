"""Azure cost details exported in several files (per subscription, or a big export cut in parts)
without a run manifest: `cost_type: auto` decides actual or amortized for a billing period,
not for each file, so a file holding on-demand usage only (nothing to tell the type by) is
read as the other files of its period are, and the bill is one cost, never half of each."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest

from billing_helpers import failures, ingest_files, sums
from conftest import SAMPLES
from connectors.azure_names import named_cost_type

AMORTIZED = SAMPLES / "azure" / "ea_amortized_trey_research_small.csv"
ACTUAL = SAMPLES / "azure" / "ea_actual_trey_research_small.csv"


def split(sample, folder, committed_name: str, on_demand_name: str) -> None:
    """The sample's lines of a reservation or savings plan in one file, its on-demand lines in another."""
    text = sample.read_bytes().decode("utf-8-sig")
    header, *lines = list(csv.reader(io.StringIO(text, newline="")))
    model = header.index("PricingModel")
    for name, keep in ((committed_name, lambda r: r[model] != "OnDemand"), (on_demand_name, lambda r: r[model] == "OnDemand")):
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([header] + [r for r in lines if keep(r)])
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(out.getvalue(), encoding="utf-8")


def test_an_amortized_export_in_two_files_is_all_effective_cost_though_one_file_has_on_demand_lines_only(tmp_path):
    split(AMORTIZED, tmp_path / "export", "sub-reserved/part-1.csv", "sub-payg/nested/part-2.csv")
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", tmp_path / "export"))
    assert failures(result) == []
    # read per file, the on-demand file was an actual export: billed 9.11 beside effective 7.19
    assert sums(lake, "billing_period") == [("2023-09", 28, None, Decimal("16.296932136637"))]


def test_an_on_demand_file_added_to_an_amortized_period_is_read_as_amortized_too(tmp_path):
    """The second ingest surveys the period and reads its two files as one delivery."""
    split(AMORTIZED, tmp_path / "parts", "reserved.csv", "on-demand.csv")
    export = tmp_path / "export"
    export.mkdir()
    (export / "reserved.csv").write_bytes((tmp_path / "parts" / "reserved.csv").read_bytes())
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", export))
    assert failures(result) == []
    (export / "on-demand.csv").write_bytes((tmp_path / "parts" / "on-demand.csv").read_bytes())
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", export))
    assert failures(result) == []
    assert sums(lake, "billing_period") == [("2023-09", 28, None, Decimal("16.296932136637"))]


def test_an_actual_export_in_two_files_stays_billed_cost(tmp_path):
    split(ACTUAL, tmp_path / "export", "purchases.csv", "usage.csv")
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", tmp_path / "export"))
    assert failures(result) == []
    assert sums(lake, "billing_period") == [("2023-09", 11, Decimal("8.545007786742"), None)]


def on_demand_month(folder, name: str) -> None:
    """The amortized sample's on-demand lines alone: a month of the export with no commitment line."""
    split(AMORTIZED, folder.parent / "scratch", "committed.csv", "on-demand.csv")
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes((folder.parent / "scratch" / "on-demand.csv").read_bytes())


@pytest.mark.parametrize("name, billed, effective", [
    ("DailyAmortizedCost/20230901-20230930/DailyAmortizedCost_0b7c5e9a.csv", None, Decimal("15.797780136169")),
    ("monthly-amortised/2023-09/part-0.csv", None, Decimal("15.797780136169")),
    ("MonthlyActualCost/20230901-20230930/MonthlyActualCost_0b7c5e9a.csv", Decimal("15.797780136169"), None),
    ("subscription-a/20230901-20230930/costs_0b7c5e9a.csv", Decimal("15.797780136169"), None),  # nothing tells
    # 'actual' inside another word is no name of the cost type: the amortized export's name decides
    ("factual-reports/DailyAmortizedCost/20230901-20230930/DailyAmortizedCost_0b7c5e9a.csv",
     None, Decimal("15.797780136169")),
    ("DailyAmortizedCost/20230901-20230930/nonactual_0b7c5e9a.csv", None, Decimal("15.797780136169")),
    # Azure's compounds written in one case are its names too (whole words stopped reading them)
    ("dailyamortizedcost/20230901-20230930/part_0.csv", None, Decimal("15.797780136169")),
    ("exports/monthlyactualcost/20230901-20230930/part_0.csv", Decimal("15.797780136169"), None),
    ("factualcost/AMORTIZEDCOST/20230901-20230930/part_0.csv", None, Decimal("15.797780136169")),
], ids=["export-named-amortized", "folder-named-amortised", "export-named-actual", "unnamed",
        "amortized-in-a-folder-named-factual", "amortized-in-a-file-named-nonactual",
        "export-named-dailyamortizedcost", "export-named-monthlyactualcost", "amortizedcost-below-factualcost"])
def test_a_month_without_commitment_lines_takes_the_cost_type_its_exports_name_says(tmp_path, name, billed, effective):
    # read by its rows alone, an amortized export's month of on-demand usage only was actual: BilledCost
    on_demand_month(tmp_path / "export", name)
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", tmp_path / "export"))
    assert failures(result) == []
    assert sums(lake, "billing_period") == [("2023-09", 26, billed, effective)]


@pytest.mark.parametrize("name, named", [
    ("DailyAmortizedCost/x.csv", "amortized"), ("dailyamortizedcost/x.csv", "amortized"),
    ("DAILYAMORTIZEDCOST/x.csv", "amortized"), ("monthlyactualcost/x.csv", "actual"),
    ("MonthlyActualCost_0b7c.csv", "actual"), ("weeklyactualcost/x.csv", "actual"), ("actualcost/x.csv", "actual"),
    ("AmortizedCost/x.csv", "amortized"), ("amortisedcosts/x.csv", "amortized"),
    ("monthly-amortised/x.csv", "amortized"),
    ("factual/x.csv", None), ("nonactual_0b7c.csv", None), ("factualcost/x.csv", None),
    ("nonamortizedcost/x.csv", None), ("actualcostly/x.csv", None), ("costs/x.csv", None),
    ("dailyamortizedcost/monthlyactualcost/x.csv", None),  # both: nothing told
])
def test_the_cost_type_names_are_whole_words_or_azures_compounds_in_any_case(name, named):
    """`dailyamortizedcost/`, `monthlyactualcost` (an export named in one case) gave no cost type once
    names were split into whole words; Azure's dataset and export compounds count in any case."""
    assert named_cost_type("/exports", f"/exports/{name}") == named


def test_an_actual_and_an_amortized_export_of_one_month_in_one_location_fail_naming_both(tmp_path):
    """They bill the same charges (11 of the amortized file's lines are the actual's own on-demand
    lines): read together they were committed as 39 rows, the usage twice, exit 0 (break47)."""
    export = tmp_path / "export"
    export.mkdir()
    (export / "actual.csv").write_bytes(ACTUAL.read_bytes())
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", export))
    assert failures(result) == []
    (export / "amortized.csv").write_bytes(AMORTIZED.read_bytes())
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", export))
    [failed] = result.failed
    assert failed.error.exit_code == 3
    assert f"2023-09 holds an actual and an amortized cost export: {export / 'actual.csv'} (actual) and " \
           f"{export / 'amortized.csv'} (amortized)" in str(failed.error)
    assert "give each cost type its own azure-cost source" in str(failed.error)
    # the lake keeps the month it held: the actual export's
    assert sums(lake, "billing_period") == [("2023-09", 11, Decimal("8.545007786742"), None)]
