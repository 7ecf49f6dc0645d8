"""An S3 object deleted between the listing and the read, as real AWS answers it: a GET or HEAD
of a missing key is 403 (not 404) to a caller without s3:ListBucket on it, and the shipped
policy (deploy/iam/spendlake-readonly.json) grants ListBucket only under the export's prefix.
moto answers 404, so a botocore `before-send` hook answers 403 for the keys deleted, over real
HTTP to a moto server."""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlparse

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from connectors.storage import Storage
from service.core.lake import Lake
from service.ingest.billing import ingest
from tests.aws_exports import line, s3_put, write_legacy
from tests.test_aws_faults import _Raw, failure, moto_server, s3, s3_config  # noqa: F401 (fixtures)


class DeniedWhenMissing:
    """On every client Storage creates: a GetObject or HeadObject of a key in `deleted` answers
    403 AccessDenied, as AWS does when the caller may not list that key; with `listable` False, a
    listing whose prefix is such a key is refused too (a policy granting no ListBucket there)."""

    def __init__(self, monkeypatch, listable: bool = True):
        self.listable = listable
        self.deleted: set[str] = set()
        self.denied = 0
        original = boto3.session.Session.client

        def client(session, *args, **kwargs):
            made = original(session, *args, **kwargs)
            for operation in ("GetObject", "HeadObject", "ListObjectsV2"):
                made.meta.events.register(f"before-send.s3.{operation}", self)
            return made

        monkeypatch.setattr(boto3.session.Session, "client", client)

    def __call__(self, request, **_):
        url = urlparse(request.url)
        if request.method == "GET" and "list-type=2" in url.query:
            if self.listable or parse_qs(url.query).get("prefix", [""])[0] not in self.deleted:
                return None
        elif unquote(url.path).split("/", 2)[2] not in self.deleted:
            return None
        self.denied += 1
        body = b"" if request.method == "HEAD" else b"<Error><Code>AccessDenied</Code><Message>x</Message></Error>"
        return AWSResponse(request.url, 403, {"Content-Type": "application/xml"}, _Raw(body))


def deliver_two_parts(s3) -> list[str]:
    client, bucket = s3
    return write_legacy(s3_put(client, bucket), prefix="cur", report="rep", period="2026-10", assembly="a1",
                        parts=[[line(cost="2")], [line(cost="3")]], bucket=bucket)


def delete_before_reading(monkeypatch, s3, denied, key_of):
    """Storage.local_copy deletes `key_of(obj)` from the bucket before its first download."""
    client, bucket = s3
    original = Storage.local_copy

    def copy(storage, obj, scratch):
        key = key_of(obj)
        if key and key not in denied.deleted:
            client.delete_object(Bucket=bucket, Key=key)
            denied.deleted.add(key)
        return original(storage, obj, scratch)

    monkeypatch.setattr(Storage, "local_copy", copy)


def test_a_part_deleted_since_the_listing_reads_not_found_not_access_denied(tmp_path, moto_server, s3, monkeypatch):
    # it read "access denied for s3:GetObject … grant s3:GetObject", sending the user to IAM
    keys = deliver_two_parts(s3)
    bucket = s3[1]
    denied = DeniedWhenMissing(monkeypatch)
    delete_before_reading(monkeypatch, s3, denied, lambda obj: keys[1] if obj.uri.endswith(keys[1]) else None)
    cfg = s3_config(tmp_path, moto_server, bucket)
    message = failure(ingest(cfg))
    assert denied.denied >= 1
    assert f"s3://{bucket}/{keys[1]}: object not found (gone since the listing)" in message, message
    assert "access denied" not in message and "grant" not in message
    assert not Lake(cfg.lake).ledger()


def test_a_403_for_an_object_still_there_stays_access_denied(tmp_path, moto_server, s3, monkeypatch):
    keys = deliver_two_parts(s3)
    denied = DeniedWhenMissing(monkeypatch)
    denied.deleted.add(keys[0])  # denied, but not deleted: the policy refuses it
    message = failure(ingest(s3_config(tmp_path, moto_server, s3[1])))
    assert "access denied for s3:GetObject" in message and "not found" not in message


def test_a_manifest_deleted_while_its_parts_are_read_is_told_as_changed(tmp_path, moto_server, s3, monkeypatch):
    # its HEAD (current_version) answered 403 and read "access denied for s3:GetObject"
    deliver_two_parts(s3)
    bucket = s3[1]
    manifest = "cur/rep/20261001-20261101/rep-Manifest.json"
    denied = DeniedWhenMissing(monkeypatch)
    delete_before_reading(monkeypatch, s3, denied, lambda obj: manifest)
    cfg = s3_config(tmp_path, moto_server, bucket)
    message = failure(ingest(cfg))
    assert denied.denied >= 1
    assert "the manifest changed while this period was being read" in message, message
    assert "access denied" not in message
    assert not Lake(cfg.lake).ledger()


@pytest.mark.parametrize("listable", [True, False])
def test_a_denied_listing_of_the_key_keeps_access_denied(tmp_path, moto_server, s3, monkeypatch, listable):
    # when the listing of the key is refused too, nothing says "not found": the key may be there
    keys = deliver_two_parts(s3)
    denied = DeniedWhenMissing(monkeypatch, listable)
    delete_before_reading(monkeypatch, s3, denied, lambda obj: keys[1] if obj.uri.endswith(keys[1]) else None)
    message = failure(ingest(s3_config(tmp_path, moto_server, s3[1])))
    assert ("gone since the listing" in message) == listable, message
    assert ("access denied for s3:GetObject" in message) != listable, message
