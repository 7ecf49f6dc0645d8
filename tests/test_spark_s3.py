"""Spark reads a lake that lives in S3: `engine.lake: s3a://...` with `engine.endpoint_url`,
over real HTTP to a ThreadedMotoServer that enforces the shipped cluster policy
(deploy/iam/spendlake-spark-lake.json). Each case is a whole `spendlake attribute` process,
as a platform engineer would run it, with no local lake at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal

import boto3
import botocore.auth
import botocore.config
import pytest
import yaml
from botocore.exceptions import ClientError
from moto.core.authorization import enable_iam_authentication
from moto.server import ThreadedMotoServer
from moto_policy import as_moto_sees_it
from spark_support import ORG_ATTRIBUTION, S3A_COMPAT_OPTIONS, lake_objects, org_lake, require_pyspark, s3a_jars

from service.attribution.api import attribute
from service.attribution.reconciliation import reconcile
from service.core.timewindow import parse_window
from tests.conftest import REPO
from tests.test_spark_partition_integrity import page_flipped, rows_altered

pytestmark = pytest.mark.slow  # Spark over S3A against a moto server

POLICY = (REPO / "deploy" / "iam" / "spendlake-spark-lake.json").read_text()
BUCKET, PREFIX, OTHER_BUCKET = "example-spendlake-lake", "lake", "example-other-bucket"
LAKE_URL = f"s3a://{BUCKET}/{PREFIX}"
SINCE, UNTIL = "2026-10-30T05:30:00Z", "2026-11-01T12:20:00Z"  # cuts charge periods, two months


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A local lake of the synthetic organisation, an S3 server, and the keys of a user that
    holds only the cluster policy."""
    require_pyspark()
    jars = s3a_jars()
    root = tmp_path_factory.mktemp("spark-s3")
    lake, config = org_lake(root)
    patch = pytest.MonkeyPatch()
    # The Java SDK signs User-Agent, which S3 accepts; moto re-signs with botocore, which
    # leaves it out, and would answer SignatureDoesNotMatch to every S3A request.
    patch.setattr(botocore.auth, "SIGNED_HEADERS_BLACKLIST",
                  [h for h in botocore.auth.SIGNED_HEADERS_BLACKLIST if h != "user-agent"])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    admin = {"endpoint_url": endpoint, "region_name": "us-east-1",
             "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    s3 = boto3.client("s3", **admin)
    for bucket in (BUCKET, OTHER_BUCKET):
        s3.create_bucket(Bucket=bucket)
    iam = boto3.client("iam", **admin)
    iam.create_user(UserName="spark-cluster")
    keys = iam.create_access_key(UserName="spark-cluster")["AccessKey"]
    iam.put_user_policy(UserName="spark-cluster", PolicyName="spendlake-spark-lake",
                        PolicyDocument=json.dumps(as_moto_sees_it(json.loads(POLICY))))
    try:
        yield {"lake": lake, "config": config, "root": root, "endpoint": endpoint, "admin": s3, "jars": jars,
               "keys": (keys["AccessKeyId"], keys["SecretAccessKey"])}
    finally:
        server.stop()
        patch.undo()


def upload(s3: dict, bucket: str = BUCKET, *, rollups: bool = True) -> dict[str, str]:
    """The local lake copied to s3://bucket/lake/ (the bucket emptied first); key → ETag."""
    client = s3["admin"]
    for item in client.list_objects_v2(Bucket=bucket).get("Contents", []):
        client.delete_object(Bucket=bucket, Key=item["Key"])
    for key, path in lake_objects(s3["lake"].root, rollups=rollups):
        client.put_object(Bucket=bucket, Key=f"{PREFIX}/{key}", Body=path.read_bytes())
    return objects(s3, bucket)


def objects(s3: dict, bucket: str = BUCKET) -> dict[str, str]:
    return {o["Key"]: o["ETag"] for o in s3["admin"].list_objects_v2(Bucket=bucket).get("Contents", [])}


def spendlake_on_s3(s3: dict, *args: str, lake_url: str = LAKE_URL, verbose: bool = False) -> subprocess.CompletedProcess:
    """`spendlake attribute ...` in its own process, Spark reading `lake_url` as the cluster user."""
    config = s3["root"] / "spark-s3.yaml"
    config.write_text(yaml.safe_dump({
        "lake": str(s3["root"] / "no-local-lake"),
        "attribution": ORG_ATTRIBUTION,
        "engine": {"kind": "spark", "master": "local[2]", "lake": lake_url, "endpoint_url": s3["endpoint"],
                   "options": {"spark.jars": ",".join(str(j) for j in s3["jars"]), **S3A_COMPAT_OPTIONS}},
    }))
    env = {**os.environ, "AWS_ACCESS_KEY_ID": s3["keys"][0], "AWS_SECRET_ACCESS_KEY": s3["keys"][1]}
    env.pop("AWS_SESSION_TOKEN", None)
    with enable_iam_authentication():
        done = subprocess.run([sys.executable, "-m", "service.cli.main", "--config", str(config),
                               *(["-v"] if verbose else []), "attribute", *args],
                              env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert not (s3["root"] / "no-local-lake").exists()  # nothing local was read or made
    return done


def test_attribution_from_an_s3_lake_equals_duckdb_and_spark_writes_nothing(s3):
    before = upload(s3)
    done = spendlake_on_s3(s3, "--since", SINCE, "--until", UNTIL, "--by", "team,project",
                           "--granularity", "day", "--explain", "--format", "json", verbose=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"Spark reads {LAKE_URL}: 2 periods from their stored rollups, 0 rolled up" in done.stderr
    duck = attribute(s3["lake"], s3["config"], parse_window(SINCE, UNTIL), by=("team", "project"), granularity="day",
                     explain=True).to_json()
    answered = json.loads(done.stdout)
    answered.pop("notes", None)  # the command's words (with_notes: the days the window cuts); attribute() has none
    assert duck["rows"] and answered == duck
    assert objects(s3) == before  # read-only: not one object added, changed or removed


def test_check_on_an_s3_lake_without_rollups_reconciles_to_the_cent(s3):
    upload(s3, rollups=False)
    done = spendlake_on_s3(s3, "--check", "--format", "json", verbose=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"Spark reads {LAKE_URL}: 0 periods from their stored rollups, 2 rolled up" in done.stderr
    rows = json.loads(done.stdout)
    expected = reconcile(s3["lake"], s3["config"])
    assert len(rows) == len(expected) > 0
    assert all(Decimal(r["difference"]) == 0 for r in rows)
    assert sorted((r["source"], r["billing_period"], r["cost"], Decimal(r["source_total"])) for r in rows) == \
        sorted((e.source, e.billing_period, e.cost, e.source_total) for e in expected)


def test_a_lake_outside_the_policy_is_access_denied_and_named(s3):
    upload(s3, OTHER_BUCKET)
    done = spendlake_on_s3(s3, "--since", SINCE, "--until", UNTIL, lake_url=f"s3a://{OTHER_BUCKET}/{PREFIX}")
    assert done.returncode == 3, done.stderr[-3000:]
    assert f"s3a://{OTHER_BUCKET}/{PREFIX}" in done.stderr and "access denied" in done.stderr
    assert "spendlake-spark-lake.json" in done.stderr
    assert s3["keys"][1] not in done.stderr  # the secret key never reaches a message


def test_the_cluster_policy_reads_and_never_writes(s3):
    upload(s3)
    user = boto3.client("s3", endpoint_url=s3["endpoint"], region_name="us-east-1",
                        aws_access_key_id=s3["keys"][0], aws_secret_access_key=s3["keys"][1],
                        # a plain signed body: moto cannot verify aws-chunked uploads with a trailer
                        config=botocore.config.Config(request_checksum_calculation="when_required"))
    ledger = f"{PREFIX}/_ledger/deliveries.json"
    with enable_iam_authentication():
        assert user.get_object(Bucket=BUCKET, Key=ledger)["Body"].read()
        assert user.list_objects_v2(Bucket=BUCKET, Prefix=f"{PREFIX}/costs/")["KeyCount"] > 0
        for write in (lambda: user.put_object(Bucket=BUCKET, Key=f"{PREFIX}/costs/x.parquet", Body=b"x"),
                      lambda: user.delete_object(Bucket=BUCKET, Key=ledger),
                      lambda: user.get_object(Bucket=OTHER_BUCKET, Key=ledger)):
            with pytest.raises(ClientError, match="AccessDenied"):
                write()


@pytest.mark.parametrize("damage", ["deleted", "footer cut at its recorded size"])
def test_35_36_a_damaged_tag_snapshot_in_s3_is_named_by_its_record_and_footer_read_through_s3a(s3, damage):
    upload(s3)
    [key] = [k for k in objects(s3) if k.startswith(f"{PREFIX}/resource_tags/") and k.endswith("/data.parquet")]
    if damage == "deleted":
        s3["admin"].delete_object(Bucket=BUCKET, Key=key)
    else:  # the listing's size matches the record: only the footer, read by range, tells
        data = s3["admin"].get_object(Bucket=BUCKET, Key=key)["Body"].read()
        s3["admin"].put_object(Bucket=BUCKET, Key=key, Body=data[:-8] + bytes(8))
    done = spendlake_on_s3(s3, "--since", SINCE, "--until", UNTIL)
    assert done.returncode == 3, done.stderr[-3000:]
    state = "missing" if damage == "deleted" else "truncated"
    assert f"s3a://{BUCKET}/{key}" in done.stderr and f"is {state}" in done.stderr, done.stderr
    assert "spendlake inventory --source org-tags" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("damage", ["footer row count altered", "data page flipped"])
def test_36_37_a_damaged_cost_partition_in_s3_is_named_through_s3a(s3, damage):
    upload(s3, rollups=False)  # the periods rolled up from the raw lines
    key = sorted(k for k in objects(s3) if k.startswith(f"{PREFIX}/costs/") and k.endswith("/data.parquet"))[0]
    data = s3["admin"].get_object(Bucket=BUCKET, Key=key)["Body"].read()
    if damage == "footer row count altered":  # the recorded size: only the footer, read by range, tells
        damaged, says = rows_altered(data), " rows, the ledger says "
    else:  # size and footer intact: Spark's read fails, traced to the file by its hash read through S3A
        damaged, says = page_flipped(data, "BilledCost"), "its SHA-256 differs from the one recorded at commit"
    s3["admin"].put_object(Bucket=BUCKET, Key=key, Body=damaged)
    done = spendlake_on_s3(s3, "--since", SINCE, "--until", UNTIL)
    assert done.returncode == 3, done.stderr[-3000:]
    assert f"error: s3a://{BUCKET}/{key}: cost partition " in done.stderr and says in done.stderr, done.stderr
    assert "spendlake ingest --source org" in done.stderr and "Traceback" not in done.stderr
