"""A shared GPU cluster billed through a FOCUS export: each producer's instance lines reach the jobs
on them as a CUR's do (connectors/focus_instances.py). p5.48xlarge, a3-highgpu-8g and
Standard_ND96isr_H100_v5 have 8 GPUs; every instance here bills $80 an hour, $10 a GPU-hour."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pytest
import yaml
from billing_helpers import failures, ingest_files
from click.testing import CliRunner

from service.cli.main import cli

COLUMNS = ("BilledCost", "EffectiveCost", "BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd",
           "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ProviderName", "ResourceId")
ARM = "/subscriptions/5f1b/resourceGroups/train/providers/Microsoft.Compute/virtualMachines/"
H100 = {"UsageType": "ComputeHR", "ImageType": "Canonical", "ServiceType": "Standard_ND96isr_H100_v5", "VCPUs": 96}
# producer → (the column naming the instance type, instance A, instance B, A's and B's values, a line of
# another service that names no instance type, its resource)
PRODUCERS = {
    # AWS Data Exports, FOCUS 1.0 with AWS columns: the usage type (us-east-1's has no region code)
    "aws-focus-1.0": ("x_UsageType", "i-0a", "i-0b", "USE1-BoxUsage:p5.48xlarge", "SpotUsage:p5.48xlarge",
                      "USE1-EBS:VolumeUsage.gp3", "vol-01"),
    # FOCUS 1.2 with AWS columns: x_UsageType became SkuMeter
    "aws-focus-1.2": ("SkuMeter", "arn:aws:ec2:us-east-1:123456789012:instance/i-0a", "i-0b",
                      "USE1-BoxUsage:p5.48xlarge", "USE1-DedicatedUsage:p5.48xlarge",
                      "USE1-EBS:VolumeUsage.gp3", "vol-01"),
    # Microsoft's FOCUS export: x_SkuDetails (AdditionalInfo) has the VM size as ServiceType
    "azure-focus-1.0": ("x_SkuDetails", ARM + "gpu-a", ARM + "gpu-b", json.dumps(H100), json.dumps(H100),
                        json.dumps({"ServiceType": "Gateway", "MeteredService": "Virtual Network"}), ARM + "gw"),
    # FOCUS 1.2+ SkuPriceDetails' own InstanceType
    "focus-1.2": ("SkuPriceDetails", "gpu-a", "gpu-b", json.dumps({"InstanceType": "a3-highgpu-8g", "GpuCount": 8}),
                  json.dumps({"InstanceType": "a3-highgpu-8g", "GpuCount": 8}), json.dumps({"StorageClass": "SSD"}),
                  "disk-1"),
}


def focus_file(column: str | tuple[str, ...], lines: list[tuple]) -> str:
    """A FOCUS CSV of (resource, the producer's value(s) of `column`(s), cost, charge period start) lines, one hour each."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow((*COLUMNS, *([column] if isinstance(column, str) else column)))
    for resource, value, cost, start in lines:
        end = start.replace("T10:", "T11:")
        writer.writerow((cost, cost, "USD", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", start, end, "Usage",
                         "Cloud", resource, *([value] if isinstance(value, str) else value)))
    return out.getvalue()


def _cluster_on_a_focus_bill(tmp_path, producer: str):
    column, a, b, a_value, b_value, other_value, other = PRODUCERS[producer]
    bill = tmp_path / "bill" / "2026-11"
    bill.mkdir(parents=True)
    (bill / "focus.csv").write_text(focus_file(column, [
        (a, a_value, "80", "2026-11-02T10:00:00Z"), (b, b_value, "80", "2026-11-02T10:00:00Z"),
        (other, other_value, "5", "2026-11-02T10:00:00Z")]))
    jobs = tmp_path / "jobs.csv"
    a = a.rsplit("/", 1)[-1] if a.startswith("arn:") else a  # a scheduler knows the instance id, not its ARN
    # j1 holds A's 8 GPUs for the hour; j2 4 of B's for half of it
    jobs.write_text("job_id,start_time,end_time,gpus,instance_ids,cluster\n"
                    f"j1,2026-11-02T10:00:00Z,2026-11-02T11:00:00Z,8,{a},gpu\n"
                    f"j2,2026-11-02T10:00:00Z,2026-11-02T10:30:00Z,4,{b},gpu\n")
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({
        "lake": str(tmp_path / "lake"), "sources": [{"name": "bill", "kind": "focus", "location": str(tmp_path / "bill")}],
        "inventory": [{"name": "jobs", "kind": "jobs-file", "path": str(jobs)}],
        "attribution": {"clusters": {}}}))
    for command in (["ingest"], ["inventory"]):
        done = CliRunner().invoke(cli, ["--config", str(path), *command])
        assert done.exit_code == 0, done.output
    return path


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_a_clusters_instances_on_a_focus_bill_reach_the_jobs_on_them(tmp_path, producer):
    # A: j1 holds all 8 GPUs for the hour, $80. B: j2 holds 4·30 / (8·60) = 1/4 of its hour, $20;
    # the rest of B's hour is the cluster's idle, $60. The $5 line of another service is no
    # instance's and stays unallocated. $165 in all, as billed. (Before: the instance type was
    # never read from these producers' columns: all $165 unallocated.)
    path = _cluster_on_a_focus_bill(tmp_path, producer)
    shown = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--by", "run", "--since", "2026-11-01",
                                     "--until", "2026-12-01", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    costs = {row["run"]: Decimal(str(row["cost"])) for row in json.loads(shown.stdout)["rows"]}
    assert costs == {"j1": Decimal(80), "j2": Decimal(20), "idle": Decimal(60), "unallocated": Decimal(5)}
    checked = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--check"])
    assert checked.exit_code == 0, checked.output


