"""deploy/iam/spendlake-readonly.json, enforced by moto's IAM simulation (RELIABILITY 18): a
full ingest (billing export, every inventory API and S3 Inventory reports read from their
destination bucket) passes with it, writes are denied, and without s3:GetObject (on the
billing exports, or on the inventory reports) the error names the action and the object.
deploy/iam/spendlake-reports-writer.json beside it lets the daily job put the report under an
S3 `report.out` and the service serve it, nothing else."""

from __future__ import annotations

import copy
import json
import re
from datetime import date, datetime, timedelta, timezone

import boto3
import pytest
from aws_exports import line, s3_put, write_legacy
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.authorization import enable_iam_authentication
from moto_policy import as_moto_sees_it
from test_inventory_s3 import CSV_MANIFEST, PARQUET_MANIFEST
from test_inventory_s3 import DATA as INVENTORY_DATA

from report_fixtures import sample_report
from service.core.config import parse_config
from service.core.errors import SourceError, SpendlakeError
from service.core.lake import Lake
from service.serve.service import run_ingest
from tests.conftest import REPO

POLICY = json.loads((REPO / "deploy" / "iam" / "spendlake-readonly.json").read_text())
WRITER = json.loads((REPO / "deploy" / "iam" / "spendlake-reports-writer.json").read_text())
REPORTS_BUCKET = "example-spendlake-reports"
BILLING, SCANNED, REPORTS = "example-billing-exports", "example-ml-checkpoints", "example-inventory-reports"
# test_inventory_s3's deliveries (CSV.gz and Parquet), as S3 Inventory writes them to REPORTS.
DELIVERIES = [path.relative_to(INVENTORY_DATA / "dest").as_posix() for path in (CSV_MANIFEST, PARQUET_MANIFEST)]
WRITE_PREFIXES = ("Put", "Delete", "Create", "Update", "Tag", "Untag", "Restore", "Replicate", "Abort")


def actions(policy: dict) -> set[str]:
    found = set()
    for statement in policy["Statement"]:
        value = statement["Action"]
        found |= {value} if isinstance(value, str) else set(value)
    return found


def without(policy: dict, sid: str) -> dict:
    kept = [s for s in policy["Statement"] if s.get("Sid") != sid]
    assert len(kept) == len(policy["Statement"]) - 1, f"no statement {sid}"
    return {**policy, "Statement": kept}


def deliver_inventory(s3, manifest_key: str) -> None:
    """One delivery into REPORTS: its data files, then a manifest naming REPORTS as the
    destination and SCANNED as the inventoried bucket (whose lifecycle the policy reads)."""
    manifest = json.loads((INVENTORY_DATA / "dest" / manifest_key).read_text())
    manifest |= {"sourceBucket": SCANNED, "destinationBucket": f"arn:aws:s3:::{REPORTS}"}
    for entry in manifest["files"]:
        s3.put_object(Bucket=REPORTS, Key=entry["key"], Body=(INVENTORY_DATA / "dest" / entry["key"]).read_bytes())
    s3.put_object(Bucket=REPORTS, Key=manifest_key, Body=json.dumps(manifest).encode())


@pytest.fixture
def aws(monkeypatch):
    """Buckets, a legacy CUR delivery, S3 Inventory deliveries, a log group, a tagged resource and
    GPU metrics, set up unauthenticated; then a user holding only the shipped policy, whose keys
    the test uses."""
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket in (BILLING, SCANNED, REPORTS, REPORTS_BUCKET):
            s3.create_bucket(Bucket=bucket)
        for manifest_key in DELIVERIES:
            deliver_inventory(s3, manifest_key)
        write_legacy(s3_put(s3, BILLING), prefix="cur", report="rep", period="2026-10", assembly="a1",
                     parts=[[line("2026-10", "12.5", team="nlp")]], bucket=BILLING)
        s3.put_object(Bucket=SCANNED, Key="runs/r1/checkpoints/step_100.pt", Body=b"weights")
        boto3.client("logs", region_name="us-east-1").create_log_group(logGroupName="/training/r1")
        s3.put_bucket_tagging(Bucket=SCANNED, Tagging={"TagSet": [{"Key": "team", "Value": "nlp"}]})
        boto3.client("cloudwatch", region_name="us-east-1").put_metric_data(Namespace="CWAgent", MetricData=[{
            "MetricName": "nvidia_smi_utilization_gpu", "Value": 3.0,
            "Timestamp": datetime.now(timezone.utc) - timedelta(hours=2),
            "Dimensions": [{"Name": "InstanceId", "Value": "i-0abc"}, {"Name": "index", "Value": "0"}]}])
        iam = boto3.client("iam", region_name="us-east-1")
        iam.create_user(UserName="spendlake")
        keys = iam.create_access_key(UserName="spendlake")["AccessKey"]
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", keys["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", keys["SecretAccessKey"])
        monkeypatch.delenv("AWS_SESSION_TOKEN")

        def grant(*policies: dict) -> None:
            for name in iam.list_user_policies(UserName="spendlake")["PolicyNames"]:
                iam.delete_user_policy(UserName="spendlake", PolicyName=name)
            for number, policy in enumerate(policies):
                iam.put_user_policy(UserName="spendlake", PolicyName=f"spendlake-{number}",
                                    PolicyDocument=json.dumps(as_moto_sees_it(policy)))

        yield grant


