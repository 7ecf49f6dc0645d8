"""connectors.storage: one way to list, version and fetch local files and S3 objects."""

from __future__ import annotations

import os
import re

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends

from connectors.storage import Storage, StoredObject, fingerprint, suffix_of
from service.core.config import SourceConfig
from service.core.errors import SourceError


def source(location, **options):
    return SourceConfig(name="src", kind="aws-cur", location=str(location), **options)


def test_local_listing_skips_hidden_files_and_keys_are_relative(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "x.csv.gz").write_bytes(b"12345")
    (tmp_path / "a" / ".partial.csv").write_bytes(b"tmp")
    (tmp_path / "top.csv").write_bytes(b"1")
    storage = Storage(source(tmp_path))
    assert [(o.key, o.size) for o in storage.list()] == [("a/b/x.csv.gz", 5), ("top.csv", 1)]
    assert [o.key for o in storage.list("a")] == ["a/b/x.csv.gz"]
    assert all(o.modified == (tmp_path / o.key).stat().st_mtime for o in storage.list())
    single = Storage(source(tmp_path / "top.csv"))
    assert [o.key for o in single.list()] == ["top.csv"] and single.local_paths() == [tmp_path / "top.csv"]


def test_missing_local_location_names_the_config_path(tmp_path):
    with pytest.raises(SourceError, match=r"sources\.src\.location"):
        Storage(source(tmp_path / "nope")).list()


def test_fingerprint_changes_when_a_file_is_replaced(tmp_path):
    path = tmp_path / "cur.csv"
    path.write_bytes(b"a,b\n1,2\n")
    storage = Storage(source(path))
    first = fingerprint(storage.list())
    assert fingerprint(storage.list()) == first
    os.utime(path, ns=(1, 1))
    assert fingerprint(storage.list()) != first
    [obj] = storage.list()
    assert storage.current_version(obj) == obj.version
    path.unlink()
    assert storage.current_version(obj) is None


def test_suffixes():
    assert [suffix_of(n) for n in ("x.CSV.gz", "y.snappy.parquet", "z.csv", "m.json")] == [
        ".csv.gz", ".parquet", ".csv", ".json"]


def test_s3_location_needs_a_bucket():
    with pytest.raises(SourceError, match="no bucket"):
        Storage(source("s3:///prefix"))


@pytest.mark.slow
@mock_aws
def test_s3_listing_follows_pages_and_downloads_under_hashed_names(tmp_path):
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket="bills")
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]  # straight into moto: 2,500 API calls take long
    for n in range(2500):
        backend.put_object("bills", f"cur/part-{n:04d}.csv", b"x")
    client.put_object(Bucket="bills", Key="cur/../../../escape.csv.gz", Body=b"hostile")
    client.put_object(Bucket="bills", Key="elsewhere/y.csv", Body=b"y")
    storage = Storage(source("s3://bills/cur", region="us-east-1"))
    listing = storage.list()
    assert len(listing) == 2501 and listing[-1].key == "part-2499.csv"
    assert all(o.modified > 1.7e9 for o in listing)  # S3 LastModified, seconds since the epoch
    hostile = next(o for o in listing if "escape" in o.key)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    local = storage.local_copy(hostile, scratch)
    assert local.parent == scratch and local.read_bytes() == b"hostile" and local.name.endswith(".csv.gz")
    assert storage.current_version(hostile) == hostile.version


@mock_aws
def test_s3_missing_key_and_size_mismatch_are_named(tmp_path):
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket="bills")
    client.put_object(Bucket="bills", Key="cur/a.csv", Body=b"12345")
    storage = Storage(source("s3://bills/cur", region="us-east-1"))
    with pytest.raises(SourceError, match=r"s3://bills/cur/gone\.csv"):
        storage.local_copy(storage.object("gone.csv"), tmp_path)
    [obj] = storage.list()
    with pytest.raises(SourceError, match="expected 9"):
        storage.local_copy(StoredObject(obj.uri, obj.key, 9, obj.version), tmp_path)
    assert not list(tmp_path.glob("*.csv")) or all(p.stat().st_size == 5 for p in tmp_path.glob("*.csv"))


def test_files_below_hidden_or_temporary_folders_are_not_listed_and_each_folder_is_told(tmp_path):
    """A Spark job's `_temporary/` or an export's `.partial/` copy read beside the finished
    files counted their rows twice: Arrow and Spark leave such folders unread, and so does spendlake."""
    for key in ("2026-10.csv", "_temporary/0/task/2026-10.csv", "_temporary/0/2026-11.csv", ".partial/2026-10.csv",
                "_temporary/_SUCCESS", "a/.git/x.parquet", "a/b_c/y.csv"):
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_bytes(b"x")
    storage = Storage(source(tmp_path))
    assert [o.key for o in storage.list()] == ["2026-10.csv", "a/b_c/y.csv"]
    storage.list()  # listed again: still told once, with the same count
    told = {path: re.search(r"starts with '(.)' .*: its (\d+) data file", why).groups()
            for path, why in storage.passed_over.items()}
    assert told == {f"{tmp_path}/_temporary": ("_", "2"), f"{tmp_path}/.partial": (".", "1"),
                    f"{tmp_path}/a/.git": (".", "1")}


@mock_aws
def test_s3_keys_below_hidden_or_temporary_folders_are_not_listed(tmp_path):
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket="bills")
    for key in ("cur/2026-10.csv", "cur/_temporary/0/2026-10.csv", "cur/.partial/2026-10.csv"):
        client.put_object(Bucket="bills", Key=key, Body=b"x")
    storage = Storage(source("s3://bills/cur", region="us-east-1"))
    assert [o.key for o in storage.list()] == ["2026-10.csv"]
    assert sorted(storage.passed_over) == ["s3://bills/cur/.partial", "s3://bills/cur/_temporary"]


@mock_aws
def test_6_an_s3_object_replaced_by_one_of_the_same_size_after_it_was_listed_is_not_read(tmp_path):
    """The size check misses a rewrite of the same length: the listed ETag goes with the GET."""
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket="bills")
    client.put_object(Bucket="bills", Key="cur/a.csv", Body=b"12345")
    storage = Storage(source("s3://bills/cur", region="us-east-1"))
    [listed] = storage.list()
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    assert storage.local_copy(listed, tmp_path / "one").read_bytes() == b"12345"
    client.put_object(Bucket="bills", Key="cur/a.csv", Body=b"67890")
    with pytest.raises(SourceError, match=r"s3://bills/cur/a\.csv: changed while it was read .* run ingest again"):
        storage.local_copy(listed, tmp_path / "two")
    assert not list((tmp_path / "two").iterdir())
    [again] = storage.list()
    assert storage.local_copy(again, tmp_path / "two").read_bytes() == b"67890"


@pytest.mark.slow
@mock_aws
def test_6_a_large_s3_object_replaced_after_it_was_listed_is_not_read(tmp_path):
    """Past the multipart threshold the transfer's ranged GETs carry the listed ETag."""
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket="bills")
    client.put_object(Bucket="bills", Key="cur/big.csv", Body=b"1" * (9 << 20))
    storage = Storage(source("s3://bills/cur", region="us-east-1"))
    [listed] = storage.list()
    assert storage.local_copy(listed, tmp_path).stat().st_size == 9 << 20
    client.put_object(Bucket="bills", Key="cur/big.csv", Body=b"2" * (9 << 20))
    for stale in tmp_path.iterdir():
        stale.unlink()
    with pytest.raises(SourceError, match="changed while it was read"):
        storage.local_copy(listed, tmp_path)
