"""The usage type of a FOCUS line (the lake's x_usage_type: attribution rules' `usage_type`, the rules'
detail, capacity-unused's Capacity Blocks): AWS's x_UsageType, else the file's SkuMeter, where AWS's
FOCUS 1.2 export moved the usage type and Microsoft's and Google's exports write the meter name."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import yaml
from billing_helpers import failures, ingest_files
from click.testing import CliRunner

from service.cli.main import cli

PERIOD = ("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z")


def focus_csv(columns: tuple[str, ...], lines: list[tuple]) -> str:
    """A FOCUS CSV billing November 2026: (cost, charge period start, end, ChargeCategory, *columns) lines."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(("BilledCost", "EffectiveCost", "BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd",
                     "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", *columns))
    for cost, start, end, category, *values in lines:
        writer.writerow((cost, cost, "USD", *PERIOD, start, end, category, *values))
    return out.getvalue()


def _config(tmp_path, bill: str, **extra) -> str:
    folder = tmp_path / "bill" / "2026-11"
    folder.mkdir(parents=True)
    (folder / "focus.csv").write_text(bill)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"),
                                    "sources": [{"name": "bill", "kind": "focus", "location": str(tmp_path / "bill")}],
                                    **extra}))
    done = CliRunner().invoke(cli, ["--config", str(path), "ingest"])
    assert done.exit_code == 0, done.output
    return str(path)


def test_an_aws_focus_1_2_lines_usage_type_is_its_sku_meter_which_attribution_rules_match(tmp_path):
    # AWS's FOCUS 1.2 export writes the usage type as SkuMeter (x_UsageType in 1.0): a rule matching
    # usage_type places its lines. Before, x_usage_type stayed null: all $125 unallocated.
    bill = focus_csv(("ProviderName", "ResourceId", "SkuId", "SkuMeter"), [
        ("80", "2026-11-02T10:00:00Z", "2026-11-02T11:00:00Z", "Usage", "AWS", "i-0a", "SKU1",
         "USE1-BoxUsage:p5.48xlarge"),
        ("40", "2026-11-02T11:00:00Z", "2026-11-02T12:00:00Z", "Usage", "AWS", "i-0a", "SKU1",
         "USE1-BoxUsage:p5.48xlarge"),
        ("5", "2026-11-02T10:00:00Z", "2026-11-02T11:00:00Z", "Usage", "AWS", "vol-01", "SKU2",
         "USE1-EBS:VolumeUsage.gp3")])
    path = _config(tmp_path, bill, attribution={"dimensions": {"usage": {"rules": [
        {"match": {"usage_type": "USE1-BoxUsage:p5.48xlarge"}, "value": "gpu-hours"},
        {"match": {"usage_type": "USE1-EBS:VolumeUsage.gp3"}, "value": "volumes"}]}}})
    shown = CliRunner().invoke(cli, ["--config", path, "attribute", "--by", "usage", "--since", "2026-11-01",
                                     "--until", "2026-12-01", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    costs = {row["usage"]: Decimal(str(row["cost"])) for row in json.loads(shown.stdout)["rows"]}
    assert costs == {"gpu-hours": Decimal(120), "volumes": Decimal(5)}


def test_a_capacity_block_on_an_aws_focus_1_2_bill_is_found_unused_as_a_block(tmp_path):
    # A Capacity Block of one p5.48xlarge for 4 hours bought for $125.84 (its Purchase line's SkuMeter
    # names CapacityBlock), its hour lines at $0: 1 used, 3 unused, valued at 125.84 × 3/4 = $94.38
    # once (a block ends). Read as an on-demand reservation (no usage type), the finding was that value
    # projected to a month: 94.38 × 730 / 4 h = $17,224.35 a month "while it stays reserved".
    block = ("AWS", "cr-0block", "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-0block")
    hours = [(f"2026-11-02T0{h}:00:00Z", f"2026-11-02T0{h + 1}:00:00Z", "Used" if h == 0 else "Unused")
             for h in range(4)]
    bill = focus_csv(("ProviderName", "ResourceId", "CapacityReservationId", "CapacityReservationStatus",
                      "PricingQuantity", "SkuMeter"), [
        ("125.84", "2026-11-01T00:00:00Z", "2026-11-01T01:00:00Z", "Purchase", *block, "", "1",
         "USE1-CapacityBlock:p5.48xlarge"),
        *(("0", start, end, "Usage", *block, status, "1", "") for start, end, status in hours),
        # the bill runs on past the block's hours: they are all reported
        ("5", "2026-11-03T10:00:00Z", "2026-11-03T11:00:00Z", "Usage", "AWS", "vol-01", "", "", "1",
         "USE1-EBS:VolumeUsage.gp3")])
    path = _config(tmp_path, bill)
    ran = CliRunner().invoke(cli, ["--config", path, "rules", "run", "--rule", "capacity-unused", "--since",
                                   "2026-11-01", "--dry-run", "--format", "json"])
    assert ran.exit_code == 0, ran.output
    [finding] = json.loads(ran.stdout)
    assert finding["evidence"]["type"] == "EC2 Capacity Blocks for ML"
    assert finding["evidence"]["projected_to_month"] is False
    assert Decimal(str(finding["impact_usd"])) == Decimal("94.38")
    assert finding["summary"].startswith("Capacity Block ")


def test_a_microsoft_or_google_focus_lines_usage_type_is_its_meter_name(tmp_path):
    # Microsoft's FOCUS 1.0 export names the meter x_SkuMeterName, 1.2 and Google's SkuMeter: the meter
    # name is the usage type, as azure-cost reads MeterName. A file with x_UsageType (AWS's 1.0) keeps it
    # over SkuMeter.
    files = {
        "azure-1-0": (("ProviderName", "x_SkuMeterName"), ("Microsoft", "vCore")),
        "azure-1-2": (("ProviderName", "SkuMeter"), ("Microsoft", "E4 v3/E4s v3")),
        "google": (("ServiceProviderName", "SkuMeter"), ("Google Cloud", "Nvidia H100 80GB GPU running in Americas")),
        "aws-1-0": (("ProviderName", "x_UsageType", "SkuMeter"), ("AWS", "USE1-BoxUsage:p5.48xlarge", "Compute")),
    }
    for name, (columns, values) in files.items():
        folder = tmp_path / name / "2026-11"
        folder.mkdir(parents=True)
        (folder / "focus.csv").write_text(focus_csv(columns, [
            ("1", "2026-11-02T10:00:00Z", "2026-11-02T11:00:00Z", "Usage", *values)]))
    lake, result = ingest_files(tmp_path, *((name, "focus", tmp_path / name) for name in files))
    assert failures(result) == []
    read = dict(lake.query().execute("SELECT source, x_usage_type FROM costs").fetchall())
    assert read == {"azure-1-0": "vCore", "azure-1-2": "E4 v3/E4s v3",
                    "google": "Nvidia H100 80GB GPU running in Americas", "aws-1-0": "USE1-BoxUsage:p5.48xlarge"}
