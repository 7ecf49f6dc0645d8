"""`aws-cur2`: AWS Data Exports, Cost and Usage Report 2.0 (Parquet or CSV.gz).

Layout under the export (`s3://<bucket>/<prefix>/<export-name>/`, or a local copy of it):

    data/BILLING_PERIOD=YYYY-MM/[<delivery>/]<export-name>-00001.snappy.parquet | .csv.gz
    metadata/BILLING_PERIOD=YYYY-MM/[<delivery>/]<export-name>-Manifest.json

OVERWRITE_REPORT keeps one manifest per period; CREATE_NEW_REPORT adds a `<delivery>` folder per
execution, named by its execution id, which starts with the time it ran
(`2025-12-28T13:14:37.728Z-8c5a76cc-…`), and only the newest one counts: newest by those
times, which a copy keeps (`cp -r` or rsync without -t does not keep write times), and by the
manifests' write times only when a folder name carries no time. Either way exactly the
manifest's `dataFiles` are read, and the delivery id is its `executionId`. Two exports under
the location delivering one period would replace each other: that period fails naming them,
unless one is a copy of the other (AwsExportConnector._copy_kept): read once, or skipped as a
stale copy when it holds an older delivery. Data present
without a manifest is "waiting for manifest"; neither under the location is a SourceError.
`resource_tags` is a map column in Parquet and JSON text in CSV; both become the canonical
Tags map with the keys as written (`user_team`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import datetime

from connectors.aws_export import STALE_COPY, AwsExportConnector
from connectors.base import Delivery
from connectors.storage import StoredObject, fingerprint
from service.core.errors import ConfigError, DataError, SourceError

MANIFEST = re.compile(r"(?:^|/)metadata/BILLING_PERIOD=(\d{4}-\d{2})/(?:(.+)/)?[^/]*Manifest\.json$")
DATA = re.compile(r"(?:^|/)data/BILLING_PERIOD=(\d{4}-\d{2})/.+\.(parquet|csv\.gz|csv)$", re.IGNORECASE)
LEGACY_MANIFEST = re.compile(r"(?:^|/)\d{8}-\d{8}/[^/]+-Manifest\.json$")  # aws-cur's period manifest
# An execution id as AWS writes it, `2025-12-28T13:14:37.728Z-<uuid>` (or the basic ISO form).
EXECUTION_TIME = re.compile(r"(\d{4}-?\d{2}-?\d{2}T\d{2}:?\d{2}:?\d{2}(?:\.\d+)?Z)(?:-|$)")
DATA_IN_URI = re.compile(r"(?:^|/)data/BILLING_PERIOD=\d{4}-\d{2}/")


def execution_time(folder: str) -> datetime | None:
    """The time a CREATE_NEW_REPORT delivery folder's name starts with, else None."""
    found = EXECUTION_TIME.match(folder)
    return datetime.fromisoformat(found.group(1)) if found else None


def newest_first(candidates: list[tuple[str, StoredObject]]) -> Callable[[tuple[str, StoredObject]], tuple]:
    """The sort key of a period's manifests (delivery folder, object) whose largest is the newest
    execution: the times the folder names start with when they all have one, else the manifests'
    write times (then the folder name, then the key)."""
    if all(execution_time(folder) for folder, _ in candidates):
        return lambda c: (execution_time(c[0]), c[0], c[1].key)
    return lambda c: (c[1].modified, c[0], c[1].key)


