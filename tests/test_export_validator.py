"""`spendlake export --format focus` judged by the FinOps Foundation's focus-validator (2.2.1, rule
model 1.2.0.1, offline, tests/focus_validator.py): no rule fails on the export of a FOCUS file
that does not fail on the provider's own file in the same run, and the exports of the other
kinds (AWS CUR, GCP, Azure EA) and of the demo organisation fail no Mandatory rule. Under
CI=true a missing validator fails these tests (never skips)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from billing_helpers import failures, ingest_files
from conftest import SAMPLES
from test_focus_oci import write_bucket

from service.export import ExportOptions, export_focus
from tests.focus_validator import executable, unexplained_failures, validate_once

TOOLKIT = Path(__file__).parent / "data" / "focus-toolkit" / "generate"
FOCUS_FILES = {
    "focus10": SAMPLES / "focus" / "focus_1.0_sample_1000.csv",
    "azure-focus10": SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv",
    "toolkit-azure12": TOOLKIT / "azure-1.2" / "focus_1_2_cost_and_usage_azure.csv.gz",
    "toolkit-aws12": TOOLKIT / "aws-1.2" / "focus_1_2_cost_and_usage_aws.csv.gz",
}
OTHER_KINDS = {
    "cur": ("aws-cur", SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv"),
    "gcp": ("gcp-billing", SAMPLES / "gcp" / "koku_gcp_detailed_export_2022-08-01.csv"),
    "gcp-standard": ("gcp-billing", SAMPLES / "gcp" / "koku_gcp_standard_export_202011.csv"),
    "azure": ("azure-cost", SAMPLES / "azure" / "ea_actual_anonymous_sample.csv"),
    "azure-trey": ("azure-cost", SAMPLES / "azure" / "ea_actual_trey_research_small.csv"),
    "azure-amortized": ("azure-cost", SAMPLES / "azure" / "ea_amortized_trey_research_small.csv"),
}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """Every sample (and two toolkit files) in one lake; its Config."""
    executable()  # fail (CI) or skip before the ingest when there is no validator
    tmp = tmp_path_factory.mktemp("validated")
    sources = [(name, "focus", path) for name, path in FOCUS_FILES.items()]
    sources += [(name, kind, path) for name, (kind, path) in OTHER_KINDS.items()]
    lake, result = ingest_files(tmp, *sources)
    assert failures(result) == []
    from service.core.config import parse_config
    return parse_config({"lake": str(lake.root), "sources": [
        {"name": name, "kind": kind, "location": str(path)} for name, kind, path in sources]})


def exported(config, out: Path, *sources: str) -> Path:
    result = export_focus(config, ExportOptions(str(out), sources=sources))
    assert result.periods
    return out


@pytest.mark.parametrize("source", list(FOCUS_FILES))
def test_the_export_of_a_focus_file_fails_no_rule_its_source_does_not(samples, tmp_path, source):
    original = validate_once(FOCUS_FILES[source])
    export = validate_once(exported(samples, tmp_path / "out", source))
    new = {rule.id: (rule.violations, rule.message) for rule in export.failures()
           if rule.id not in original.failed_ids}
    assert new == {}
    assert export.count("PASS") >= original.count("PASS")


def test_the_exports_of_cur_gcp_and_azure_fail_no_mandatory_rule(samples, tmp_path):
    # One dataset of every non-FOCUS sample: a row rule failing on any of them fails here.
    report = validate_once(exported(samples, tmp_path / "out", *OTHER_KINDS))
    assert unexplained_failures(report, "Mandatory") == []
    assert report.rules["InvoiceId-C-003-C"].status == "PASS"  # no sample carries an invoice id yet
    assert [rule.id for rule in report.failures()] == ["InvoiceId-C-005-C"]  # the OR's other branch


def test_the_export_of_the_demo_organisation_fails_no_mandatory_rule(demo_run, tmp_path):
    out = tmp_path / "out"
    export_focus(demo_run.config, ExportOptions(str(out)))
    periods = sorted(p for p in out.iterdir() if p.name != "metadata")
    assert len(periods) == 2  # a closed, invoiced month and an open one
    for period in periods:
        data = period / "cost_and_usage.parquet"
        report = validate_once(data)
        # Support is a Purchase that covers no future charge, so its EffectiveCost is its
        # cost; the validator's model checks "EffectiveCost is 0 on a Purchase" without the
        # specification's condition ("intended to cover future eligible charges").
        [(support_fees,)] = duckdb.sql(
            f"SELECT count(*) FROM '{data}' WHERE ChargeCategory = 'Purchase' AND CommitmentDiscountId IS NULL "
            "AND EffectiveCost <> 0").fetchall()
        left = {rule.id: rule.violations for rule in unexplained_failures(report, "Mandatory")}
        assert left == ({"EffectiveCost-C-005-C": str(support_fees)} if support_fees else {}), period.name
        assert report.rules["InvoiceId-C-003-C"].status == "PASS", period.name


def test_the_demo_export_with_attribution_fails_no_rule_the_plain_export_does_not(demo_run, tmp_path):
    # The demo's p5 cluster: its instance lines become hourly job and idle parts (their own
    # ChargePeriodStart/End, split costs and quantities, x_Allocated* columns in FOCUS 1.2).
    plain = export_focus(demo_run.config, ExportOptions(str(tmp_path / "plain")))
    attributed = export_focus(demo_run.config, ExportOptions(str(tmp_path / "attributed"), attribution=True))
    assert [p.period for p in attributed.periods] == [p.period for p in plain.periods]
    for period in attributed.periods:
        data = Path(period.location) / "cost_and_usage.parquet"
        [(parts,)] = duckdb.sql(f"SELECT count(*) FROM '{data}' WHERE x_AllocatedMethodId = "
                                "'spendlake-cluster-gpu-time'").fetchall()
        assert parts > 0, period.period
        sums = ("SELECT BillingCurrency, sum(BilledCost), sum(EffectiveCost), sum(ListCost), sum(ConsumedQuantity) "
                "FROM '{}' GROUP BY ALL ORDER BY ALL")
        plain_data = tmp_path / "plain" / period.period / "cost_and_usage.parquet"
        assert duckdb.sql(sums.format(data)).fetchall() == duckdb.sql(sums.format(plain_data)).fetchall()  # ties out
        before = validate_once(plain_data)
        after = validate_once(data)
        new = {rule.id: rule.violations for rule in after.failures() if rule.id not in before.failed_ids}
        assert new == {}, period.period


def test_the_export_of_an_oracle_focus_report_fails_no_mandatory_rule(tmp_path):
    """Oracle's FOCUS reports name ProviderName, PublisherName and InvoiceIssuerName by their
    FOCUS 1.0-preview names: read under the 1.0 names, the export has them (Mandatory, not null)."""
    executable()
    write_bucket(tmp_path / "bucket", with_cost_report=False)
    lake, result = ingest_files(tmp_path, ("oci", "focus", tmp_path / "bucket"))
    assert failures(result) == []
    from service.core.config import parse_config
    config = parse_config({"lake": str(lake.root), "sources": [
        {"name": "oci", "kind": "focus", "location": str(tmp_path / "bucket")}]})
    report = validate_once(exported(config, tmp_path / "out", "oci"))
    assert unexplained_failures(report, "Mandatory") == []


def test_under_every_applicability_criterion_the_exports_fail_only_where_the_bill_names_nothing(samples, tmp_path):
    # --applicability-criteria ALL: the Azure EA exports name their resource, billing and sub
    # account types, the CUR's its SKU meters. Left: the validator's own gaps
    # (tests/data/focus-toolkit/NOTES.md), no invoice id in any sample, AWS's account type names
    # (not known here: 1,281 CUR lines), GCP's meters (34 lines) and its anonymised '//example'
    # resource (9 lines), from which no type can be read.
    report = validate_once(exported(samples, tmp_path / "out", *OTHER_KINDS), criteria="ALL")
    failed = {rule.id: rule.violations for rule in report.failures() if rule.function != "Composite"}
    validator_gaps = {"CapacityReservationStatus-C-004-C", "CommitmentDiscountStatus-C-004-C", "InvoiceId-C-005-C"}
    assert {rule: n for rule, n in failed.items() if rule not in validator_gaps} == {
        "BillingAccountType-C-005-C": "1281", "SubAccountType-C-005-C": "1281", "SkuMeter-C-005-C": "34",
        "ResourceType-C-005-C": "9"}
