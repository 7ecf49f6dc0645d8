"""s3-objects: what is stored in S3 → `s3_objects`; each bucket's lifecycle → `s3_buckets`.

Three ways in, any mix of them in one source:
- `buckets`: `s3:ListObjectsV2` over each configured bucket and prefix (paginated), with
  the checksum algorithm S3 reports for objects uploaded with one;
- `inventory_manifests`: S3 Inventory reports, for buckets too large to list. The
  `manifest.json` (s3://… or a local copy of the destination bucket) names the data files
  and their MD5; CSV (gzip, no header, columns in `fileSchema` order, keys URL-encoded) and
  Parquet (snake_case columns) are read; ORC is not. With object versions included, only
  the latest non-deleted version of each key is kept;
- `path`: local CSV/Parquet/JSON files with the table's columns.
The ETag's `-N` suffix marks a multipart upload of N parts. Lifecycle comes from
`s3:GetLifecycleConfiguration` for every bucket read through the API
(NoSuchLifecycleConfiguration → `none`), or from `lifecycle_path`, a local JSON object
`{bucket: {"Rules": [...]} or null}`.
All of a run's S3 calls, their attempts and backoffs, end by `deadline_seconds` (from the first), each
attempt's connect and reads by `timeout_seconds` (aws_client.held_client).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import duckdb
from pydantic import Field, model_validator

from connectors.aws_client import aws_error, default_region, held_client
from connectors.inventory_base import (FileOrApiConnector, SnapshotPart, local_files, read_table_file,
                                       rows_relation)
from service.core import json_text
from service.core.config import InventorySource
from service.core.config_base import Strict
from service.core.errors import DataError, SourceError, duckdb_error
from service.core.registry import Feeds
from service.core.schema import INVENTORY_TABLES, inventory_select_list
from service.core.source_deadline import RequestLimits
from service.core.units import naive_utc

# S3 Inventory CSV field (fileSchema) → Parquet column, for the fields we keep.
INVENTORY_FIELDS = {"Bucket": "bucket", "Key": "key", "Size": "size", "ETag": "e_tag", "StorageClass": "storage_class",
                    "LastModifiedDate": "last_modified_date", "IsMultipartUploaded": "is_multipart_uploaded",
                    "ChecksumAlgorithm": "checksum_algorithm", "IsLatest": "is_latest",
                    "IsDeleteMarker": "is_delete_marker"}


def lifecycle_row(bucket: str, rules: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A row of `s3_buckets`: expiration when an enabled rule expires current objects
    (by Days or Date), else transition when one moves them to another class, else none."""
    enabled = [rule for rule in rules or [] if rule.get("Status") == "Enabled"]
    expirations = [rule.get("Expiration") or {} for rule in enabled]
    days = [e["Days"] for e in expirations if e.get("Days") is not None]
    if any(e.get("Days") is not None or e.get("Date") is not None for e in expirations):
        kind = "expiration"
    elif any(rule.get("Transitions") or rule.get("Transition") for rule in enabled):
        kind = "transition"
    else:
        kind = "none"
    return {"bucket": bucket, "lifecycle": kind, "expiration_days": min(days) if days else None,
            "rules": json.dumps(rules or [], default=str, sort_keys=True)}