def as_spendlake(service: str):
    """A client with the credentials in the environment now (the user's, not the setup's)."""
    return boto3.session.Session(region_name="us-east-1").client(service)


def config(tmp_path):
    return parse_config({
        "lake": str(tmp_path / "lake"),
        "sources": [{"name": "cur", "kind": "aws-cur", "location": f"s3://{BILLING}/cur", "max_attempts": 1}],
        "inventory": [
            {"name": "tags", "kind": "aws-tags", "regions": ["us-east-1"], "max_attempts": 1},
            {"name": "objects", "kind": "s3-objects", "buckets": [{"bucket": SCANNED}], "max_attempts": 1},
            {"name": "reports", "kind": "s3-objects", "max_attempts": 1,
             "inventory_manifests": [f"s3://{REPORTS}/{key}" for key in DELIVERIES]},
            {"name": "logs", "kind": "cloudwatch-logs", "regions": ["us-east-1"], "max_attempts": 1},
            {"name": "gpu", "kind": "gpu-metrics", "cloudwatch": True, "regions": ["us-east-1"], "max_attempts": 1},
        ],
    })


def test_the_policy_allows_no_write_action():
    assert not [a for a in actions(POLICY) if a.split(":")[1].startswith(WRITE_PREFIXES) or "*" in a]
    assert {s["Effect"] for s in POLICY["Statement"]} == {"Allow"}


def test_the_policy_lets_sigv4_sources_query_one_managed_prometheus_workspace():
    """k8s-pods and gpu-metrics with `sigv4:` query Amazon Managed Service for Prometheus, which
    checks aps:QueryMetrics on the workspace (moto has no AMP query API to enforce it with)."""
    [statement] = [s for s in POLICY["Statement"] if any(a.startswith("aps:") for a in actions({"Statement": [s]}))]
    assert statement["Action"] == ["aps:QueryMetrics"]
    assert statement["Resource"] and all(re.fullmatch(r"arn:aws:aps:[a-z0-9-]+:\d{12}:workspace/[\w-]+", arn)
                                         for arn in statement["Resource"])


@pytest.mark.slow  # moto server enforcing the policy
def test_a_full_ingest_passes_under_the_policy(tmp_path, aws):
    aws(POLICY)
    cfg = config(tmp_path)
    with enable_iam_authentication():
        run_ingest(cfg)  # raises if any source failed
    state = Lake(cfg.lake).read_state("sources")
    assert sorted(name for name, record in state.items() if record.get("last_success")) == \
        ["cur", "gpu", "logs", "objects", "reports", "tags"]
    con = Lake(cfg.lake).query()
    assert con.execute("SELECT sum(BilledCost) FROM costs").fetchone()[0] == 12.5
    assert con.execute("SELECT bucket, count(*) FROM s3_objects GROUP BY 1 ORDER BY 1").fetchall() == [
        (SCANNED, 1), ("ml-checkpoints", 3), ("shared-datasets", 3)]  # listed; CSV.gz and Parquet reports


