"""k8s-pods and gpu-metrics reading Amazon Managed Service for Prometheus: a proxy in front of the
real Prometheus of tests/test_k8s_pods.py and tests/test_inventory_gpu.py checks each request's
SigV4 signature with botocore and known credentials, as AMP does, and forwards a signed one.
With `sigv4:` the sources read the same rows as from the Prometheus itself; without it, or with
other credentials, they fail with AMP's 403 naming the source and what to set or grant."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import test_inventory_gpu
import test_k8s_pods
from test_slurm_jobs_http import ANSWER, slurmrestd  # noqa: F401 (a fixture)
from botocore.credentials import Credentials
from click.testing import CliRunner
from prometheus_support import backfilled_prometheus, sigv4_proxy

from connectors.aws_sigv4 import prometheus_access
from connectors.http_json import get_json
from service.cli.main import cli
from service.core.config import parse_config
from service.core.errors import ConfigError
from service.core.lake import Lake
from service.ingest.inventory import run_inventory

KEYS = Credentials("AKIAEXAMPLESPENDLAKE", "secret/+example+key", "session+token/example==")
REGION = "us-west-2"
SIGV4 = {"region": REGION}


@pytest.fixture
def aws_keys(monkeypatch, tmp_path):
    """KEYS in the environment, boto3's default chain finding nothing else (no files, no IMDS)."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEYS.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", KEYS.secret_key)
    monkeypatch.setenv("AWS_SESSION_TOKEN", KEYS.token)
    return monkeypatch


@pytest.fixture(scope="module")
def k8s_prometheus(tmp_path_factory):
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus"), test_k8s_pods.openmetrics()) as url:
        yield url


def pods(lake: Path) -> list[tuple]:
    con = Lake(lake).query()
    try:
        return con.execute("SELECT record_id, state, start_time, end_time, gpus, labels, gpu_util_hourly "
                           "FROM jobs ORDER BY record_id").fetchall()
    finally:
        con.close()


def k8s_cli(tmp_path: Path, url: str, **source):
    (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "eks-pods", "kind": "k8s-pods", "prometheus_url": url, "max_attempts": 1, **source}]}))
    return CliRunner().invoke(cli, ["-vv", "--config", str(tmp_path / "spendlake.yaml"), "inventory"])


@pytest.mark.binary
def test_k8s_pods_signed_read_the_same_rows_as_from_prometheus_itself(tmp_path, k8s_prometheus, aws_keys):
    for name, url, sigv4 in (("direct", k8s_prometheus, None), ("amp", None, SIGV4)):
        with sigv4_proxy(k8s_prometheus, KEYS, REGION) as amp:
            config = parse_config({"lake": str(tmp_path / name / "lake"), "inventory": [
                {"name": "k8s", "kind": "k8s-pods", "cluster": "eks-p5", "prometheus_url": url or amp,
                 "lookback_hours": 8, **({"sigv4": sigv4} if sigv4 else {})}]})
            [outcome] = run_inventory(config, now=test_k8s_pods.NOW)
        assert outcome.error is None, outcome.error
    assert len(pods(tmp_path / "amp" / "lake")) == 7
    assert pods(tmp_path / "amp" / "lake") == pods(tmp_path / "direct" / "lake")


@pytest.mark.binary
def test_gpu_metrics_signed_read_the_same_rows_as_from_prometheus_itself(tmp_path, aws_keys):
    now = test_inventory_gpu.DAY0 + timedelta(hours=5, minutes=10)
    with backfilled_prometheus(tmp_path, test_inventory_gpu.openmetrics()) as prometheus, \
            sigv4_proxy(prometheus, KEYS, REGION) as amp:
        for name, source in (("direct", {"prometheus_url": prometheus}),
                             ("amp", {"prometheus_url": amp, "sigv4": SIGV4})):
            config = parse_config({"lake": str(tmp_path / name / "lake"), "inventory": [
                {"name": "gpus", "kind": "gpu-metrics", "lookback_hours": 12, **source}]})
            [outcome] = run_inventory(config, now=now)
            assert outcome.error is None, outcome.error
    assert test_inventory_gpu.rows(tmp_path / "amp") == test_inventory_gpu.rows(tmp_path / "direct")
    assert len(test_inventory_gpu.rows(tmp_path / "amp")) == 9 * 6


