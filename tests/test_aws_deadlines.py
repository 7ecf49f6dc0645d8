"""The AWS clients other than gpu-metrics' CloudWatch had no overall bound: a billing source on S3
(connectors/storage.py), aws-tags and cloudwatch-logs (connectors/aws_listing.py) and s3-objects
waited botocore's 60 s connect and 60 s read for each of max_attempts, on every call, `ingest` and
serve's jobs behind them. Each now holds its calls to the source's deadline_seconds and each
attempt's connect and reads to timeout_seconds (aws_client.held_client), as gpu-metrics does.
Counted, not timed: a loaded host only slows each call."""

from __future__ import annotations

import socket
import time

import boto3
import pytest
import yaml
from click.testing import CliRunner
from moto import mock_aws
from moto.logs.models import LogsBackend
from moto.resourcegroupstaggingapi.models import ResourceGroupsTaggingAPIBackend
from moto.s3.models import S3Backend
from moto.s3.responses import S3Response

from service.cli.main import cli
from service.core.config import parse_config
from service.core.errors import ConfigError
from service.ingest.inventory import run_inventory
from tests.aws_exports import line, s3_put, write_legacy

DEADLINE = "the source's requests were not all answered within 2.5 s ({}.deadline_seconds), retries included"


@pytest.fixture
def aws(monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        yield


def slowed(monkeypatch, backend: type, method: str) -> list[float]:
    """moto's `backend.method` answers in 1 s (AWS answering slowly); its calls, the requests sent, counted."""
    sent: list[float] = []
    original = getattr(backend, method)

    def slow(self, *args, **kwargs):
        sent.append(time.monotonic())
        time.sleep(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(backend, method, slow)
    return sent


def billing_config(tmp_path, **settings) -> str:
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "cur", "kind": "aws-cur", "location": "s3://bills/cur", "region": "us-east-1", **settings}]}))
    return str(path)


def deliver_months(months: int) -> None:
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket="bills")
    for month in range(1, months + 1):
        period = f"2026-{month:02d}"
        write_legacy(s3_put(client, "bills"), prefix="cur", report="rep", period=period, assembly=f"a-{period}",
                     parts=[[line(period, "5")]], bucket="bills")


def test_a_billing_sources_s3_calls_end_by_its_deadline(tmp_path, monkeypatch, aws):
    """Six months' deliveries, each GET answered in 1 s: 12 s of calls and more (a manifest and a part each);
    with deadline_seconds 2.5 none is sent past it and the source fails naming it, exit 3."""
    deliver_months(6)
    sent = slowed(monkeypatch, S3Response, "get_object")
    result = CliRunner().invoke(cli, ["--config", billing_config(tmp_path, timeout_seconds=1, deadline_seconds=2.5),
                                      "ingest"], catch_exceptions=False)
    assert result.exit_code == 3, result.output
    assert DEADLINE.format("sources[0]") + " — raise sources[0].deadline_seconds, or point sources[0].location " \
           "at a narrower prefix" in result.output, result.output
    assert 0 < len(sent) <= 3, (sent, result.output)  # each takes 1 s or more: at most three begin before 2.5 s