def with_etag_parts(relation: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """ETag without quotes; multipart and part count from its `-N` suffix where not given."""
    etag = "trim(etag, '\"')"
    exprs = {name: name for name, _ in INVENTORY_TABLES["s3_objects"]} | {
        "etag": etag,
        "multipart": f"coalesce(multipart, regexp_matches({etag}, '-[0-9]+$'))",
        "part_count": f"coalesce(part_count, TRY_CAST(nullif(regexp_extract({etag}, '-([0-9]+)$', 1), '') AS INTEGER))",
    }
    return relation.project(inventory_select_list("s3_objects", exprs))


def object_row(bucket: str, item: dict[str, Any]) -> dict[str, Any]:
    algorithms = item.get("ChecksumAlgorithm") or []
    return {"bucket": bucket, "key": item["Key"], "size": item.get("Size"), "etag": item.get("ETag"),
            "checksum_algorithm": algorithms[0] if algorithms else None,
            "storage_class": item.get("StorageClass"), "last_modified": naive_utc(item.get("LastModified"))}


class S3Location(Strict):
    bucket: str = Field(min_length=3, max_length=63)
    prefixes: tuple[str, ...] = ("",)


class S3ObjectsSource(InventorySource, RequestLimits):
    """ListObjectsV2 and S3 Inventory reports → s3_objects; lifecycle rules → s3_buckets."""

    buckets: tuple[S3Location, ...] = ()
    inventory_manifests: tuple[str, ...] = Field(
        default=(), description="manifest.json of S3 Inventory reports: s3://bucket/key or a local path")
    lifecycle: bool = Field(default=True, description="read GetBucketLifecycleConfiguration of each bucket")
    lifecycle_path: str | None = Field(
        default=None, description="local JSON {bucket: lifecycle configuration or null} instead of the API")

    def requests(self) -> int:
        """The default deadline's count: a listing of each bucket's prefix and its lifecycle, an S3 Inventory
        manifest and one data file of it, a page each."""
        lifecycles = len(self.buckets) if self.lifecycle and not self.lifecycle_path else 0
        return sum(len(b.prefixes) for b in self.buckets) + lifecycles + 2 * len(self.inventory_manifests)

    @model_validator(mode="after")
    def _reads_something(self) -> S3ObjectsSource:
        if not (self.path or self.buckets or self.inventory_manifests or self.lifecycle_path):
            raise ValueError("nothing to read: set buckets, inventory_manifests, path or lifecycle_path")
        return self


class S3ObjectsConnector(FileOrApiConnector[S3ObjectsSource]):
    kind = "s3-objects"
    feeds = Feeds.snapshot("s3_objects", "s3_buckets")

    def __init__(self, config: S3ObjectsSource):
        super().__init__(config)
        self._client = None

    @property
    def client(self):
        if self._client is None:
            c = self.config
            region = c.regions[0] if c.regions else default_region(c.profile, self.config_path)
            self._client = held_client("s3", c, config_path=self.config_path, region=region,
                                       deadline=c.start_deadline(self.config_path), where=f"region {region}",
                                       smaller=f"read fewer buckets or prefixes ({self.config_path}.buckets)")
        return self._client

    def local_paths(self) -> list[Path]:
        paths = [Path(p).expanduser().resolve() for p in (self.config.path, self.config.lifecycle_path) if p]
        for manifest in self.config.inventory_manifests:
            if not manifest.startswith("s3://"):
                paths.extend(path for path, _ in self._local_report_files(Path(manifest).expanduser().resolve(),
                                                                          self._load_local_manifest(manifest)))
        return paths

    def inputs(self) -> list[Path] | None:
        """Its `path` and `lifecycle_path` when it lists no bucket and reads no S3 Inventory report."""
        return None if self.config.buckets or self.config.inventory_manifests else self.local_paths()

    def snapshot(self, con: duckdb.DuckDBPyConnection, scratch: Path, now: datetime) -> list[SnapshotPart]:
        parts: list[SnapshotPart] = []
        api_buckets: list[str] = []
        if self.config.path:
            parts += [SnapshotPart("s3_objects", with_etag_parts(read_table_file(con, path, "s3_objects")))
                      for path in local_files(self.config.path, f"{self.config_path}.path")]
        for location in self.config.buckets:
            rows = [object_row(location.bucket, item) for prefix in location.prefixes
                    for item in self._list(location.bucket, prefix)]
            parts.append(SnapshotPart("s3_objects", with_etag_parts(rows_relation(con, "s3_objects", rows))))
            api_buckets.append(location.bucket)
        for manifest in self.config.inventory_manifests:
            relation, source_bucket = self._inventory_report(con, manifest, scratch)
            parts.append(SnapshotPart("s3_objects", relation))
            if manifest.startswith("s3://"):
                api_buckets.append(source_bucket)
        if self.config.lifecycle_path:
            parts.append(SnapshotPart("s3_buckets", rows_relation(con, "s3_buckets", self._local_lifecycle())))
        elif self.config.lifecycle and api_buckets:
            rows = [lifecycle_row(bucket, self._lifecycle_rules(bucket)) for bucket in dict.fromkeys(api_buckets)]
            parts.append(SnapshotPart("s3_buckets", rows_relation(con, "s3_buckets", rows)))
        return parts

    # ---- the API --------------------------------------------------------------------------

    def _list(self, bucket: str, prefix: str):
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                yield from page.get("Contents", [])
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, "s3:ListBucket", f"s3://{bucket}/{prefix}", self.config_path) from None

    def _lifecycle_rules(self, bucket: str) -> list[dict[str, Any]] | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self.client.get_bucket_lifecycle_configuration(Bucket=bucket).get("Rules", [])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "NoSuchLifecycleConfiguration":
                return None
            raise aws_error(exc, "s3:GetLifecycleConfiguration", f"s3://{bucket}", self.config_path) from None
        except BotoCoreError as exc:
            raise aws_error(exc, "s3:GetLifecycleConfiguration", f"s3://{bucket}", self.config_path) from None

    def _get(self, bucket: str, key: str, target: Path | None = None) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            if target is None:
                return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
            self.client.download_file(bucket, key, str(target))
            return None
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, "s3:GetObject", f"s3://{bucket}/{key}", self.config_path) from None

    # ---- S3 Inventory reports -------------------------------------------------------------

    def _load_local_manifest(self, manifest: str) -> dict[str, Any]:
        path = Path(manifest).expanduser().resolve()
        try:
            return self._parse_manifest(path.read_bytes(), str(path))
        except OSError as exc:
            raise SourceError(f"cannot read the inventory manifest: {exc.strerror}", where=str(path),
                              hint=f"check {self.config_path}.inventory_manifests") from None

    @staticmethod
    def _parse_manifest(data: bytes, where: str) -> dict[str, Any]:
        hint = "point inventory_manifests at the manifest.json of one inventory delivery"
        try:
            manifest = json_text.loads(data)
        except ValueError as exc:
            raise DataError(f"the inventory manifest is not JSON: {exc}", where=where, hint=hint) from None
        missing = {"files", "fileFormat", "sourceBucket"} - set(manifest if isinstance(manifest, dict) else ())
        if missing:
            raise DataError(f"not an S3 Inventory manifest.json (no {', '.join(sorted(missing))})", where=where,
                            hint=hint)
        return manifest

    def _local_report_files(self, manifest_path: Path, manifest: dict[str, Any]) -> list[tuple[Path, str]]:
        """(path, MD5) of each data file. Manifest keys are relative to the destination bucket,
        so they are looked up under each ancestor of the manifest's directory, within its
        inventory configuration's folder (S3 writes `<config>/data/` beside `<config>/<date>/`):
        a key is not looked for up to / (a file elsewhere on the host named by a key)."""
        configuration = manifest_path.parent.parent
        found = []
        for entry in manifest["files"]:
            key = PurePosixPath(entry["key"])
            if key.is_absolute() or ".." in key.parts:
                raise DataError(f"unsafe data file key {entry['key']!r} in the manifest", where=str(manifest_path))
            path = next((base / key for base in manifest_path.parents if (base / key).is_relative_to(configuration)
                         and (base / key).is_file() and (base / key).resolve().is_relative_to(configuration)), None)
            if path is None:
                raise SourceError(f"data file {entry['key']} named by the manifest is missing under {configuration}",
                                  where=str(manifest_path), hint="copy the whole destination prefix, data/ included")
            found.append((path.resolve(), entry.get("MD5checksum", "")))
        return found

    def _inventory_report(self, con, manifest_uri: str, scratch: Path) -> tuple[duckdb.DuckDBPyRelation, str]:
        if manifest_uri.startswith("s3://"):
            bucket, _, key = manifest_uri[len("s3://"):].partition("/")
            manifest = self._parse_manifest(self._get(bucket, key) or b"", manifest_uri)
            destination = manifest.get("destinationBucket", f"arn:aws:s3:::{bucket}").rsplit(":", 1)[-1]
            files = []
            for entry in manifest["files"]:
                target = scratch / (hashlib.sha256(entry["key"].encode()).hexdigest()[:24]
                                    + "".join(PurePosixPath(entry["key"]).suffixes[-2:]))
                self._get(destination, entry["key"], target)
                files.append((target, entry.get("MD5checksum", ""), f"s3://{destination}/{entry['key']}"))
        else:
            path = Path(manifest_uri).expanduser().resolve()
            manifest = self._load_local_manifest(manifest_uri)
            files = [(p, md5, str(p)) for p, md5 in self._local_report_files(path, manifest)]
        for path, md5, where in files:
            if md5 and hashlib.md5(path.read_bytes()).hexdigest() != md5:
                raise SourceError("inventory data file does not match the manifest's MD5checksum", where=where,
                                  hint="the delivery is incomplete or was replaced; run again later")
        return self._read_report(con, manifest, [p for p, _, _ in files], manifest_uri), manifest["sourceBucket"]

    def _read_report(self, con, manifest: dict[str, Any], paths: list[Path], where: str) -> duckdb.DuckDBPyRelation:
        fmt = str(manifest["fileFormat"]).upper()
        if not paths:
            return with_etag_parts(rows_relation(con, "s3_objects", []))
        try:
            if fmt == "CSV":
                names = [field.strip() for field in str(manifest.get("fileSchema", "")).split(",")]
                if names[:2] != ["Bucket", "Key"]:
                    raise DataError(f"unexpected fileSchema {manifest.get('fileSchema')!r}", where=where)
                source = con.read_csv([str(p) for p in paths], header=False, names=names, all_varchar=True)
                column = {field: f'"{field}"' for field in names if field in INVENTORY_FIELDS}
                key = "url_decode(replace(\"Key\", '+', ' '))"  # CSV inventory keys are URL-encoded
            elif fmt == "PARQUET":
                source = con.read_parquet([str(p) for p in paths])
                column = {field: f'"{name}"' for field, name in INVENTORY_FIELDS.items() if name in source.columns}
                key = '"key"'
            else:
                raise DataError(f"S3 Inventory format {fmt} is not supported", where=where,
                                hint="configure the inventory report as CSV or Parquet")
            keep = []
            if "IsLatest" in column:
                keep.append(f"coalesce(CAST({column['IsLatest']} AS BOOLEAN), true)")
            if "IsDeleteMarker" in column:
                keep.append(f"NOT coalesce(CAST({column['IsDeleteMarker']} AS BOOLEAN), false)")
            exprs = {"bucket": column["Bucket"], "key": key, "size": column.get("Size", "NULL"),
                     "etag": column.get("ETag", "NULL"), "multipart": column.get("IsMultipartUploaded", "NULL"),
                     "checksum_algorithm": f"nullif({column.get('ChecksumAlgorithm', 'NULL')}, '')",
                     "storage_class": column.get("StorageClass", "NULL"),
                     "last_modified": f"CAST({column.get('LastModifiedDate', 'NULL')} AS TIMESTAMPTZ)"}
            filtered = source.filter(" AND ".join(keep)) if keep else source
            return with_etag_parts(filtered.project(inventory_select_list("s3_objects", exprs)))
        except duckdb.Error as exc:
            raise duckdb_error(exc, "cannot read the inventory report", where=where) from None

    # ---- local lifecycle ---------------------------------------------------------------------

    def _local_lifecycle(self) -> list[dict[str, Any]]:
        path = Path(self.config.lifecycle_path or "").expanduser().resolve()
        try:
            data = json_text.loads(path.read_text(encoding="utf-8"))
            return [lifecycle_row(bucket, (config or {}).get("Rules")) for bucket, config in sorted(data.items())]
        except (OSError, ValueError, AttributeError, TypeError) as exc:
            raise DataError(f"not a lifecycle JSON ({type(exc).__name__}: {exc})", where=str(path),
                            hint='expected {"bucket": {"Rules": [...]}, "other-bucket": null}') from None
