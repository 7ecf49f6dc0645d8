"""A job names its instance in another form than the bill (allocation_placement.instance_key):
an EC2 ARN or a Kubernetes node's providerID for the bill's bare id, an Azure resource id in
ARM's casing for the export's lower case. Each is the same instance: its jobs are placed on it."""

from __future__ import annotations

import json
from decimal import Decimal

import yaml
from click.testing import CliRunner
from test_clusters_focus import ARM, H100, focus_file

from service.cli.main import cli


def test_a_jobs_arn_provider_id_or_azure_id_in_other_case_meets_the_billed_instance(tmp_path):
    # Three 8-GPU instances, $80 for 10:00-11:00 each; each job holds 4 GPUs of one for the
    # hour: $40 each, $120 idle. Before: the jobs matched nothing, all $240 idle, nothing said.
    bill = tmp_path / "bill" / "2026-11"
    bill.mkdir(parents=True)
    azure = (ARM + "nd-01").lower()  # as Microsoft's FOCUS export writes ResourceId
    tags = json.dumps({"cluster": "gpu"})
    (bill / "focus.csv").write_text(focus_file(("x_UsageType", "x_SkuDetails", "Tags"), [
        ("i-0a", ("USE1-BoxUsage:p5.48xlarge", "", tags), "80", "2026-11-02T10:00:00Z"),
        ("i-0c", ("USE1-BoxUsage:p5.48xlarge", "", tags), "80", "2026-11-02T10:00:00Z"),
        (azure, ("", json.dumps(H100), tags), "80", "2026-11-02T10:00:00Z")]))
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,start_time,end_time,gpus,instance_ids,cluster\n"
                    "arn,2026-11-02T10:00:00Z,2026-11-02T11:00:00Z,4,"
                    "arn:aws:ec2:us-east-1:111122223333:instance/i-0a,gpu\n"
                    "provider,2026-11-02T10:00:00Z,2026-11-02T11:00:00Z,4,aws:///us-east-1a/i-0c,gpu\n"
                    f"arm,2026-11-02T10:00:00Z,2026-11-02T11:00:00Z,4,{ARM}nd-01,gpu\n")
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({
        "lake": str(tmp_path / "lake"), "sources": [{"name": "bill", "kind": "focus", "location": str(tmp_path / "bill")}],
        "inventory": [{"name": "jobs", "kind": "jobs-file", "path": str(jobs)}],
        "attribution": {"clusters": {"cluster_tag": "cluster"}}}))
    for command in (["ingest"], ["inventory"]):
        done = CliRunner().invoke(cli, ["--config", str(path), *command])
        assert done.exit_code == 0, done.output
    shown = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--by", "run", "--since", "2026-11-01",
                                     "--until", "2026-12-01", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    costs = {row["run"]: Decimal(str(row["cost"])) for row in json.loads(shown.stdout)["rows"]}
    assert costs == {"arn": Decimal(40), "provider": Decimal(40), "arm": Decimal(40), "idle": Decimal(120)}
