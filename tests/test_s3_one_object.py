"""An S3 location that names one object (`s3://b/focus/one.csv`) is read as a local location
naming one file is (README's AWS and FOCUS sections: "or one file"), over real HTTP to a moto
server; a folder named like it is still a folder."""

from __future__ import annotations

import gzip
from decimal import Decimal

import yaml

from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import ingest
from tests.aws_exports import legacy_csv, line
from tests.test_aws_faults import moto_server, s3  # noqa: F401 (fixtures)
from tests.test_lake_integrity import BILLED, SAMPLE


def config(tmp_path, name, kind, location, endpoint=None):
    source = {"name": "one", "kind": kind, "location": location,
              **({"endpoint_url": endpoint, "region": "us-east-1"} if endpoint else {})}
    data = {"lake": str(tmp_path / name), "sources": [source]}
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(data))
    return parse_config(data, str(tmp_path / f"{name}.yaml"))


def billed(cfg) -> Decimal:
    return Lake(cfg.lake).query().execute("SELECT sum(BilledCost) FROM costs").fetchone()[0]


def test_a_focus_location_naming_one_object_reads_it_as_a_local_file_is_read(tmp_path, moto_server, s3):
    # it failed: "no FOCUS files … under s3://…/one.csv — point it at the folder" (exit 3)
    client, bucket = s3
    client.put_object(Bucket=bucket, Key="focus/one.csv", Body=SAMPLE.read_bytes())
    client.put_object(Bucket=bucket, Key="focus/one.csv.bak", Body=SAMPLE.read_bytes())  # beside it: not read
    client.put_object(Bucket=bucket, Key="focus/other.csv", Body=SAMPLE.read_bytes())
    remote = config(tmp_path, "s3", "focus", f"s3://{bucket}/focus/one.csv", moto_server)
    result = ingest(remote)
    assert [o.status for o in result.outcomes] == ["committed"], [str(o.error) for o in result.outcomes]
    local = config(tmp_path, "local", "focus", str(SAMPLE))
    assert [o.status for o in ingest(local).outcomes] == ["committed"]
    assert str(billed(remote)) == str(billed(local)) == BILLED
    assert [o.status for o in ingest(remote).outcomes] == ["unchanged"]  # its delivery id is stable


def test_a_legacy_cur_location_naming_one_object_is_read(tmp_path, moto_server, s3):
    client, bucket = s3
    client.put_object(Bucket=bucket, Key="cur/cur.csv.gz", Body=gzip.compress(legacy_csv([line(cost="4")])))
    cfg = config(tmp_path, "s3", "aws-cur", f"s3://{bucket}/cur/cur.csv.gz", moto_server)
    assert [o.status for o in ingest(cfg).outcomes] == ["committed"]
    assert billed(cfg) == Decimal(4)


def test_an_object_named_like_the_location_beside_a_folder_of_that_name_leaves_the_folder_read(
        tmp_path, moto_server, s3):
    client, bucket = s3
    client.put_object(Bucket=bucket, Key="focus", Body=b"not a bill")
    client.put_object(Bucket=bucket, Key="focus/part.csv", Body=SAMPLE.read_bytes())
    cfg = config(tmp_path, "s3", "focus", f"s3://{bucket}/focus", moto_server)
    assert [o.status for o in ingest(cfg).outcomes] == ["committed"]
    assert str(billed(cfg)) == BILLED


def test_a_manifests_keys_resolve_beside_one_object_whose_folder_starts_with_a_dot_listed_or_not(
        tmp_path, moto_server, s3):
    """review49 #7: the object's folder was its path's parent with dots stripped (`.exports` read
    as `exports`), and before a listing one object read as a folder (keys under the key itself)."""
    from connectors.storage import Storage

    client, bucket = s3
    client.put_object(Bucket=bucket, Key=".exports/one.csv", Body=SAMPLE.read_bytes())
    client.put_object(Bucket=bucket, Key="focus/part.csv", Body=SAMPLE.read_bytes())
    one = config(tmp_path, "one", "focus", f"s3://{bucket}/.exports/one.csv", moto_server).sources[0]
    assert Storage(one).object("part.csv").uri == f"s3://{bucket}/.exports/part.csv"  # no listing ran
    listed = Storage(one)
    assert [o.key for o in listed.list()] == ["one.csv"]
    assert listed.object("part.csv").uri == f"s3://{bucket}/.exports/part.csv"
    folder = config(tmp_path, "folder", "focus", f"s3://{bucket}/focus", moto_server).sources[0]
    assert Storage(folder).object("part.csv").uri == f"s3://{bucket}/focus/part.csv"
