"""Issue 17.1, keep what the bill says: every FOCUS 1.2 column and the 1.3 additions, filled by
each connector from its provider's own columns. Expected values were read by hand from the
source rows (quoted in each test), not from the connector's output."""

from __future__ import annotations

import gzip
from datetime import datetime
from decimal import Decimal

import duckdb
from billing_helpers import failures, ingest_files
from conftest import DATA, SAMPLES

from service.core.schema import COST_COLUMN_NAMES, FOCUS_1_2_COLUMNS, FOCUS_1_3_ADDITIONS, FOCUS_1_4_ADDITIONS
from tests.aws_exports import LEGACY_COLUMNS, legacy_csv, line, local_put, write_cur2

TOOLKIT = DATA / "focus-toolkit" / "generate"


def rows_of(lake, where: str, *columns: str, params=()):
    return lake.query().execute(f"SELECT {', '.join(columns)} FROM costs WHERE {where} ORDER BY ALL",
                                list(params)).fetchall()


def test_the_cost_table_holds_every_focus_1_2_column_and_the_1_3_and_1_4_additions():
    assert len(FOCUS_1_2_COLUMNS) == 57 and len(FOCUS_1_3_ADDITIONS) == 8 and len(FOCUS_1_4_ADDITIONS) == 2
    for path in (TOOLKIT / "aws-1.2" / "focus_1_2_cost_and_usage_aws.csv.gz",
                 TOOLKIT / "aws-1.3" / "focus_1_3_cost_and_usage_aws.csv.gz"):
        header = gzip.decompress(path.read_bytes()).decode().splitlines()[0].split(",")
        assert set(header) <= set(COST_COLUMN_NAMES), set(header) - set(COST_COLUMN_NAMES)
    # README: the focus kind reads FOCUS 1.0–1.4: every FOCUS 1.4 cost file focus-data-toolkit wrote
    converted = sorted((TOOLKIT.parent / "convert").glob("*/*focus_1_4_cost_and_usage*"))
    assert len(converted) == 5  # a CSV, two Parquet files, two Hive folders of Parquet
    for path in converted:
        reader = "read_csv" if path.suffix == ".csv" else "read_parquet"
        files = f"{path}/**/*.parquet" if path.is_dir() else path
        header = {name for (name, *_) in duckdb.sql(f"DESCRIBE SELECT * FROM {reader}('{files}', "
                                                    "hive_partitioning = false)").fetchall()}
        assert {n for n in header if not n.startswith("x_")} <= set(COST_COLUMN_NAMES), path


