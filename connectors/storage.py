"""Where a source's files live: a local file, a local directory, or `s3://bucket/prefix`.

Connectors list and fetch through this one class, so local and S3 sources behave alike.
S3 goes through boto3 with the standard credential chain and the standard retry mode
(SlowDown, throttling and 5xx are retried; `max_attempts` counts every attempt, the first
included, as AWS_MAX_ATTEMPTS does: botocore's own `max_attempts` would add one), each attempt's
connect and reads within `timeout_seconds`, all the ingest's calls within `deadline_seconds`. Errors
name the action and the `s3://bucket/key`, and say how to fix credentials. Downloads get a hashed local
name, so a key such as `../../x` can never place a file outside the scratch directory.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from connectors.aws_client import DENIED_CODES, aws_error, held_client
from connectors.file_versions import local_version, stat_version
from connectors.source_folder import inside, opened_inside
from service.core.config import SourceConfig
from service.core.errors import SourceError
from service.core.files import LEDGER_FILE, hidden_folder


CHANGED_HINT = "run ingest again when the export has finished writing it"
CHUNK = 1024 * 1024  # what read_chunks yields at a time


@dataclass(frozen=True)
class StoredObject:
    uri: str  # s3://bucket/key or an absolute local path
    key: str  # path relative to the source's location, '/'-separated
    size: int
    version: str  # S3 ETag, or local size, mtime, ctime and inode: changes when the content is replaced
    modified: float = 0.0  # S3 LastModified or local mtime, seconds since the epoch (0: unknown)

    @property
    def name(self) -> str:
        return PurePosixPath(self.key).name


class Storage:
    def __init__(self, config: SourceConfig):
        self.config = config
        self.is_s3 = config.location.startswith("s3://")
        if self.is_s3:
            bucket, _, prefix = config.location[len("s3://"):].partition("/")
            if not bucket:
                raise SourceError("no bucket in the location", where=f"{config.config_path}.location",
                                  hint="write it as s3://bucket/prefix")
            self.bucket, self.prefix = bucket, prefix.strip("/")
            self._client = None
            self.one_object: bool | None = None  # it names one object, not a folder (as a local file may); None: untold
        else:
            self.path = Path(config.location).expanduser().resolve()
        self.passed_over: dict[str, str] = {}  # path → why a listing did not give it, and what to do
        self.downloads: dict[str, str] = {}  # a download's local path → its s3:// URI, for errors
        self.listed: dict[str, StoredObject] = {}  # every file a listing gave, by URI
        self._hidden_files: dict[str, set[str]] = {}  # a hidden folder → the data files listings found in it

    # ---- S3 client ----------------------------------------------------------------------

    @property
    def client(self):
        if self._client is None:
            c = self.config  # its deadline from the first call: all of this ingest's are held to it
            self._client = held_client("s3", c, config_path=c.config_path, region=c.region,
                                       deadline=c.start_deadline(c.config_path), where=c.location,
                                       smaller=f"point {c.config_path}.location at a narrower prefix")
        return self._client

    def _s3_error(self, exc: Exception, action: str, key: str) -> SourceError:
        from botocore.exceptions import ClientError

        code = exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""
        if code in ("NoSuchKey", "404", "NotFound"):
            return SourceError("object not found", where=f"s3://{self.bucket}/{key}",
                               hint="check the manifest and the export prefix")
        if code in DENIED_CODES and action == "s3:GetObject" and self._gone(key):
            if f"s3://{self.bucket}/{key}" in self.listed:
                return SourceError("object not found (gone since the listing)", where=f"s3://{self.bucket}/{key}",
                                   hint=CHANGED_HINT)
            return SourceError("object not found", where=f"s3://{self.bucket}/{key}",
                               hint="check the manifest and the export prefix")
        if code in ("PreconditionFailed", "412"):
            return SourceError("changed while it was read (its ETag is no longer the one listed)",
                               where=f"s3://{self.bucket}/{key}", hint=CHANGED_HINT)
        if code == "NoSuchBucket":
            return SourceError("bucket not found", where=f"s3://{self.bucket}",
                               hint=f"check {self.config.config_path}.location")
        return aws_error(exc, action, f"s3://{self.bucket}/{key}", f"{self.config.config_path}")

    def _gone(self, key: str) -> bool:
        """Whether a listing of the key's own prefix shows it absent. AWS answers a GET or HEAD of a
        missing key with 403, not 404, to a caller without s3:ListBucket on it (the shipped policy
        grants ListBucket only under the export's prefix), so a 403 for a key may mean it was deleted
        since it was listed; False when that listing is refused too (access denied stays denied)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            page = self.client.list_objects_v2(Bucket=self.bucket, Prefix=key, MaxKeys=1)
        except (ClientError, BotoCoreError):
            return False
        return not any(item["Key"] == key for item in page.get("Contents", []))

    # ---- listing and reading ---------------------------------------------------------

    def list(self, under: str = "") -> list[StoredObject]:
        """Every object below the location (or below `under`, relative to it), sorted by key."""
        objects = sorted(self._list_s3(under) if self.is_s3 else self._list_local(under), key=lambda o: o.key)
        self.listed.update((o.uri, o) for o in objects)
        return objects

    def _list_s3(self, under: str) -> Iterator[StoredObject]:
        from botocore.exceptions import BotoCoreError, ClientError

        if self.one_object:
            yield from self._list_one_object()
            return
        prefix = "/".join(p for p in (self.prefix, under.strip("/")) if p)
        prefix = prefix + "/" if prefix else ""
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            for number, page in enumerate(pages):
                if number == 0 and self.prefix and not under:
                    if not page.get("Contents"):
                        yield from self._list_one_object()  # nothing below it: it may name one object
                        return
                    self.one_object = False
                for item in page.get("Contents", []):
                    key = item["Key"]
                    if key.endswith("/"):
                        continue
                    rel = key[len(self.prefix):].lstrip("/") if self.prefix else key
                    if self._in_hidden_folder(rel, f"s3://{self.bucket}/{self.prefix}/" if self.prefix
                                              else f"s3://{self.bucket}/"):
                        continue
                    yield StoredObject(f"s3://{self.bucket}/{key}", rel, int(item["Size"]), item["ETag"].strip('"'),
                                       item["LastModified"].timestamp())
        except (ClientError, BotoCoreError) as exc:
            raise self._s3_error(exc, "s3:ListBucket", prefix) from None

    def _list_one_object(self) -> Iterator[StoredObject]:
        """The object the location names (`s3://b/focus/one.csv`), its key relative to its folder as a
        local file's is; nothing when there is none. A listing of the key as prefix (what ListBucket
        under the export's prefix allows) finds it: the key itself sorts first."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            page = self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1)
        except (ClientError, BotoCoreError) as exc:
            raise self._s3_error(exc, "s3:ListBucket", self.prefix) from None
        self.one_object = any(item["Key"] == self.prefix for item in page.get("Contents", []))
        for item in page.get("Contents", []):
            if item["Key"] == self.prefix:
                yield StoredObject(f"s3://{self.bucket}/{self.prefix}", PurePosixPath(self.prefix).name,
                                   int(item["Size"]), item["ETag"].strip('"'), item["LastModified"].timestamp())

    def _tell_one_object(self) -> None:
        """Whether the location names one object, as a listing tells it (no object below it as a
        folder, the key itself there), for object() before any listing ran."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            below = self.client.list_objects_v2(Bucket=self.bucket, Prefix=f"{self.prefix}/", MaxKeys=1)
        except (ClientError, BotoCoreError) as exc:
            raise self._s3_error(exc, "s3:ListBucket", f"{self.prefix}/") from None
        if below.get("Contents"):
            self.one_object = False
        else:
            list(self._list_one_object())

    def _list_local(self, under: str) -> Iterator[StoredObject]:
        if not self.path.exists():
            raise SourceError("no such file or directory", where=str(self.path),
                              hint=f"check {self.config.config_path}.location")
        if self.path.is_file():
            paths = [self.path]
            base = self.path.parent
        else:
            base = self.path
            root = (self.path / under).resolve() if under else self.path
            paths, lakes = [], []
            for path in root.rglob("*"):
                is_file = path.is_file()
                if is_file and f"{path.parent.name}/{path.name}" == LEDGER_FILE:
                    lakes.append(path.parent.parent)
                if path.name.startswith(".") or self._in_hidden_folder(path.relative_to(base).as_posix(),
                                                                        f"{base}/", is_file):
                    continue
                if is_file:
                    paths.append(path)
                elif suffix_of(path.name) in DATA_SUFFIXES and (why := _not_a_file(path)):
                    self.passed_over[str(path)] = why
            paths = self._without_lakes(paths, lakes)
        for path in paths:
            stat = path.stat()
            yield StoredObject(str(path), path.relative_to(base).as_posix(), stat.st_size, stat_version(stat),
                               stat.st_mtime)

    def _without_lakes(self, paths: list[Path], lakes: list[Path]) -> list[Path]:
        """`paths` without the files of a spendlake lake found under the location (a copy, an
        old one): its partitions are FOCUS-named Parquet that would be read as a second copy of
        the bill. The lake is told once, as skipped, instead of its folders."""
        for lake in lakes:
            for told in [told for told in self.passed_over if Path(told).is_relative_to(lake)]:
                del self.passed_over[told]
            self.passed_over[str(lake)] = (f"a spendlake lake (it holds {LEDGER_FILE}): its files are that lake's "
                                           "data, not a bill; keep lakes out of the location")
        return [path for path in paths if not any(path.is_relative_to(lake) for lake in lakes)]

    def _in_hidden_folder(self, key: str, base: str, is_file: bool = True) -> bool:
        """Whether `key` (relative to the location) is below a folder named `.x` or `_x`: hidden,
        or a job's output still being written (Spark's `_temporary/`), which Arrow and Spark
        leave unread too. Reading it would count its rows beside the finished files' (twice);
        the folder is told once, as skipped, when it holds data files."""
        folders = key.split("/")[:-1]
        # (an S3 key's `..` is a name, not a way out: local_copy hashes it)
        hidden = next((i for i, name in enumerate(folders) if hidden_folder(name)), None)
        if hidden is None:
            return False
        if is_file and suffix_of(key) in DATA_SUFFIXES:
            folder = base + "/".join(folders[:hidden + 1])
            files = self._hidden_files.setdefault(folder, set())
            files.add(key)
            self.passed_over[folder] = (f"a folder whose name starts with '{folders[hidden][0]}' (hidden, or a job's "
                                        f"output still being written, as Spark's _temporary): its {len(files)} data "
                                        "file(s) are not read; move them out of it to ingest them")
        return True

    def read_bytes(self, obj: StoredObject) -> bytes:
        return b"".join(self.read_chunks(obj))

    def read_head(self, obj: StoredObject, size: int) -> bytes:
        """The object's first `size` bytes (a ranged GET on S3)."""
        return b"".join(self.read_chunks(obj, size))

    def read_chunks(self, obj: StoredObject, size: int | None = None) -> Iterator[bytes]:
        """The object's bytes (its first `size`: a ranged GET on S3) a MiB at a time, so a file
        read through, as a copy check hashes it, is never held whole."""
        if not self.is_s3:
            try:
                with self.open_local(Path(obj.uri)) as handle:
                    done = 0
                    while chunk := handle.read(CHUNK if size is None else min(CHUNK, size - done)):
                        done += len(chunk)
                        yield chunk
            except OSError as exc:
                raise SourceError(f"cannot read: {exc.strerror}", where=obj.uri) from None
            return
        from botocore.exceptions import BotoCoreError, ClientError

        key = obj.uri[len(f"s3://{self.bucket}/"):]
        ranged = {} if size is None else {"Range": f"bytes=0-{size - 1}"}
        try:
            yield from self.client.get_object(Bucket=self.bucket, Key=key, **ranged)["Body"].iter_chunks(CHUNK)
        except (ClientError, BotoCoreError) as exc:
            raise self._s3_error(exc, "s3:GetObject", key) from None

    def _checked(self, obj: StoredObject) -> Path:
        """A listed local file DuckDB reads as its sandbox would: a link out of the location refused."""
        path = Path(obj.uri)
        return inside(self.path, path, f"{self.config.config_path}.location") if self.path.is_dir() else path

    def open_local(self, path: Path) -> BinaryIO:
        """A local file Python reads itself (a manifest, a file's head, a CSV it copies): a download
        as it is, a file of the location with no link out of it followed, even one swapped in since."""
        if self.is_s3:
            return path.open("rb")
        folder = self.path if self.path.is_dir() else self.path.parent
        return opened_inside(folder, path, f"{self.config.config_path}.location")

    def current_version(self, obj: StoredObject) -> str | None:
        """The object's version now (ETag, or local_version); None when it is gone."""
        if not self.is_s3:
            return local_version(obj.uri)
        from botocore.exceptions import BotoCoreError, ClientError

        key = obj.uri[len(f"s3://{self.bucket}/"):]
        try:
            return self.client.head_object(Bucket=self.bucket, Key=key)["ETag"].strip('"')
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("404", "NoSuchKey", "NotFound") or (code in DENIED_CODES and self._gone(key)):
                return None
            raise self._s3_error(exc, "s3:GetObject", key) from None
        except BotoCoreError as exc:
            raise self._s3_error(exc, "s3:GetObject", key) from None

    def object(self, key: str) -> StoredObject:
        """An object by key relative to the location, e.g. a data file a manifest names."""
        if self.is_s3:
            if self.one_object is None and self.prefix:
                self._tell_one_object()
            base = posixpath.dirname(self.prefix) if self.one_object else self.prefix
            full = "/".join(p for p in (base, key) if p) if not key.startswith("s3://") else key[len(f"s3://{self.bucket}/"):]
            return StoredObject(f"s3://{self.bucket}/{full}", key, -1, "")
        base = self.path if self.path.is_dir() else self.path.parent
        path = (base / key).resolve()
        return StoredObject(str(path), key, path.stat().st_size if path.exists() else -1, "")

    def local_copy(self, obj: StoredObject, scratch: Path) -> Path:
        """A local path with the object's content: the file itself, or a download into `scratch`."""
        if not self.is_s3:  # a link out refused before a reader opens it by path (a CSV's header, its lines)
            path = self._checked(obj)
            if not path.is_file():
                raise SourceError("file listed by the delivery is missing", where=obj.uri)
            return path
        from botocore.exceptions import BotoCoreError, ClientError

        suffix = "".join(PurePosixPath(obj.key).suffixes[-2:])
        target = scratch / (hashlib.sha256(obj.uri.encode()).hexdigest()[:24] + suffix)
        self.downloads[str(target)] = obj.uri
        if obj.size >= 0 and target.is_file() and target.stat().st_size == obj.size:
            return target  # downloaded into this scratch already (a survey reads a file twice)
        key = obj.uri[len(f"s3://{self.bucket}/"):]
        from s3transfer.exceptions import S3DownloadFailedError

        try:
            self._download(obj, key, target)
        except (ClientError, BotoCoreError) as exc:
            target.unlink(missing_ok=True)
            raise self._s3_error(exc, "s3:GetObject", key) from None
        except S3DownloadFailedError as exc:  # the transfer's ranged GETs: the ETag changed, or retries ran out
            target.unlink(missing_ok=True)
            if "ETag" in str(exc):
                raise SourceError("changed while it was read (its ETag is no longer the one listed)", where=obj.uri,
                                  hint=CHANGED_HINT) from None
            raise SourceError(f"download failed: {exc}", where=obj.uri, hint="run ingest again") from None
        if obj.size >= 0 and target.stat().st_size != obj.size:
            raise SourceError(f"downloaded {target.stat().st_size} bytes, expected {obj.size}",
                              where=obj.uri, hint="the object changed while it was read; run ingest again")
        return target

    def _download(self, obj: StoredObject, key: str, target: Path) -> None:
        """Download an object as it was listed: its listed ETag goes with every GET (If-Match),
        so an object replaced since, even by one of the same size, fails (PreconditionFailed)
        rather than being read under the listed version's delivery id. Unlisted: as it is now."""
        if not obj.version or obj.size < 0:
            self.client.download_file(self.bucket, key, str(target))
            return
        from boto3.s3.transfer import TransferConfig, create_transfer_manager
        from s3transfer.subscribers import BaseSubscriber

        config = TransferConfig()
        etag = f'"{obj.version}"'
        if obj.size < config.multipart_threshold:  # one GET: the transfer manager would send no If-Match
            body = self.client.get_object(Bucket=self.bucket, Key=key, IfMatch=etag)["Body"]
            with open(target, "wb") as out:
                shutil.copyfileobj(body, out, 1 << 20)
            return

        class AsListed(BaseSubscriber):
            def on_queued(self, future, **kwargs):  # what its HEAD would say: its ranged GETs send If-Match
                future.meta.provide_transfer_size(obj.size)
                future.meta.provide_object_etag(etag)

        with create_transfer_manager(self.client, config) as manager:
            manager.download(self.bucket, key, str(target), subscribers=[AsListed()]).result()

    def local_paths(self) -> list[Path]:
        return [] if self.is_s3 else [self.path]


def _not_a_file(path: Path) -> str | None:
    """Why an entry named like a data file is not one a listing gives, and what to do; None
    for a directory holding files (they are listed: Spark writes `x.csv/part-0000.csv`)."""
    if path.is_symlink() and not path.exists():
        return (f"a symbolic link to {os.readlink(path)}, which leads to no file: fix the link or remove it "
                "(an export still being copied? run ingest again when it is there)")
    if path.is_dir() and not any(inner.is_file() for inner in path.rglob("*") if not inner.name.startswith(".")):
        return "a directory with no files in it, not a data file: put the export's file there or remove it"
    return None


def fingerprint(objects: list[StoredObject]) -> str:
    """A delivery id for files that carry none: changes when any file is replaced."""
    digest = hashlib.sha256()
    for obj in sorted(objects, key=lambda o: o.key):
        digest.update(f"{obj.key}\0{obj.size}\0{obj.version}\n".encode())
    return "sha256:" + digest.hexdigest()[:32]


DATA_SUFFIXES = (".csv.gz", ".csv.zip", ".json.gz", ".jsonl.gz", ".parquet", ".csv", ".json", ".jsonl", ".gz")


def suffix_of(name: str) -> str:
    """'x.csv.gz' → '.csv.gz', 'x.CSV' → '.csv'."""
    lower = name.lower()
    for suffix in DATA_SUFFIXES:
        if lower.endswith(suffix):
            return suffix
    return os.path.splitext(lower)[1]