def test_only_an_instance_hours_usage_type_or_a_vms_size_names_an_instance_type(tmp_path):
    # The usage types a CUR's product_instance_type marks as instance time give the type after the
    # colon, with or without a region code (and a Local Zone's); an RI fee (HeavyUsage), EBS and a bare BoxUsage do not.
    # Microsoft's ServiceType is a VM size beside VCPUs only; SkuPriceDetails' InstanceType comes first.
    usage = {"BoxUsage:g5.12xlarge": "g5.12xlarge", "USW2-SpotUsage:p4d.24xlarge": "p4d.24xlarge",
             "EUC1-UnusedBox:p5.48xlarge": "p5.48xlarge", "UnusedDed:p5.48xlarge": "p5.48xlarge",
             "USE1-HeavyUsage:p5.48xlarge": None, "USE1-EBS:VolumeUsage.gp3": None, "BoxUsage": None,
             "USW2-LAX1-BoxUsage:g4dn.xlarge": "g4dn.xlarge"}  # a Local Zone's (review54 item 13)
    details = {json.dumps(H100): "Standard_ND96isr_H100_v5", json.dumps({"ServiceType": "Gateway"}): None,
               json.dumps({"InstanceType": "p5.48xlarge", "ServiceType": "Standard_D2s_v3", "VCPUs": 2}): "p5.48xlarge",
               "not json": None}
    # a file with both columns: SkuPriceDetails naming no instance type, x_SkuDetails a VM size
    both = {(json.dumps({"x_PricingBlockSize": 1}), json.dumps(H100)): "Standard_ND96isr_H100_v5",
            (json.dumps({"InstanceType": "p5.48xlarge"}), json.dumps(H100)): "p5.48xlarge"}
    files = (("aws", "x_UsageType", usage), ("azure", "x_SkuDetails", details),
             ("both", ("SkuPriceDetails", "x_SkuDetails"), both))
    for name, column, cases in files:
        folder = tmp_path / name / "2026-11"
        folder.mkdir(parents=True)
        (folder / "focus.csv").write_text(focus_file(column, [
            (f"r{i}", value, "1", f"2026-11-02T10:0{i}:00Z") for i, value in enumerate(cases)]))
    lake, result = ingest_files(tmp_path, *((name, "focus", tmp_path / name) for name, _, _ in files))
    assert failures(result) == []
    read = dict(lake.query().execute("SELECT source || ResourceId, x_instance_type FROM costs").fetchall())
    assert read == {f"{name}r{i}": want for name, _, cases in files for i, want in enumerate(cases.values())}