WRITES = {
    "s3:PutObject": lambda: as_spendlake("s3").put_object(Bucket=BILLING, Key="cur/x", Body=b"x"),
    "s3:DeleteObject": lambda: as_spendlake("s3").delete_object(Bucket=SCANNED, Key="runs/r1/checkpoints/step_100.pt"),
    "s3:PutLifecycleConfiguration": lambda: as_spendlake("s3").put_bucket_lifecycle_configuration(
        Bucket=SCANNED, LifecycleConfiguration={"Rules": [{"ID": "x", "Status": "Enabled", "Filter": {"Prefix": ""},
                                                           "Expiration": {"Days": 1}}]}),
    "logs:PutRetentionPolicy": lambda: as_spendlake("logs").put_retention_policy(logGroupName="/training/r1",
                                                                                 retentionInDays=1),
}


@pytest.mark.slow  # moto server enforcing the policy
def test_writes_are_denied(aws):
    aws(POLICY)
    allowed = []
    with enable_iam_authentication():
        for name, write in WRITES.items():
            try:
                write()
                allowed.append(name)
            except ClientError as denied:
                response = denied.response
                assert response["ResponseMetadata"]["HTTPStatusCode"] == 403, (name, response["Error"])
                message = response["Error"]["Message"]
                assert message == "Access Denied" or "is not authorized to perform" in message, (name, message)
    assert allowed == []


@pytest.mark.slow  # moto server enforcing the policy
def test_without_get_object_the_error_names_the_action_and_the_object(tmp_path, aws):
    policy = copy.deepcopy(POLICY)
    policy["Statement"] = [s for s in policy["Statement"] if s["Action"] != ["s3:GetObject"]]
    assert "s3:GetObject" not in actions(policy)
    aws(policy)
    with enable_iam_authentication(), pytest.raises(SourceError) as failed:
        run_ingest(config(tmp_path))
    message = str(failed.value)
    assert "access denied" in message and "s3:GetObject" in message
    assert f"s3://{BILLING}/cur/" in message


@pytest.mark.slow  # moto server enforcing the policy
def test_without_the_inventory_reports_statement_the_error_names_the_action_and_the_manifest(tmp_path, aws):
    aws(without(POLICY, "ReadS3InventoryReports"))
    cfg = config(tmp_path)
    with enable_iam_authentication(), pytest.raises(SourceError) as failed:
        run_ingest(cfg)
    message = str(failed.value)
    assert "access denied for s3:GetObject" in message and f"s3://{REPORTS}/{DELIVERIES[0]}" in message
    state = Lake(cfg.lake).read_state("sources")
    assert sorted(name for name, record in state.items() if record.get("last_success")) == \
        ["cur", "gpu", "logs", "objects", "tags"]


@pytest.mark.slow  # moto server enforcing the policies
def test_the_daily_report_goes_to_s3_with_the_writer_policy_and_is_refused_without(tmp_path, aws):
    """README allows `report.out: s3://...`, which the service's daily job uploads to: under the
    read-only policy alone every daily run failed (SpendlakeJobFailing task=daily)."""
    from prometheus_client import CollectorRegistry

    from service.report.render import render_files
    from service.report.write import upload_report
    from service.serve.app import Api

    out, day, files = f"s3://{REPORTS_BUCKET}/daily", date(2026, 11, 30), render_files(sample_report())
    config = parse_config({"lake": str(tmp_path / "lake"), "report": {"out": out, "max_attempts": 1}})
    aws(POLICY)
    with enable_iam_authentication(), pytest.raises(SpendlakeError, match="AccessDenied"):
        upload_report(files, out, day, config.report)
    aws(POLICY, WRITER)
    with enable_iam_authentication():
        assert upload_report(files, out, day, config.report) == f"{out}/{day}/"
        api = Api(config, CollectorRegistry())
        assert json.loads(api.handle("/api/v1/reports", {}, None).body)["latest"] == str(day)
        served = api.handle(f"/reports/{day}/report.html", {}, None)
        served.stream.close()
        assert served.status == 200 and served.stream.length == len(files["report.html"])
        for write in (lambda: as_spendlake("s3").put_object(Bucket=REPORTS_BUCKET, Key="other/x", Body=b"x"),
                      lambda: as_spendlake("s3").delete_object(Bucket=REPORTS_BUCKET, Key=f"daily/{day}/report.html")):
            with pytest.raises(ClientError, match="AccessDenied|not authorized"):
                write()
