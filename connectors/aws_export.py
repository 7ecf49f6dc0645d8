"""Fetching an AWS export's delivery and opening its files, shared by `aws-cur` and `aws-cur2`.

`AwsExportConnector` keeps the listing, the manifest each delivery came from, and problems
found while listing (an unreadable manifest, a key leaving the location) against their
delivery, so that period fails alone. `read` fetches the parts (S3 downloads go to the
scratch directory under hashed names), checks the manifest did not change meanwhile, and
hands the local files to DuckDB: CSV/CSV.gz as text (a legacy CUR .csv.zip unpacked, a UTF-16
CSV as UTF-8, into the scratch directory first: csvfile.local_csv), Parquet as typed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import duckdb

from connectors import empty_costs
from connectors.aws_common import AwsColumns, check_required, cost_relation
from connectors.base import Delivery, StoredExport
from connectors.csvfile import csv_header, local_csv, read_csv, with_the_time_refused
from connectors.storage import StoredObject, fingerprint
from service.core import json_text
from service.core.config import SourceConfig
from service.core.errors import DataError, SourceError, SpendlakeError, duckdb_error, told_by_known_names

# Two folders delivering a period differently, their manifests naming no one folder (one renamed
# since), may be an export and a copy of it left from before AWS delivered the period again: the
# ambiguity's hints say so.
STALE_COPY = "; or one is a copy of the other made before AWS delivered the period again: delete the copy"
STALE_EXPORT = ("a stale copy of {original} (an older {period} delivery: its manifest names that export's files; "
                "AWS delivered {period} again since the copy was made: its rows are not read; delete the copy)")
PARTS_AT_ONCE = 2  # CSV.gz parts read together: one thread each, ~30 MB of buffers each


def read_files(con: duckdb.DuckDBPyConnection, paths: Sequence[Path],
               display: dict[str, str]) -> list[tuple[duckdb.DuckDBPyRelation, dict[str, str]]]:
    """The delivery's parts (all CSV/CSV.gz, or all Parquet) as relations, each with the
    original header name of every column DuckDB renamed.

    CSV parts are read PARTS_AT_ONCE at a time, consecutive parts with the same header as one
    relation: a CSV.gz file is decompressed by one thread, so one part at a time leaves a
    core idle, while a read of every part (worse, `union_by_name`, which sniffs every part
    at once) holds a ~30 MB buffer per CSV.gz part, so 20 parts exhaust the writer's
    memory. Parquet files are one multi-file read: it holds only their footers and one row
    group at a time."""
    if not paths:
        raise DataError("the delivery names no data files", where=", ".join(display.values()) or None)
    names = [str(p) for p in paths]
    for path in paths:
        if path.stat().st_size == 0:
            raise DataError("the file is empty", where=display.get(str(path), str(path)),
                            hint="the export was cut short; wait for the next delivery or re-export")
    kinds = {"parquet" if n.lower().endswith(".parquet") else "csv" if re.search(r"\.csv(\.gz)?$", n.lower()) else n
             for n in names}
    if len(kinds) != 1 or not kinds <= {"csv", "parquet"}:
        raise DataError(f"unsupported or mixed file types: {sorted(kinds)}", where=", ".join(display.values()),
                        hint="AWS exports must be CSV, CSV.gz (GZIP), CSV.zip (legacy CUR) or Parquet")
    try:
        if kinds == {"parquet"}:
            return [(con.read_parquet(names, filename=True, union_by_name=len(names) > 1, hive_partitioning=False), {})]
        parts = []
        for group, header in _csv_groups(names, display):
            where = ", ".join(display.get(name, name) for name in group)
            relation, headers = read_csv(con, group, where, filename=True, header=header)
            check_required(AwsColumns(relation, headers), where)  # a missing or repeated column names its file
            parts.append((relation, headers))
        return parts
    except duckdb.Error as exc:
        damaged = _fails_alone(con, names) if kinds == {"parquet"} and len(names) > 1 else None
        where = display.get(damaged, damaged) if damaged else ", ".join(display.values())
        raise told_by_known_names(duckdb_error(exc, "cannot read the export", where=where, hint="the file is "
                                               "damaged or not UTF-8 CSV / Parquet; re-export it"), display) from None


def _fails_alone(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> str | None:
    """The first Parquet file DuckDB cannot open alone: a read of several that fails on a
    damaged footer may name no file ("TProtocolException: Invalid data")."""
    for name in names:
        try:
            con.read_parquet(name)
        except duckdb.Error:
            return name
    return None


def _csv_groups(names: Sequence[str], display: dict[str, str]) -> list[tuple[list[str], list[str]]]:
    """Consecutive CSV parts with the same header, at most PARTS_AT_ONCE in a group."""
    groups: list[tuple[list[str], list[str]]] = []
    for name in names:
        header = csv_header(name, display.get(name, name))
        if groups and groups[-1][1] == header and len(groups[-1][0]) < PARTS_AT_ONCE:
            groups[-1][0].append(name)
        else:
            groups.append(([name], header))
    return groups


class AwsExportConnector(StoredExport):
    """What both AWS connectors share: per-delivery problems, manifests, and `read`.

    A problem found while listing (an unreadable manifest, a key outside the location) is
    kept against its delivery and raised by `read`, so that period fails alone."""

    # Loose files (a legacy CUR's bare CSVs, an Athena month's files without its manifest) are read a part
    # each, so ingest learns each one's periods as it stages them and fingerprints each one's rows
    # (service.ingest.row_copies); a manifest's parts, never loose, are read PARTS_AT_ONCE at a time (read_files)
    parts_are_files = True
    # 1: ListCost 0 on SavingsPlanNegation lines, EffectiveCost 0 on an RI's upfront Fee line;
    # 2: SppDiscount and RiVolumeDiscount lines are credits; 3: ListCost NULL on Tax lines;
    # 4: ListCost 0 on split cost allocation rows of a pod or task on an EC2 instance;
    # 5: x_commitment_start from savingsPlan/StartTime, reservation/StartTime
    reader_version = 5

    def __init__(self, config: SourceConfig):
        super().__init__(config)
        self._problems: dict[str, SpendlakeError] = {}
        self._manifests: dict[str, StoredObject] = {}  # delivery id → the manifest it came from
        self._read: dict[str, str] = {}  # the last delivery read's files: local path → name
        self._loose: set[str] = set()  # the files listed as loose deliveries

    def locate(self, error: SpendlakeError, con: duckdb.DuckDBPyConnection) -> SpendlakeError:
        """A time DuckDB refused (naming no file, line or column) with its file, line and column; an
        empty cost with its file and line (connectors.empty_costs)."""
        return (with_the_time_refused(error, self._read)
                or empty_costs.with_its_line(error, {name: Path(local) for local, name in self._read.items()})
                or super().locate(error, con))

    # What the export's manifest calls its list of data files and its delivery id, and what
    # it is called in the hint of a manifest without that list.
    manifest_files: ClassVar[str]
    manifest_id: ClassVar[str]
    manifest_name: ClassVar[str]

    @staticmethod
    def _located(base: str, listed: str) -> str:
        """The key (below the location) of a data file the manifest lists; `base` is the folder
        the delivery's manifest was found for."""
        raise NotImplementedError

    def _manifest_delivery(self, base: str, period: str, manifest: StoredObject) -> Delivery:
        """The period's current delivery: exactly the files its manifest lists, found below `base`."""
        try:
            data = self._manifest_json(manifest)
            listed = data.get(self.manifest_files)
            if not isinstance(listed, list) or not all(isinstance(k, str) for k in listed):
                raise DataError(f"the manifest has no list of {self.manifest_files}", where=manifest.uri,
                                hint=f"is this {self.manifest_name}? check the source kind")
            if not listed:
                raise DataError(f"the manifest lists no data files (its {self.manifest_files} is empty)",
                                where=manifest.uri, hint="nothing of this period is read until a delivery lists "
                                "its files; if AWS keeps delivering it empty, re-create the export")
            files = tuple(self._object(self._located(base, key)).uri for key in listed)
        except SpendlakeError as exc:
            failed = Delivery("invalid:" + fingerprint([manifest]), (period,), (manifest.uri,))
            self._problem(failed.delivery_id, exc)
            return failed
        delivery_id = str(data.get(self.manifest_id) or fingerprint([manifest]))
        self._manifests[delivery_id] = manifest
        return Delivery(delivery_id, (period,), files)

    @staticmethod
    def _delivered_in(base: str, listed: str) -> bool:
        """Whether a file the manifest lists (as the manifest names it: AWS names the folder it
        delivered to) is delivered in the export folder `base` (below the location), not in
        another one: a copy's manifest still names the original's folder."""
        raise NotImplementedError

    def _copy_kept(self, period: str, chosen: dict[str, StoredObject]) -> str | None:
        """Of several export folders delivering one period (base → the manifest it would read),
        the one to read when the others are copies of it (`cp -r` of the export beside the
        original); None when they are not: two exports, which would replace each other.

        The original is the folder every manifest names, its files' keys (AWS wrote each
        manifest for the folder it delivered to: a copy's names the original's). A copy whose
        manifest holds other bytes was made before AWS delivered the period again: a stale copy,
        skipped. Where the keys tell no folder (a folder renamed since), the manifests must hold
        the same bytes, each listed file the same size under every folder, and the one whose
        manifest was written first is read. The copies are told as skipped."""
        try:
            texts = {base: self.storage.read_bytes(manifest) for base, manifest in chosen.items()}
            listed = {base: self._manifest_json(manifest).get(self.manifest_files) for base, manifest in chosen.items()}
            if not all(isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys)
                       for keys in listed.values()):
                return None
            sizes = {base: [self._object(self._located(base, key)).size for key in listed[base]] for base in chosen}
        except SpendlakeError:
            return None

        def named(key: str) -> str | None:  # the folder a listed file names: the longest it may be in
            return max((base for base in chosen if self._delivered_in(base, key)), key=len, default=None)

        folders = {named(key) for keys in listed.values() for key in keys}
        same = len(set(texts.values())) == 1 and len({tuple(s) for s in sizes.values()}) == 1 and -1 not in sum(
            sizes.values(), [])
        if (len(folders) != 1 or None in folders) and not same:
            return None
        # named by the keys, else written first: a copy is written after its original (by path when it kept the times)
        kept = next(iter(folders)) if len(folders) == 1 and None not in folders else min(
            chosen, key=lambda base: (chosen[base].modified, base))
        if any(texts[base] == texts[kept] and sizes[base] != sizes[kept] for base in chosen):
            return None  # the same manifest over other files: not a copy of the export as it was
        for base in sorted(chosen.keys() - {kept}):
            copy, original = chosen[base].uri, chosen[kept].uri
            self.copies[copy] = original
            if texts[base] == texts[kept] and sizes[base] == sizes[kept]:
                self.storage.passed_over[copy] = (f"the same {period} delivery as {original} "
                                                  "(a copy of the export: read once)")
            else:
                self.stale_copies.add(copy)
                self.storage.passed_over[copy] = STALE_EXPORT.format(period=period, original=original)
        return kept

    def _list(self) -> list[StoredObject]:
        listing = self.storage.list()
        self._objects = {o.uri: o for o in listing}
        return listing

    def _manifest_json(self, obj: StoredObject) -> dict:
        try:
            data = json_text.loads(self.storage.read_bytes(obj).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise DataError(f"the manifest is not valid JSON: {exc}", where=obj.uri,
                            hint="wait for the next delivery, or re-run the export") from None
        if not isinstance(data, dict):
            raise DataError("the manifest is not a JSON object", where=obj.uri)
        return data

    def _problem(self, delivery_id: str, error: SpendlakeError) -> str:
        self._problems[delivery_id] = error
        return delivery_id

    def _object(self, key: str) -> StoredObject:
        """A data file by key relative to the location; a local key may not leave it."""
        obj = self.storage.object(key)
        if obj.uri in self._objects:
            return self._objects[obj.uri]
        if not self.storage.is_s3:
            root = self.storage.path if self.storage.path.is_dir() else self.storage.path.parent
            if not Path(obj.uri).is_relative_to(root):
                raise SourceError("the manifest names a file outside the source location", where=key,
                                  hint="the manifest is damaged or hostile; nothing was read")
        return obj

    def _check_manifest_unchanged(self, delivery: Delivery) -> None:
        """A manifest replaced while its parts were fetched would mix two deliveries."""
        manifest = self._manifests.get(delivery.delivery_id)
        if manifest is not None and self.storage.current_version(manifest) != manifest.version:
            raise SourceError("the manifest changed while this period was being read; nothing was committed",
                              where=manifest.uri, hint="AWS is delivering a new version: run ingest again")

    def read(self, delivery: Delivery, con: duckdb.DuckDBPyConnection,
             scratch: Path) -> list[duckdb.DuckDBPyRelation]:
        if delivery.delivery_id in self._problems:
            raise self._problems[delivery.delivery_id]
        display = self._read = {}  # each file's local path → its name (an S3 object's URI)
        paths = []
        for uri in delivery.files:
            obj = self._objects.get(uri) or StoredObject(uri, uri, -1, "")
            path = local_csv(self.storage.local_copy(obj, scratch), scratch, obj.uri, self.storage.open_local)
            paths.append(path)
            display[str(path)] = obj.uri
        self._check_manifest_unchanged(delivery)
        # loose files (see parts_are_files) a relation each, Parquet too; one relation per part: the lake
        # writes them one after another (bounded memory)
        groups = [[path] for path in paths] if set(delivery.files) <= self._loose else [paths]
        return [cost_relation(con, relation, display=display, headers=headers)
                for group in groups for relation, headers in read_files(con, group, display)]