class AwsCur2Connector(AwsExportConnector):
    kind = "aws-cur2"
    manifest_files, manifest_id, manifest_name = "dataFiles", "executionId", "a Data Exports manifest"

    def deliveries(self) -> Iterator[Delivery]:
        manifests: dict[tuple[str, str], list[tuple[str, StoredObject]]] = defaultdict(list)
        data: dict[tuple[str, str], list[StoredObject]] = defaultdict(list)
        for obj in self._list():
            found = MANIFEST.search(obj.key)
            if found:
                root = obj.key[: found.start()] + ("/" if found.start() else "")
                manifests[(root, found.group(1))].append((found.group(2) or "", obj))
                continue
            found = DATA.search(obj.key)
            if found:
                root = obj.key[: found.start()] + ("/" if found.start() else "")
                data[(root, found.group(1))].append(obj)

        result: list[Delivery] = []
        exports: dict[str, list[str]] = defaultdict(list)  # period → the export folders delivering it
        for root, period in manifests:
            exports[period].append(root)
        chosen = {key: max(candidates, key=newest_first(candidates))[1] for key, candidates in manifests.items()}
        kept = {period: self._copy_kept(period, {root: chosen[(root, period)] for root in roots})
                for period, roots in exports.items() if len(roots) > 1}
        for (root, period), manifest in chosen.items():
            if len(exports[period]) > 1 and kept[period] != root:
                if kept[period] is None and root == min(exports[period]):
                    result.append(self._ambiguous(period, exports[period], manifests))
                continue
            result.append(self._manifest_delivery(root, period, manifest))
        for (root, period), objs in data.items():
            if (root, period) not in manifests:
                result.append(Delivery("waiting:" + fingerprint(objs), (period,), tuple(o.uri for o in objs),
                                       waiting="waiting for manifest"))
        if not result:
            if any(LEGACY_MANIFEST.search(obj.key) for obj in self._objects.values()):
                where, hint = "kind", "it holds a legacy Cost and Usage Report (yyyymmdd-yyyymmdd/…-Manifest.json): set kind: aws-cur"
            else:
                where, hint = "location", "point it at the export's folder, the one holding data/ and metadata/"
            raise SourceError(f"no CUR 2.0 manifests or data (metadata/BILLING_PERIOD=…/…-Manifest.json, "
                              f"data/BILLING_PERIOD=…/) under {self.config.location}",
                              where=f"{self.config.config_path}.{where}", hint=hint)
        return iter(sorted(result, key=lambda d: (d.periods or ("",), d.files)))

    def _ambiguous(self, period: str, roots: list[str],
                   manifests: dict[tuple[str, str], list[tuple[str, StoredObject]]]) -> Delivery:
        """Two exports delivering one period would replace each other in the lake (a daily and
        an hourly export of one account, or two accounts' exports): the period fails naming them."""
        objs = [obj for root in roots for _, obj in manifests[(root, period)]]
        failed = Delivery("ambiguous:" + fingerprint(objs), (period,), tuple(sorted(o.uri for o in objs)))
        self._problem(failed.delivery_id, ConfigError(
            f"{len(roots)} Data Exports deliver {period} under this location: {', '.join(sorted(roots))}",
            where=f"{self.config.config_path}.location",
            hint="give each export its own source, its location the export's folder (the one holding data/)"
            + STALE_COPY))
        return failed

    @staticmethod
    def _delivered_in(base: str, uri: str) -> bool:
        """`s3://bucket/<prefix>/<export>/data/BILLING_PERIOD=…/x.parquet` is delivered in the
        export folder `base` (`<export>/`, or "" for the location itself) when its path up to
        data/ ends with it."""
        found = DATA_IN_URI.search(uri)
        return found is not None and (uri[: found.start()].rstrip("/") + "/").endswith("/" + base)

    @staticmethod
    def _located(base: str, uri: str) -> str:
        """`s3://bucket/prefix/export/data/BILLING_PERIOD=…/x.parquet` → `<base>data/BILLING_PERIOD=…/x.parquet`,
        so a copy of the export elsewhere (another bucket, a local directory) still resolves."""
        found = DATA_IN_URI.search(uri)
        if not found:
            raise DataError(f"the manifest names a data file outside data/BILLING_PERIOD=…: {uri}",
                            hint="the manifest is damaged; wait for the next delivery")
        return base + uri[found.start():].lstrip("/")