def test_legacy_cur_sample_fills_pricing_sku_issuer_and_frequency(tmp_path):
    # The sample's line of 2023-11-06 00:00, USW2-Requests-Tier3: UsageAmount 5547.0, pricing/unit
    # Requests, pricing/publicOnDemandRate 3.0E-5, lineItem/UnblendedRate 3.0E-5 (5547 × 0.00003 =
    # 0.16641, its UnblendedCost), pricing/RateCode U8V4X58RU4DNRxxx.xxxxxxxxxx.xxx6EN2CT7,
    # product/sku U8V4XxxxxxxNRDCY, product/location US West (Oregon), bill/InvoicingEntity and
    # lineItem/LegalEntity "Amazon Web Services Canada, Inc.", pricing/currency USD.
    lake, result = ingest_files(tmp_path, ("cur", "aws-cur", SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv"))
    assert failures(result) == []
    got = rows_of(lake, "x_usage_type = 'USW2-Requests-Tier3' AND ChargePeriodStart = TIMESTAMP '2023-11-06 00:00:00'",
                  "BilledCost", "PricingQuantity", "PricingUnit", "ListUnitPrice", "ContractedUnitPrice", "SkuPriceId",
                  "SkuId", "RegionName", "InvoiceIssuerName", "PublisherName", "PricingCurrency", "ChargeFrequency",
                  "ServiceProviderName", "CommitmentDiscountId", "CapacityReservationId")
    assert got == [(Decimal("0.16641"), Decimal(5547), "Requests", Decimal("0.00003"), Decimal("0.00003"),
                    "U8V4X58RU4DNRxxx.xxxxxxxxxx.xxx6EN2CT7", "U8V4XxxxxxxNRDCY", "US West (Oregon)",
                    "Amazon Web Services Canada, Inc.", "Amazon Web Services Canada, Inc.", "USD", "Usage-Based",
                    "AWS", None, None)]
    # its 12 Tax lines are one-time charges
    assert rows_of(lake, "ChargeCategory = 'Tax'", "ChargeFrequency") == [("One-Time",)] * 12


COMMITMENT_COLUMNS = LEGACY_COLUMNS + [
    "savingsPlan/SavingsPlanARN", "reservation/ReservationARN", "reservation/UnusedQuantity",
    "pricing/publicOnDemandRate", "lineItem/UnblendedRate", "lineItem/NetUnblendedRate"]
SP = "arn:aws:savingsplans::012345678901:savingsplan/3f7c2a10-sp"
RI = "arn:aws:ec2:us-east-1:012345678901:reserved-instances/7a1b2c3d-ri"
CR = "arn:aws:ec2:us-east-1:000123456789:capacity-reservation/cr-0abc123def4567890"


def test_cur_commitments_and_on_demand_capacity_reservations(tmp_path):
    rows = [
        line(cost="3", kind="SavingsPlanCoveredUsage", savingsPlan__SavingsPlanARN=SP,
             savingsPlan__SavingsPlanEffectiveCost="2.5"),
        line(cost="-3", kind="SavingsPlanNegation", savingsPlan__SavingsPlanARN=SP),
        line(cost="7", kind="SavingsPlanRecurringFee", savingsPlan__SavingsPlanARN=SP,
             savingsPlan__TotalCommitmentToDate="7", savingsPlan__UsedCommitment="6.25"),
        line(cost="0", kind="DiscountedUsage", reservation__ReservationARN=RI, reservation__EffectiveCost="1.75",
             lineItem__UsageAmount="1.0"),
        line(cost="5", kind="RIFee", reservation__ReservationARN=RI, reservation__UnusedQuantity="24",
             reservation__UnusedRecurringFee="1.2", lineItem__UsageType="HeavyUsage:p5.48xlarge"),
        line(cost="98.32", lineItem__UsageType="USE1-UnusedBox:p5.48xlarge", lineItem__ResourceId=CR),
        line(cost="0", lineItem__UsageType="USE1-Reservation:p5.48xlarge", lineItem__ResourceId=CR),
        line(cost="98.32", pricing__publicOnDemandRate="98.32", lineItem__UnblendedRate="98.32",
             lineItem__NetUnblendedRate="93.404"),
    ]
    export = tmp_path / "cur.csv"
    export.write_bytes(legacy_csv(rows, COMMITMENT_COLUMNS))
    lake, result = ingest_files(tmp_path, ("cur", "aws-cur", export))
    assert failures(result) == []
    got = {r[0]: r[1:] for r in rows_of(
        lake, "CommitmentDiscountId IS NOT NULL", "x_line_item_type", "CommitmentDiscountId",
        "CommitmentDiscountCategory", "CommitmentDiscountType", "CommitmentDiscountStatus",
        "CommitmentDiscountQuantity", "CommitmentDiscountUnit", "ChargeFrequency")}
    assert got == {
        "SavingsPlanCoveredUsage": (SP, "Spend", "Savings Plan", "Used", Decimal("2.5"), "USD", "Usage-Based"),
        "SavingsPlanNegation": (SP, "Spend", "Savings Plan", None, None, None, "Usage-Based"),
        # 7 − 6.25 of the hour's commitment went unused (its EffectiveCost, 0.75)
        "SavingsPlanRecurringFee": (SP, "Spend", "Savings Plan", "Unused", Decimal("0.75"), "USD", "Recurring"),
        "DiscountedUsage": (RI, "Usage", "Reserved Instance", "Used", Decimal(1), "Hours", "Usage-Based"),
        "RIFee": (RI, "Usage", "Reserved Instance", "Unused", Decimal(24), "Hours", "Recurring"),
    }
    capacity = rows_of(lake, "CapacityReservationId IS NOT NULL", "x_usage_type", "CapacityReservationId",
                       "CapacityReservationStatus", "BilledCost")
    assert capacity == [("USE1-Reservation:p5.48xlarge", CR, "Used", Decimal(0)),
                        ("USE1-UnusedBox:p5.48xlarge", CR, "Unused", Decimal("98.32"))]
    assert rows_of(lake, "ListUnitPrice IS NOT NULL", "ListUnitPrice", "ContractedUnitPrice") == [
        (Decimal("98.32"), Decimal("93.404"))]


def test_cur2_capacity_reservation_columns_and_capacity_blocks(tmp_path):
    con = duckdb.connect()
    part = tmp_path / "part.parquet"
    # CUR 2.0 with INCLUDE CAPACITY RESERVATION DATA: arn, status (Used, Unused, Reserved, Cancelled), type
    con.execute(f"""COPY (SELECT TIMESTAMP '2026-10-01' AS bill_billing_period_start_date,
        TIMESTAMP '2026-11-01' AS bill_billing_period_end_date, TIMESTAMP '2026-10-02 03:00' AS
        line_item_usage_start_date, TIMESTAMP '2026-10-02 04:00' AS line_item_usage_end_date,
        'USD' AS line_item_currency_code, * FROM (VALUES
        ('Usage', 'USE1-BoxUsage:p5.48xlarge', 'i-0abc', 98.32, '{CR}', 'Used', 'ODCR'),
        ('Usage', 'USE1-UnusedBox:p5.48xlarge', '{CR}', 98.32, '{CR}', 'Unused', 'ODCR'),
        ('Usage', 'USE1-CapacityBlock:p5.48xlarge', 'cr-0block', 31.46, 'arn:cb', 'Unused',
         'EC2 Capacity Blocks for ML'),
        ('Usage', 'USE1-BoxUsage:p5.48xlarge', 'i-0def', 98.32, 'arn:future', 'Reserved', 'ODCR'))
        t(line_item_line_item_type, line_item_usage_type, line_item_resource_id, line_item_unblended_cost,
          capacity_reservation_capacity_reservation_arn, capacity_reservation_capacity_reservation_status,
          capacity_reservation_capacity_reservation_type)) TO '{part}' (FORMAT parquet)""")
    write_cur2(local_put(tmp_path / "export"), prefix="", export="cur2", period="2026-10", execution="e1",
               parts=[part.read_bytes()], fmt="parquet")
    lake, result = ingest_files(tmp_path, ("cur2", "aws-cur2", tmp_path / "export"))
    assert failures(result) == []
    assert rows_of(lake, "true", "ResourceId", "CapacityReservationId", "CapacityReservationStatus",
                   "x_capacity_reservation_type") == [
        (CR, CR, "Unused", "ODCR"),
        ("cr-0block", "arn:cb", "Unused", "EC2 Capacity Blocks for ML"),
        ("i-0abc", CR, "Used", "ODCR"),
        ("i-0def", "arn:future", None, "ODCR"),  # AWS's Reserved has no FOCUS status
    ]


def test_azure_commitments_prices_and_frequency(tmp_path):
    # ea_amortized_trey_research_small.csv, 09/22/2023: benefitId …/reservations/f39d1c73-…,
    # benefitName ProdDS1VMReservation, PricingModel Reservation, ChargeType Usage, Quantity 8,
    # UnitOfMeasure "1 Hour", UnitPrice 0.146, PayGPrice 0, Frequency UsageBased; 09/03/2023: a
    # savings plan (Compute_SavingsPlan_11-07-2022_09-55), Quantity 0.32085564, UnitPrice 0.0416.
    lake, result = ingest_files(tmp_path, ("az", "azure-cost", SAMPLES / "azure" / "ea_amortized_trey_research_small.csv"))
    assert failures(result) == []
    got = rows_of(lake, "CommitmentDiscountId IS NOT NULL", "ChargePeriodStart", "CommitmentDiscountName",
                  "CommitmentDiscountCategory", "CommitmentDiscountType", "CommitmentDiscountStatus", "PricingQuantity",
                  "PricingUnit", "ContractedUnitPrice", "ListUnitPrice", "ChargeFrequency")
    assert got == [
        (datetime(2023, 9, 3), "Compute_SavingsPlan_11-07-2022_09-55", "Spend", "Savings Plan", "Used",
         Decimal("0.32085564"), "1 Hour", Decimal("0.0416"), Decimal("0.0416"), "Usage-Based"),
        (datetime(2023, 9, 22), "ProdDS1VMReservation", "Usage", "Reservation", "Used", Decimal(8), "1 Hour",
         Decimal("0.146"), Decimal(0), "Usage-Based"),
    ]
    ids = [i for (i,) in rows_of(lake, "CommitmentDiscountId IS NOT NULL", "CommitmentDiscountId")]
    assert ids == ["/providers/Microsoft.BillingBenefits/savingsPlanOrders/802a9e8b-e860-4d5f-b63b-c5bdf7ee2446/"
                   "savingsPlans/09ff8291-64ac-45fb-afed-b9b39dbd88d7",
                   "/providers/Microsoft.Capacity/reservationOrders/a965d46f-aedf-4176-8ff1-2617943b8960/"
                   "reservations/f39d1c73-af74-4308-9083-fbf5efab37d1"]
    # ea_actual_trey_research_small.csv: the reservation purchase (ChargeType Purchase, Frequency
    # Recurring, ReservationName VM_RI_06-21-2023_18-56) is no use of the reservation: no status
    lake, _ = ingest_files(tmp_path / "actual", ("az", "azure-cost", SAMPLES / "azure" / "ea_actual_trey_research_small.csv"))
    assert rows_of(lake, "ChargeCategory = 'Purchase'", "CommitmentDiscountName", "CommitmentDiscountType",
                   "CommitmentDiscountStatus", "ChargeFrequency", "SkuMeter") == [
        ("VM_RI_06-21-2023_18-56", "Reservation", None, "Recurring", "B1s")]


def test_gcp_sku_pricing_units_and_committed_use_discount(tmp_path):
    # detailed_export_2024-05.jsonl, first row: sku.id 1F4A-2B3C-4D5E, usage.amount 3600 seconds,
    # amount_in_pricing_units 1 hour, credits: Sustained Usage Discount −1.25 and "Committed use
    # discount: GPU" −2.5 (type COMMITTED_USAGE_DISCOUNT, id "").
    lake, result = ingest_files(tmp_path, ("gcp", "gcp-billing", DATA / "gcp" / "detailed_export_2024-05.jsonl"))
    assert failures(result) == []
    got = rows_of(lake, "SkuId = '1F4A-2B3C-4D5E' AND ChargePeriodStart = TIMESTAMP '2024-05-20 10:00:00'",
                  "ConsumedQuantity", "ConsumedUnit", "PricingQuantity", "PricingUnit", "CommitmentDiscountId",
                  "CommitmentDiscountName", "CommitmentDiscountCategory", "CommitmentDiscountStatus", "x_credits",
                  "ServiceProviderName")
    assert got == [(Decimal(3600), "seconds", Decimal(1), "hour", "Committed use discount: GPU",
                    "Committed use discount: GPU", "Usage", "Used", Decimal("-3.75"), "Google Cloud")]
    # koku's pandas CSV: usage.amount_in_pricing_units 2.3198314011096954e-05 gibibyte (16 places
    # kept), a PROMOTION credit (no commitment)
    lake, _ = ingest_files(tmp_path / "koku", ("gcp", "gcp-billing", SAMPLES / "gcp" / "koku_gcp_standard_export_202011.csv"))
    assert rows_of(lake, "PricingQuantity = 0.0000231983140111", "PricingUnit", "CommitmentDiscountId") == [
        ("gibibyte", None)]


def test_focus_1_3_columns_are_kept_as_given(tmp_path):
    path = TOOLKIT / "aws-1.3" / "focus_1_3_cost_and_usage_aws.csv.gz"
    lake, result = ingest_files(tmp_path, ("focus", "focus", path))
    assert failures(result) == []
    source = duckdb.connect()
    header = gzip.decompress(path.read_bytes()).decode().splitlines()[0].split(",")
    counts = ", ".join(f'count("{c}")' for c in header)
    expected = source.execute(f"SELECT {counts} FROM read_csv(?, all_varchar = true)", [str(path)]).fetchone()
    got = lake.query().execute(f"SELECT {counts} FROM costs").fetchone()
    assert dict(zip(header, got)) == dict(zip(header, expected))  # every column, no value lost or invented
    # the first Savings Plan purchase of the file, as written there
    purchase = rows_of(lake, "CommitmentDiscountId = ? AND ChargeCategory = 'Purchase'",
                       "CommitmentDiscountName", "CommitmentDiscountQuantity", "CommitmentDiscountUnit", "BilledCost",
                       "SkuPriceDetails", "ContractApplied",
                       params=["arn:aws:savingsplans:eu-west-1::savingsplan/8307cd8ac414646a"])
    assert purchase[0] == (
        "ComputeSavingsPlan-1yr-NoUpfront", Decimal("32.016"), "USD", Decimal("32.016"),
        '{"x_PurchaseTerm":"1yr","x_PaymentOption":"NoUpfront"}',
        '{"Elements":[{"ContractId":"CONTRACT-CD-6c3a73520bb38f65c609e9b5","ContractCommitmentId":'
        '"arn:aws:savingsplans:eu-west-1::savingsplan/8307cd8ac414646a","ContractCommitmentAppliedCost":32.016000}]}')


def test_microsoft_focus_1_0_extension_columns_fill_their_later_focus_names(tmp_path):
    # azure_focus_1.0_trey_research_1000.csv, 2024-06-18: CommitmentDiscountName
    # CSP_RI_purchaseTest_03-09-2018_10-59, status Used, x_SkuMeterName "D2 v3/D2s v3",
    # x_PricingCurrency USD, PricingQuantity 7 Hours, x_SkuDetails {"UsageType":"ComputeHR",…}
    lake, _ = ingest_files(tmp_path, ("az", "focus", SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv"))
    got = rows_of(lake, "CommitmentDiscountName = 'CSP_RI_purchaseTest_03-09-2018_10-59'", "ChargePeriodStart",
                  "CommitmentDiscountStatus", "SkuMeter", "PricingCurrency", "PricingQuantity", "PricingUnit",
                  "SkuPriceDetails")
    assert got[0][:6] == (datetime(2024, 6, 18), "Used", "D2 v3/D2s v3", "USD", Decimal(7), "Hours")
    assert got[0][6].startswith('{"UsageType":"ComputeHR","ImageType":"Canonical","ServiceType":"Standard_D2s_v3"')
    assert rows_of(lake, "true", "count(SkuMeter)", "count(PricingCurrency)", "count(SkuPriceDetails)") == [
        (1000, 1000, 417)]