@pytest.mark.binary
@pytest.mark.parametrize("sigv4, keys, says, hint", [
    (None, KEYS, "answered HTTP 403: Missing Authentication Token",
     "set inventory[0].sigv4.region"),
    (SIGV4, Credentials(KEYS.access_key, "another-secret", KEYS.token),
     "answered HTTP 403: The request signature we calculated does not match",
     "grant aps:QueryMetrics on this workspace"),
])
def test_unsigned_or_wrongly_signed_fails_with_amps_403_naming_the_source(tmp_path, k8s_prometheus, aws_keys,
                                                                          sigv4, keys, says, hint):
    aws_keys.setenv("AWS_SECRET_ACCESS_KEY", keys.secret_key)
    with sigv4_proxy(k8s_prometheus, KEYS, REGION) as amp:
        result = k8s_cli(tmp_path, amp, **({"sigv4": sigv4} if sigv4 else {}))
    assert result.exit_code == 3, result.output
    assert "eks-pods" in result.output and f"{amp}/api/v1/query_range: {says}" in result.output
    assert hint in result.output
    assert ("botocore.auth" in result.output) == bool(sigv4)  # debug logging shows the signing, never the keys
    assert not [secret for secret in (keys.secret_key, KEYS.token, KEYS.access_key) if secret in result.output]


def test_without_aws_credentials_the_source_fails_naming_its_sigv4(tmp_path, aws_keys):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        aws_keys.delenv(name)
    result = k8s_cli(tmp_path, "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1", sigv4={})
    assert result.exit_code == 3, result.output
    assert "inventory[0].sigv4: no AWS credentials found to sign Prometheus queries" in result.output


@pytest.mark.parametrize("source, says", [
    ({"kind": "k8s-pods", "prometheus_url": "http://prometheus:9090", "sigv4": {}},
     "inventory[0]: set sigv4.region to the workspace's region"),
    ({"kind": "k8s-pods", "prometheus_url": "https://u:p@aps-workspaces.us-west-2.amazonaws.com/workspaces/w",
      "sigv4": {}}, "take the user:password@ out of prometheus_url"),
    ({"kind": "k8s-pods", "prometheus_url": "http://prometheus:9090", "sigv4": {"region": "Oregon"}},
     "inventory[0].sigv4.region: must be an AWS region such as us-east-1, not 'Oregon'"),
    ({"kind": "gpu-metrics", "cloudwatch": True, "sigv4": {"region": REGION}},
     "sigv4 signs the queries to prometheus_url"),
])
def test_a_sigv4_that_cannot_sign_is_a_config_error(source, says):
    with pytest.raises(ConfigError) as error:
        parse_config({"inventory": [{"name": "p", **source}]})
    assert says in str(error.value)


def test_the_workspace_url_names_the_region_and_an_unsigned_403_from_it_the_key_to_set(aws_keys):
    workspace = "https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/w"
    config = parse_config({"inventory": [{"name": "p", "kind": "k8s-pods", "sigv4": {}, "prometheus_url": workspace}]})
    sign, _ = prometheus_access(config.inventory[0].sigv4, workspace, "inventory.p")
    headers = sign(f"{workspace}/api/v1/query_range?query=up")
    assert "/eu-west-1/aps/aws4_request, SignedHeaders=host;x-amz-date;x-amz-security-token, " in headers["Authorization"]
    assert prometheus_access(None, workspace, "inventory.p") == (None, (
        "an Amazon Managed Service for Prometheus workspace takes only SigV4-signed queries: "
        "set inventory.p.sigv4.region (README: k8s-pods)"))


def test_each_attempt_is_signed_when_it_is_sent(aws_keys, slurmrestd, monkeypatch):
    """A signature is dated: a retry minutes after the first attempt, sent with its headers, is
    refused as expired. Each retry carries a signature of its own time (the clock here moves
    six minutes per signing)."""
    url, server = slurmrestd
    server.plan += [(503, b"busy"), (429, b"slow down")]
    times = iter(datetime(2026, 12, 2, 6) + timedelta(minutes=6 * n) for n in range(10))
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: next(times))
    sign, _ = prometheus_access(parse_config({"inventory": [{"name": "p", "kind": "k8s-pods", "sigv4": SIGV4,
                                                             "prometheus_url": url}]}).inventory[0].sigv4, url, "p")
    assert get_json(f"{url}/slurmdb/v0.0.38/jobs", params={"query": "up"}, sign=sign) == json.loads(ANSWER)
    sent = [headers for _, _, headers in server.requests]
    assert [h["X-Amz-Date"] for h in sent] == ["20261202T060000Z", "20261202T060600Z", "20261202T061200Z"]
    assert len({h["Authorization"] for h in sent}) == 3
