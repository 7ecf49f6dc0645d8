"""AWS answering 5xx every time (RELIABILITY 15): retried up to `max_attempts`, then the source
fails saying AWS kept failing and to run later (not "check" a config that is right), and
nothing is committed. S3 for a bill, CloudWatch (CBOR, an empty 503) for GPU utilisation."""

from __future__ import annotations

import boto3
import pytest
import yaml
from botocore.awsrequest import AWSResponse
from click.testing import CliRunner
from inventory_support import RawBody, no_retry_wait  # noqa: F401 (a fixture)
from moto import mock_aws

from service.cli.main import cli
from service.core.lake import Lake
from tests.aws_exports import line, s3_put, write_legacy


def unavailable(monkeypatch, operation: str, body: bytes) -> list[int]:
    """Every client answers `operation` with a 503 carrying `body`; the calls are counted."""
    calls: list[int] = []
    original = boto3.session.Session.client

    def answer(request, **_):
        calls.append(1)
        return AWSResponse(request.url, 503, {"Content-Type": "application/xml"}, RawBody(body))

    def client(session, *args, **kwargs):
        made = original(session, *args, **kwargs)
        made.meta.events.register_first(f"before-send.*.{operation}", answer)
        return made

    monkeypatch.setattr(boto3.session.Session, "client", client)
    return calls


@pytest.fixture
def aws(monkeypatch, no_retry_wait):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    with mock_aws():
        yield


@pytest.mark.parametrize("command, operation, body, entry", [
    ("ingest", "GetObject", b"<Error><Code>ServiceUnavailable</Code><Message>Please reduce your request rate.</Message></Error>",
     {"name": "cur", "kind": "aws-cur", "location": "s3://bills/cur", "region": "us-east-1", "max_attempts": 3}),
    ("inventory", "GetMetricData", b"",
     {"name": "gpu", "kind": "gpu-metrics", "cloudwatch": True, "regions": ["us-east-1"], "max_attempts": 3}),
])
def test_15_aws_failing_every_time_fails_after_the_attempts_saying_to_run_later(tmp_path, monkeypatch, aws, command,
                                                                                 operation, body, entry):
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket="bills")
    write_legacy(s3_put(client, "bills"), prefix="cur", report="rep", period="2026-10", assembly="a1",
                 parts=[[line(cost="5")]], bucket="bills")
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    cloudwatch.put_metric_data(Namespace="CWAgent", MetricData=[{"MetricName": "nvidia_smi_utilization_gpu", "Dimensions": [
        {"Name": "InstanceId", "Value": "i-0abc"}, {"Name": "index", "Value": "0"}], "Value": 50.0}])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"),
                                    "sources" if command == "ingest" else "inventory": [entry]}))
    calls = unavailable(monkeypatch, operation, body)
    result = CliRunner().invoke(cli, ["--config", str(path), command], catch_exceptions=False)
    assert result.exit_code == 3 and len(calls) == 3, result.output
    [failed] = [text for text in result.output.splitlines() if "FAILED" in text]
    assert "still failing after the configured retries (AWS answered 503" in failed, failed
    assert f"run later, or raise {'sources' if command == 'ingest' else 'inventory'}[0].max_attempts" \
        in failed, failed
    assert not Lake(tmp_path / "lake").ledger()