def test_a_billing_sources_calls_within_the_default_deadline_all_commit(tmp_path, monkeypatch, aws):
    deliver_months(2)
    sent = slowed(monkeypatch, S3Response, "get_object")
    result = CliRunner().invoke(cli, ["--config", billing_config(tmp_path, timeout_seconds=1), "ingest"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.output.count("committed") == 2 and len(sent) >= 4, (result.output, sent)


def test_a_billing_endpoint_not_answering_ends_by_the_deadline(tmp_path, monkeypatch):
    """An S3 endpoint that takes the connection and never answers: each attempt's read waited 60 s (botocore's),
    max_attempts times, then the next call's; now timeout_seconds, all of them ending by deadline_seconds."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens, never accepts: the connect succeeds
        config = billing_config(tmp_path, endpoint_url=f"http://127.0.0.1:{silent.getsockname()[1]}",
                                timeout_seconds=1, deadline_seconds=2.5)
        began = time.monotonic()
        result = CliRunner().invoke(cli, ["--config", config, "ingest"], catch_exceptions=False)
        took = time.monotonic() - began
    assert result.exit_code == 3, result.output
    assert "s3://bills/cur: " + DEADLINE.format("sources[0]") in result.output, result.output
    assert took < 60, (took, result.output)  # five 60 s reads without: generously, below one of them


REGIONS = ["us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1"]


@pytest.mark.parametrize("entry, backend, method", [
    ({"kind": "aws-tags", "regions": REGIONS}, ResourceGroupsTaggingAPIBackend, "get_resources"),
    ({"kind": "cloudwatch-logs", "regions": REGIONS}, LogsBackend, "describe_log_groups"),
    ({"kind": "s3-objects", "buckets": [{"bucket": f"data-{n}"} for n in range(8)], "lifecycle": False},
     S3Backend, "list_objects_v2"),
])
def test_an_aws_inventory_sources_calls_end_by_its_deadline(tmp_path, monkeypatch, aws, entry, backend, method):
    """Eight regions' (or buckets') listings, each answered in 1 s: 8 s; with deadline_seconds 2.5 the source
    fails naming it, and at most three were sent."""
    s3 = boto3.client("s3", region_name="us-east-1")
    for n in range(8):
        s3.create_bucket(Bucket=f"data-{n}")
    sent = slowed(monkeypatch, backend, method)
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "aws", **entry, "timeout_seconds": 1, "deadline_seconds": 2.5}]})
    [outcome] = run_inventory(config)
    assert DEADLINE.format("inventory[0]") in str(outcome.error), outcome.error
    assert 0 < len(sent) <= 3, sent


@pytest.mark.parametrize("section, entry, deadline", [
    ("sources", {"kind": "aws-cur", "location": "s3://bills/cur"}, 3600),  # its calls are known once listed
    ("sources", {"kind": "focus", "location": "s3://bills/focus", "deadline_seconds": 600}, 600),
    ("inventory", {"kind": "aws-tags", "regions": REGIONS}, 300),
    ("inventory", {"kind": "cloudwatch-logs", "regions": REGIONS, "timeout_seconds": 60}, 8 * 60),
    ("inventory", {"kind": "s3-objects", "buckets": [{"bucket": "abc", "prefixes": ["a/", "b/"]}],
                   "inventory_manifests": ["s3://abc/m.json"], "timeout_seconds": 100}, 500),  # 2 + 1 + 2 calls
])
def test_the_default_deadline(section, entry, deadline):
    assert getattr(parse_config({section: [{"name": "x", **entry}]}), section)[0].deadline == deadline


def test_a_billing_sources_deadline_below_its_timeout_is_a_config_error():
    with pytest.raises(ConfigError) as raised:
        parse_config({"sources": [{"name": "cur", "kind": "aws-cur", "location": "s3://b/cur", "timeout_seconds": 120,
                                   "deadline_seconds": 60}]})
    assert "sources[0].deadline_seconds: 60 s is less than timeout_seconds (120 s)" in raised.value.message


def test_a_billing_sources_deadline_may_be_raised_to_a_day_for_a_delivery_of_hours_of_downloads():
    # an hour by default: a delivery whose files take longer could never be read from S3 at an hour's cap
    source = {"name": "cur", "kind": "aws-cur", "location": "s3://b/cur"}
    assert parse_config({"sources": [{**source, "deadline_seconds": 6 * 3600}]}).sources[0].deadline == 6 * 3600
    with pytest.raises(ConfigError) as raised:
        parse_config({"sources": [{**source, "deadline_seconds": 90_000}]})
    assert "sources[0].deadline_seconds" in raised.value.message and "86400" in raised.value.message, raised.value
    with pytest.raises(ConfigError):  # an inventory kind's stays at an hour
        parse_config({"inventory": [{"name": "t", "kind": "aws-tags", "regions": REGIONS, "deadline_seconds": 7200}]})


def test_a_large_objects_ranged_gets_end_by_the_deadline_too(tmp_path, monkeypatch, aws):
    """An object over the transfer's multipart threshold is fetched in ranged GETs on the transfer's threads:
    past the deadline none is sent, and the deadline's error is what the download raises (not a retried
    'download failed')."""
    from connectors.storage import Storage
    from service.core.deadline import DeadlinePassed

    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket="bills")
    client.put_object(Bucket="bills", Key="focus/big.csv", Body=b"x" * (9 << 20))  # two 8 MB ranges
    config = parse_config({"sources": [{"name": "bill", "kind": "focus", "location": "s3://bills/focus",
                                        "region": "us-east-1", "timeout_seconds": 1, "deadline_seconds": 2.5}]})
    storage = Storage(config.sources[0])
    [big] = storage.list()
    time.sleep(2.6)  # the listing, and whatever else the ingest did, took the deadline
    sent = slowed(monkeypatch, S3Response, "get_object")
    with pytest.raises(DeadlinePassed) as raised:
        storage.local_copy(big, tmp_path)
    assert DEADLINE.format("sources[0]") in str(raised.value) and not sent, sent
