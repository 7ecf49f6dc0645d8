"""`focus` on Oracle Cloud's FOCUS reports, as the usage-report bucket holds them.

Oracle writes them beside its own cost reports: `FOCUS Reports/<yyyy>/<mm>/<dd>/<n>-<part>.csv.gz`
and `reports/cost-csv/<n>-<part>.csv.gz`. The FOCUS reports keep FOCUS 1.0-preview names for
six columns (Provider, Publisher, InvoiceIssuer, Region, UsageQuantity, UsageUnit) and add
`oci_`-prefixed ones; the column list is Oracle's FOCUS report schema as OCI loaders use it.
"""

from __future__ import annotations

import gzip
from decimal import Decimal

from billing_helpers import failures, ingest_files, sums

OCI_FOCUS_COLUMNS = (
    "AvailabilityZone,BilledCost,BillingAccountId,BillingAccountName,BillingCurrency,BillingPeriodEnd,"
    "BillingPeriodStart,ChargeCategory,ChargeDescription,ChargeFrequency,ChargePeriodEnd,ChargePeriodStart,"
    "ChargeSubcategory,CommitmentDiscountCategory,CommitmentDiscountId,CommitmentDiscountName,"
    "CommitmentDiscountType,EffectiveCost,InvoiceIssuer,ListCost,ListUnitPrice,PricingCategory,PricingQuantity,"
    "PricingUnit,Provider,Publisher,Region,ResourceId,ResourceName,ResourceType,ServiceCategory,ServiceName,SkuId,"
    "SkuPriceId,SubAccountId,SubAccountName,Tags,UsageQuantity,UsageUnit,oci_ReferenceNumber,oci_CompartmentId,"
    "oci_CompartmentName,oci_OverageFlag,oci_UnitPriceOverage,oci_BilledQuantityOverage,oci_CostOverage,"
    "oci_AttributedUsage,oci_AttributedCost,oci_BackReferenceNumber")


def oci_focus_row(cost: str, hour: int, reference: str) -> str:
    return (f"US-ASHBURN-AD-1,{cost},7654321,acme,USD,2024-07-01T00:00Z,2024-06-01T00:00Z,Usage,"
            f"BM.GPU.H100.8 GPU hour,Usage-Based,2024-06-02T{hour + 1:02d}:00Z,2024-06-02T{hour:02d}:00Z,,,,,,"
            f"{cost},Oracle,{cost},10.00,Standard,8,GPU Per Hour,Oracle,Oracle,us-ashburn-1,"
            "ocid1.instance.oc1.iad.anuwc,gpu-node-1,instance,Compute,COMPUTE,B98415,B98415,"
            "ocid1.tenancy.oc1..aaaa,acme,"
            '"{""orcl-cloud.free-tier-retained"":""true"",""ml.team"":""pretrain""}",'
            f"8,GPU Hours,{reference},ocid1.compartment.oc1..cccc,training,,,,,8,{cost},")


def write_bucket(root, *, with_cost_report: bool) -> None:
    focus = root / "FOCUS Reports" / "2024" / "06" / "02"
    focus.mkdir(parents=True)
    rows = [OCI_FOCUS_COLUMNS, oci_focus_row("80.00", 0, "r1"), oci_focus_row("79.99", 1, "r2")]
    (focus / "0001000001551289-00001.csv.gz").write_bytes(gzip.compress(("\n".join(rows) + "\n").encode()))
    if with_cost_report:  # the same hours in Oracle's own format
        own = root / "reports" / "cost-csv"
        own.mkdir(parents=True)
        (own / "0001000001551289-00001.csv.gz").write_bytes(gzip.compress(
            b"lineItem/referenceNo,lineItem/tenantId,lineItem/intervalUsageStart,lineItem/intervalUsageEnd,"
            b"product/service,cost/myCost,cost/currencyCode\n"
            b"r1,ocid1.tenancy.oc1..aaaa,2024-06-02T00:00Z,2024-06-02T01:00Z,COMPUTE,80.00,USD\n"
            b"r2,ocid1.tenancy.oc1..aaaa,2024-06-02T01:00Z,2024-06-02T02:00Z,COMPUTE,79.99,USD\n"))


def test_oci_focus_report_preview_names_fill_provider_region_and_quantities(tmp_path):
    write_bucket(tmp_path / "bucket", with_cost_report=False)
    lake, result = ingest_files(tmp_path, ("oci", "focus", tmp_path / "bucket"))
    assert failures(result) == [] and [o.status for o in result.outcomes] == ["committed"]
    assert sums(lake) == [("Oracle", "USD", 2, Decimal("159.99"), Decimal("159.99"))]
    rows = lake.query().execute(
        "SELECT DISTINCT ProviderName, PublisherName, InvoiceIssuerName, RegionId, RegionName, ConsumedQuantity, "
        "ConsumedUnit, Tags FROM costs").fetchall()
    assert rows == [("Oracle", "Oracle", "Oracle", "us-ashburn-1", "us-ashburn-1", Decimal(8), "GPU Hours",
                     {"orcl-cloud.free-tier-retained": "true", "ml.team": "pretrain"})]


def test_oci_own_cost_reports_beside_the_focus_reports_are_skipped_naming_oci_cost(tmp_path):
    """`focus` pointed at the whole bucket: Oracle's own cost reports hold the same costs in
    another format, so they are skipped with one line (not a failure every run)."""
    write_bucket(tmp_path / "bucket", with_cost_report=True)
    lake, result = ingest_files(tmp_path, ("oci", "focus", tmp_path / "bucket"))
    assert failures(result) == []
    assert sorted(o.status for o in result.outcomes) == ["committed", "skipped"]
    [skipped] = [o for o in result.outcomes if o.status == "skipped"]
    assert skipped.delivery.files[0].endswith("reports/cost-csv/0001000001551289-00001.csv.gz")
    assert "kind oci-cost reads it" in skipped.note
    assert sums(lake) == [("Oracle", "USD", 2, Decimal("159.99"), Decimal("159.99"))]
