"""The FinOps Foundation's focus-validator (2.2.1, rule model 1.2.0.1, offline) as the judge of
FOCUS files: its verdict on the provider files we ship is pinned here, so an export can later
be held to "no rule fails that does not fail on the provider's own file"."""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import duckdb
import pytest

from tests.conftest import SAMPLES
from tests.focus_validator import single_file, validate, validate_once

TOOLKIT = Path(__file__).parent / "data" / "focus-toolkit"
AZURE_12 = TOOLKIT / "generate" / "azure-1.2" / "focus_1_2_cost_and_usage_azure.csv.gz"

# Failed rule id -> violations as reported, and the (pass, fail, skipped) counts, default criteria.
BASELINE = {
    SAMPLES / "focus" / "focus_1.0_sample_1000.csv": ((114, 23, 441), {
        "BilledCost-C-000-M": "1", "BilledCost-C-005-C": "615", "ContractedCost-C-000-M": "1",
        "ContractedCost-C-003-M": "7", "ContractedCost-C-004-M": "7", "CostAndUsage-D-033-O": "1",
        "CostAndUsage-D-042-O": "1", "InvoiceId-C-000-O": "1", "InvoiceId-C-001-M": "1", "InvoiceId-C-002-M": "1",
        "InvoiceId-C-003-C": "0", "InvoiceId-C-004-C": "1", "InvoiceId-C-005-C": "1", "PricingUnit-C-000-M": "1",
        "PricingUnit-C-003-O": "9", "ServiceName-C-000-M": "1", "ServiceName-C-004-C": "1",
        "ServiceName-C-005-C": "1", "ServiceName-C-007-C": "1", "ServiceName-C-008-C": "1",
        "ServiceSubcategory-C-000-O": "1", "ServiceSubcategory-C-001-M": "1", "ServiceSubcategory-C-002-M": "1"}),
    SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv": ((119, 18, 441), {
        "CostAndUsage-D-033-O": "1", "CostAndUsage-D-042-O": "1", "InvoiceId-C-000-O": "1", "InvoiceId-C-001-M": "1",
        "InvoiceId-C-002-M": "1", "InvoiceId-C-003-C": "0", "InvoiceId-C-004-C": "1", "InvoiceId-C-005-C": "1",
        "PublisherName-C-000-M": "1", "PublisherName-C-003-M": "4", "ServiceName-C-000-M": "1",
        "ServiceName-C-004-C": "1", "ServiceName-C-005-C": "4", "ServiceName-C-007-C": "1",
        "ServiceName-C-008-C": "1", "ServiceSubcategory-C-000-O": "1", "ServiceSubcategory-C-001-M": "1",
        "ServiceSubcategory-C-002-M": "1"}),
    # FOCUS 1.2 as focus-data-toolkit generates it: only two rules fail.
    AZURE_12: ((135, 2, 441), {"EffectiveCost-C-005-C": "5", "InvoiceId-C-004-C": "150"}),
}

report_of = validate_once  # one run per file for the session, shared with tests/test_export_validator.py


@pytest.mark.slow
@pytest.mark.parametrize("path", list(BASELINE), ids=lambda p: p.name)
def test_validator_baseline_per_file(path):
    counts, failed = BASELINE[path]
    report = report_of(path)
    assert {rule.id: rule.violations for rule in report.failures()} == failed
    assert (report.count("PASS"), report.count("FAIL"), report.count("SKIPPED")) == counts


@pytest.mark.slow
def test_levels_come_from_the_rule_keywords():
    report = report_of(SAMPLES / "focus" / "focus_1.0_sample_1000.csv")
    assert report.rules["ContractedCost-C-003-M"].keyword == "MUST NOT"
    assert report.rules["PricingUnit-C-003-O"].level == "Recommended"
    assert {rule.id for rule in report.failures("Recommended")} == {
        "CostAndUsage-D-033-O", "CostAndUsage-D-042-O", "InvoiceId-C-000-O", "PricingUnit-C-003-O",
        "ServiceName-C-007-C", "ServiceName-C-008-C", "ServiceSubcategory-C-000-O"}
    assert len(report.failures("Mandatory")) == 16


@pytest.mark.slow
def test_a_broken_copy_fails_the_rules_it_breaks(tmp_path):
    rows = list(csv.DictReader(io.StringIO(gzip.decompress(AZURE_12.read_bytes()).decode())))
    usage = [row for row in rows if row["ChargeCategory"] == "Usage" and row["PricingUnit"]]
    for row in usage[:4]:
        row["BilledCost"] = ""  # MUST NOT be null
    for row in usage[10:12]:
        row["PricingUnit"] = "per-hour!"  # SHOULD follow the unit format
    broken = tmp_path / "broken.csv"
    with broken.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    report = validate(broken)

    new = {rule.id: (rule.level, rule.violations) for rule in report.failures()
           if rule.id not in BASELINE[AZURE_12][1]}
    assert new == {"BilledCost-C-003-M": ("Mandatory", "4"), "BilledCost-C-000-M": ("Mandatory", "1"),
                   "PricingUnit-C-003-O": ("Recommended", "2"), "PricingUnit-C-000-M": ("Mandatory", "1")}
    assert "NULL" in report.rules["BilledCost-C-003-M"].message
    assert BASELINE[AZURE_12][1].keys() <= report.failed_ids


def test_a_hive_folder_is_validated_as_one_dataset(tmp_path):
    folder = TOOLKIT / "duckdb" / "aws-1.2-hive-subaccount"
    merged = single_file(folder, tmp_path)
    rows = duckdb.sql(f"SELECT count(*), count(DISTINCT SubAccountId), sum(BilledCost) FROM '{merged}'").fetchall()[0]
    assert rows[:2] == (150, 4)
    assert str(rows[2]).startswith("4755.245636833797")  # reference_sums.csv, this folder


def test_a_csv_gz_file_is_unpacked_for_the_validator(tmp_path):
    plain = single_file(AZURE_12, tmp_path)
    assert plain.suffix == ".csv" and plain.read_bytes() == gzip.decompress(AZURE_12.read_bytes())
