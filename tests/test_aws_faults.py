"""AWS billing ingest under bad input and faults (RELIABILITY.md 1-21 as they concern the bill):
bad files, S3 errors injected over real HTTP (moto server + botocore `before-send`), credentials
in DEBUG logs, SIGKILL mid-commit, two ingests at once, hostile keys."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal

import boto3
import duckdb
import pytest
import yaml
from botocore.awsrequest import AWSResponse
from click.testing import CliRunner
from moto.server import ThreadedMotoServer

from service.cli.main import cli
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import ingest
from tests.aws_exports import cur2_table, legacy_csv, line, local_put, s3_put, to_bytes, write_cur2, write_legacy
from tests.conftest import REPO


def local_config(tmp_path, location, kind="aws-cur"):
    return parse_config({"lake": str(tmp_path / "lake"),
                         "sources": [{"name": "cur", "kind": kind, "location": str(location)}]})


def failure(result) -> str:
    [outcome] = [o for o in result.outcomes if o.status == "failed"]
    return str(outcome.error)


# ---- bad files ------------------------------------------------------------------------------

def test_cost_that_does_not_parse_names_file_row_and_column(tmp_path):
    export = tmp_path / "cur.csv.gz"
    export.write_bytes(gzip.compress(legacy_csv([line(cost="1"), line(cost="2"), line(cost="12,5"),
                                                 line(cost="oops")])))
    cfg = local_config(tmp_path, export)
    message = failure(ingest(cfg))
    assert str(export) in message and "row 3" in message and "lineItem/UnblendedCost" in message
    assert "'12,5'" in message
    assert not Lake(cfg.lake).ledger()


def test_missing_required_column_names_file_and_column(tmp_path):
    export = tmp_path / "cur.csv"
    columns = [c for c in legacy_csv([line()]).decode().splitlines()[0].split(",") if c != "lineItem/CurrencyCode"]
    export.write_bytes(legacy_csv([line()], columns=columns))
    message = failure(ingest(local_config(tmp_path, export)))
    assert str(export) in message and "line_item_currency_code" in message


def test_a_cur2_export_whose_query_left_out_the_cost_says_to_add_it(tmp_path):
    # it asked "is this an AWS cost and usage report?" of a file with every other CUR 2.0 column
    con = duckdb.connect()
    relation = cur2_table(con, [line()]).project("* EXCLUDE (line_item_unblended_cost)")
    write_cur2(local_put(tmp_path / "exp"), prefix="p", export="ex", period="2026-10", execution="e1",
               parts=[to_bytes(con, relation, tmp_path, "parquet")], fmt="parquet")
    message = failure(ingest(local_config(tmp_path, tmp_path / "exp", "aws-cur2")))
    assert "line_item_unblended_cost" in message and "add them to its columns (CUR 2.0: its SQL query)" in message


@pytest.mark.parametrize("damage, expected", [
    (lambda body: b"", "empty"),
    (lambda body: gzip.compress(body)[: len(gzip.compress(body)) // 2], "cannot read"),
    (lambda body: gzip.compress(body.replace(b"Amazon Elastic", b"Amazon \xff\xfe Elastic")), "cannot read"),
])
def test_damaged_files_fail_with_the_file_named(tmp_path, damage, expected):
    body = legacy_csv([line(cost=str(n)) for n in range(1, 3000)])
    export = tmp_path / "cur.csv.gz"
    export.write_bytes(damage(body))
    cfg = local_config(tmp_path, export)
    message = failure(ingest(cfg))
    assert str(export) in message and expected in message
    assert not Lake(cfg.lake).ledger()


def test_manifest_key_climbing_out_of_a_local_source_is_refused(tmp_path):
    secret = tmp_path / "outside.csv.gz"
    secret.write_bytes(gzip.compress(legacy_csv([line(cost="666")])))
    export = tmp_path / "exp"
    write_legacy(lambda key, body: (export / key).parent.mkdir(parents=True, exist_ok=True) or
                 (export / key).write_bytes(body), prefix="cur", report="rep", period="2026-10", assembly="a1",
                 parts=[[line()]], extra_keys=("cur/rep/20261001-20261101/../../../../outside.csv.gz",))
    cfg = local_config(tmp_path, export)
    message = failure(ingest(cfg))
    assert "outside the source location" in message
    assert not Lake(cfg.lake).ledger()


@pytest.mark.parametrize("kind", ["aws-cur", "aws-cur2"])
def test_a_manifest_listing_no_data_files_names_the_manifest(tmp_path, kind):
    # it said "the delivery names no data files", naming no file: which period's manifest, of which export?
    export = tmp_path / "exp"
    put = local_put(export)
    if kind == "aws-cur":
        write_legacy(put, prefix="cur", report="rep", period="2026-10", assembly="a1", parts=[])
        manifest = export / "cur/rep/20261001-20261101/rep-Manifest.json"
    else:
        write_cur2(put, prefix="p", export="ex", period="2026-10", execution="e1", parts=[], fmt="parquet")
        manifest = export / "p/ex/metadata/BILLING_PERIOD=2026-10/ex-Manifest.json"
    cfg = local_config(tmp_path, export, kind)
    message = failure(ingest(cfg))
    assert str(manifest) in message and "lists no data files" in message
    assert not Lake(cfg.lake).ledger()


# ---- S3 over real HTTP ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def moto_server():
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(moto_server, request):
    client = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    bucket = "bills-" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    client.create_bucket(Bucket=bucket)
    return client, bucket


def s3_config(tmp_path, endpoint, bucket, **options):
    data = {"lake": str(tmp_path / "lake"), "sources": [
        {"name": "cur", "kind": "aws-cur", "location": f"s3://{bucket}/cur", "endpoint_url": endpoint,
         "region": "us-east-1", **options}]}
    (tmp_path / "spendlake.yaml").write_text(yaml.safe_dump(data))
    return parse_config(data, str(tmp_path / "spendlake.yaml"))


class Injector:
    """A botocore `before-send` hook on every client Storage creates: answers the chosen
    operation with an S3 error `times` times (None: always) and counts the attempts."""

    def __init__(self, monkeypatch, operation: str, status: int, code: str, times: int | None):
        self.operation, self.status, self.code, self.times = operation, status, code, times
        self.attempts = 0
        original = boto3.session.Session.client

        def client(session, *args, **kwargs):
            made = original(session, *args, **kwargs)
            made.meta.events.register(f"before-send.s3.{operation}", self)
            return made

        monkeypatch.setattr(boto3.session.Session, "client", client)

    def __call__(self, request, **_):
        self.attempts += 1
        if self.times is not None and self.attempts > self.times:
            return None
        body = f"<Error><Code>{self.code}</Code><Message>injected</Message></Error>".encode()
        return AWSResponse(request.url, self.status, {"Content-Type": "application/xml"}, _Raw(body))


class _Raw:
    def __init__(self, body: bytes):
        self.body = body

    def stream(self, **_):
        yield self.body


def deliver(s3, period="2026-10", cost="5"):
    client, bucket = s3
    write_legacy(s3_put(client, bucket), prefix="cur", report="rep", period=period, assembly=f"a-{period}",
                 parts=[[line(period, cost)]], bucket=bucket)


def test_slowdown_twice_then_success(tmp_path, moto_server, s3, monkeypatch):
    deliver(s3)
    injected = Injector(monkeypatch, "GetObject", 503, "SlowDown", times=2)
    cfg = s3_config(tmp_path, moto_server, s3[1])
    result = ingest(cfg)
    assert [o.status for o in result.outcomes] == ["committed"]
    assert injected.attempts >= 3
    assert Lake(cfg.lake).ledger()[0].totals[0].billed_cost == Decimal(5)


def test_slowdown_every_time_fails_after_the_configured_attempts(tmp_path, moto_server, s3, monkeypatch):
    deliver(s3)
    injected = Injector(monkeypatch, "ListObjectsV2", 503, "SlowDown", times=None)
    cfg = s3_config(tmp_path, moto_server, s3[1], max_attempts=2)
    message = failure(ingest(cfg))
    assert injected.attempts == 2 and "SlowDown" in message
    assert not Lake(cfg.lake).ledger()
    assert Lake(cfg.lake).read_state("sources")["cur"]["failures_total"] == 1


def test_access_denied_names_the_action_and_the_key(tmp_path, moto_server, s3, monkeypatch):
    deliver(s3)
    Injector(monkeypatch, "GetObject", 403, "AccessDenied", times=None)
    cfg = s3_config(tmp_path, moto_server, s3[1])
    message = failure(ingest(cfg))
    assert "s3:GetObject" in message and f"s3://{s3[1]}/cur/rep/20261001-20261101/" in message


def test_expired_credentials_one_sentence_and_no_retry_storm(tmp_path, moto_server, s3, monkeypatch):
    deliver(s3)
    injected = Injector(monkeypatch, "ListObjectsV2", 400, "ExpiredToken", times=None)
    cfg_path = s3_config(tmp_path, moto_server, s3[1]) and tmp_path / "spendlake.yaml"
    result = CliRunner().invoke(cli, ["--config", str(cfg_path), "ingest"], catch_exceptions=False)
    assert result.exit_code == 3
    assert injected.attempts == 1
    [error_line] = [ln for ln in result.output.splitlines() if "FAILED" in ln]
    assert "expired or invalid" in error_line and "refresh them" in error_line



def test_5_a_damaged_parquet_file_among_several_is_named_alone_by_its_s3_uri(tmp_path, moto_server, s3):
    # The error named every file of the delivery, the good ones first, and DuckDB's text named
    # the damaged one only by its download's hashed name in the lake's scratch directory.
    client, bucket = s3
    con = duckdb.connect()
    good = to_bytes(con, cur2_table(con, [line(cost="3")]), tmp_path, "parquet")
    uris = write_cur2(s3_put(client, bucket), prefix="", export="ex", period="2026-10", execution="e1",
                      parts=[good, good[:len(good) // 2]], fmt="parquet", bucket=bucket)
    cfg = s3_config(tmp_path, moto_server, bucket, kind="aws-cur2", location=f"s3://{bucket}/ex")
    message = failure(ingest(cfg))
    assert message.startswith(f"{uris[1]}: cannot read the export") and uris[0] not in message, message
    assert "_staging" not in message and "re-export it" in message
    assert not Lake(cfg.lake).ledger()

@pytest.mark.slow
def test_hostile_keys_never_write_outside_the_lake(tmp_path, moto_server, s3):
    client, bucket = s3
    hostile = "cur/rep/20261001-20261101/a1/../../../../../../../../tmp/escape.csv.gz"
    client.put_object(Bucket=bucket, Key=hostile, Body=gzip.compress(legacy_csv([line(cost="3")])))
    write_legacy(s3_put(client, bucket), prefix="cur", report="rep", period="2026-10", assembly="a1",
                 parts=[[line(cost="4")]], bucket=bucket, extra_keys=(hostile,))
    cfg = s3_config(tmp_path, moto_server, bucket)
    before = set((tmp_path.parent).rglob("*"))
    result = ingest(cfg)
    created = {p for p in set(tmp_path.parent.rglob("*")) - before if not p.is_relative_to(tmp_path / "lake")}
    assert created == set()
    assert not os.path.exists("/tmp/escape.csv.gz")
    assert [o.status for o in result.outcomes] in (["committed"], ["failed"])


@pytest.mark.slow
def test_debug_logs_never_show_credentials(tmp_path, moto_server, s3):
    deliver(s3)
    s3_config(tmp_path, moto_server, s3[1])
    secrets = {"AWS_ACCESS_KEY_ID": "AKIAZZZZEXAMPLEKEY42", "AWS_SECRET_ACCESS_KEY": "s3cr3t/Example+Secret+Key0123456789abcd",
               "AWS_SESSION_TOKEN": "FwoGZXIvYXdzEXAMPLEsessionTOKENvalue0123456789"}
    env = {**os.environ, **secrets, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-m", "service", "--config", str(tmp_path / "spendlake.yaml"), "-vv",
                          "ingest"], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    output = run.stdout + run.stderr
    assert "DEBUG" in output and "botocore" in output  # the request logging did run
    for value in secrets.values():
        assert value not in output
    assert "FwoGZXIvYXdz" not in output and "s3cr3t" not in output


# ---- processes: crash mid-commit, two at once -----------------------------------------------

@pytest.mark.slow  # a subprocess ingest, killed mid-commit
def test_sigkill_mid_commit_leaves_old_totals_and_nothing_stray(tmp_path):
    export = tmp_path / "exp" / "cur.csv"
    export.parent.mkdir()
    export.write_bytes(legacy_csv([line(cost="2"), line(cost="3")]))
    cfg_file = tmp_path / "spendlake.yaml"
    cfg_file.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "cur", "kind": "aws-cur", "location": str(export.parent)}]}))
    spendlake = [sys.executable, "-m", "service", "--config", str(cfg_file), "ingest"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    assert subprocess.run(spendlake, env=env, capture_output=True, timeout=120).returncode == 0
    lake = Lake(tmp_path / "lake")
    # A big restatement of the same month, killed while its staged file is being written.
    one_row = tmp_path / "one.csv"
    one_row.write_bytes(legacy_csv([line(cost="1")]))
    duckdb.execute(f"COPY (SELECT t.* REPLACE (CAST(i AS VARCHAR) AS \"lineItem/UnblendedCost\") "
                   f"FROM read_csv('{one_row}', all_varchar=true) t, range(300000) r(i)) TO '{export}' (HEADER)")
    process = subprocess.Popen(spendlake, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while not list(lake.staging.glob("costs-*/*/*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert process.poll() is None, "ingest finished before it could be killed; make the delivery bigger"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert lake.query().execute("SELECT sum(BilledCost), count(*) FROM costs").fetchone() == (Decimal(5), 2)
    table_files = [p for p in (tmp_path / "lake" / "costs").rglob("*") if p.is_file()]
    assert [p.relative_to(tmp_path / "lake") for p in table_files] == [
        lake.partition_file("costs", [("source", "cur"), ("billing_period", "2026-10")]).relative_to(lake.root)]
    assert list(lake.staging.glob("costs-*"))  # the crash left its staging behind ...
    export.write_bytes(legacy_csv([line(cost="7")]))
    assert subprocess.run(spendlake, env=env, capture_output=True, timeout=120).returncode == 0
    assert not list(lake.staging.glob("costs-*"))  # ... and the next ingest cleaned it
    assert lake.query().execute("SELECT sum(BilledCost) FROM costs").fetchone() == (Decimal(7),)


def test_12_a_second_ingest_at_once_refuses_with_the_pid(tmp_path):
    export = tmp_path / "cur.csv"
    export.write_bytes(legacy_csv([line()]))
    cfg_file = tmp_path / "spendlake.yaml"
    cfg_file.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "cur", "kind": "aws-cur", "location": str(export)}]}))
    with Lake(tmp_path / "lake").lock("ingest"):
        result = CliRunner().invoke(cli, ["--config", str(cfg_file), "ingest"], catch_exceptions=False)
    assert result.exit_code == 3
    assert f"pid {os.getpid()}" in result.output
    assert not Lake(tmp_path / "lake").ledger()


@pytest.mark.slow
def test_manifest_replaced_while_the_period_is_read_commits_nothing(tmp_path, moto_server, s3, monkeypatch):
    from connectors.storage import Storage

    deliver(s3, cost="5")
    client, bucket = s3
    original = Storage.local_copy

    def copy_then_redeliver(storage, obj, scratch):
        path = original(storage, obj, scratch)
        write_legacy(s3_put(client, bucket), prefix="cur", report="rep", period="2026-10", assembly="newer",
                     parts=[[line(cost="8")]], bucket=bucket)
        return path

    monkeypatch.setattr(Storage, "local_copy", copy_then_redeliver)
    cfg = s3_config(tmp_path, moto_server, bucket)
    message = failure(ingest(cfg))
    assert "manifest changed" in message and f"s3://{bucket}/cur/rep/20261001-20261101/rep-Manifest.json" in message
    assert not Lake(cfg.lake).ledger()
    monkeypatch.setattr(Storage, "local_copy", original)
    ingest(cfg)
    assert [(e.delivery_id, e.totals[0].billed_cost) for e in Lake(cfg.lake).ledger()] == [("newer", Decimal(8))]


# The least privilege a billing source needs: list the bucket, read the export. The shipped
# deploy/iam policy must grant at least this; the test shows nothing more is used.
BILLING_READ_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::bills"},
    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::bills/cur/*"}]}


@pytest.mark.slow
@pytest.mark.parametrize("allow_get", [True, False])
def test_least_privilege_policy_enforced_in_moto(tmp_path, monkeypatch, allow_get):
    import json

    from botocore.exceptions import ClientError
    from moto import mock_aws
    from moto.core import set_initial_no_auth_action_count
    from moto_policy import as_moto_sees_it

    policy = json.loads(json.dumps(BILLING_READ_POLICY))
    if not allow_get:
        policy["Statement"].pop()
    monkeypatch.delenv("AWS_SESSION_TOKEN")

    @mock_aws
    @set_initial_no_auth_action_count(6)  # the set-up below; every later call is authorised
    def scenario():
        client = boto3.session.Session(region_name="us-east-1").client("s3")
        client.create_bucket(Bucket="bills")
        write_legacy(s3_put(client, "bills"), prefix="cur", report="rep", period="2026-10", assembly="a1",
                     parts=[[line(cost="4")]], bucket="bills")
        iam = boto3.session.Session(region_name="us-east-1").client("iam")
        iam.create_user(UserName="spendlake")
        iam.put_user_policy(UserName="spendlake", PolicyName="billing-read",
                            PolicyDocument=json.dumps(as_moto_sees_it(policy)))
        key = iam.create_access_key(UserName="spendlake")["AccessKey"]
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
        result = ingest(parse_config({"lake": str(tmp_path / "lake"), "sources": [
            {"name": "cur", "kind": "aws-cur", "location": "s3://bills/cur", "region": "us-east-1"}]}))
        with pytest.raises(ClientError, match="AccessDenied"):
            boto3.session.Session(region_name="us-east-1").client("s3").delete_object(
                Bucket="bills", Key="cur/rep/20261001-20261101/rep-Manifest.json")
        return result

    result = scenario()
    if allow_get:
        assert [o.status for o in result.outcomes] == ["committed"]
    else:
        message = failure(result)
        assert "access denied for s3:GetObject" in message
        assert "s3://bills/cur/rep/20261001-20261101/rep-Manifest.json" in message
