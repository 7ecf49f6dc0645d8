"""`aws-cur`: the legacy AWS Cost and Usage Report, in any of the layouts AWS writes.

- CSV / CSV.gz with manifests: `<prefix>/<report>/yyyymmdd-yyyymmdd/<report>-Manifest.json`.
  "Create new report version" puts each delivery's parts in an `<assemblyId>/` folder next to
  the period's manifest; "overwrite" puts them beside it. Either way only the keys of the
  period manifest (`reportKeys`, the current assembly) are read, so old assemblies and
  stale parts are never counted. Delivery id: the manifest's `assemblyId`.
- Parts without a period manifest → "waiting for manifest": nothing is committed.
- The Athena Parquet layout: `.../year=YYYY/month=M/*.parquet`, one delivery per month:
  the files its period folder's manifest lists (delivery id its `assemblyId`); without that
  manifest each file is loose, as a bare CSV: read as one delivery of the month, a copy of a
  file there (a `cp`) was summed with it, where loose files are checked for copies
  (service.ingest.copies, row_copies).
- A bare CSV / CSV.gz (no manifest, no period folder): a loose delivery per file, its
  periods read from the data; ingest joins the bare files of one period, wherever they sit,
  into one delivery identified by a fingerprint of them (service.ingest.periods).
- A Data Exports (CUR 2.0) export under the location is skipped, told as such: read as bare
  CSV, every execution's files would count; with nothing else there, a SourceError says to
  use kind aws-cur2 (or focus).
- Nothing of these under the location: a SourceError naming it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator

from connectors.aws_export import STALE_COPY, AwsExportConnector
from connectors.base import Delivery
from connectors.storage import StoredObject, fingerprint
from pydantic import Field

from service.core.config import SourceConfig
from service.core.errors import ConfigError, SourceError

PERIOD_DIR = re.compile(r"(?:^|/)(\d{4})(\d{2})\d{2}-\d{8}/")
ATHENA_MONTH = re.compile(r"(?:^|/)year=(\d{4})/month=(\d{1,2})/")
MANIFEST_SUFFIX = "-Manifest.json"
DATA_FILE = re.compile(r"\.(csv|csv\.gz|csv\.zip|parquet)$", re.IGNORECASE)
# Data Exports (CUR 2.0, FOCUS): every execution's files stay beside the current one, read
# as bare CSV they would all count
DATA_EXPORTS = re.compile(r"(?:^|/)(?:data|metadata)/BILLING_PERIOD=\d{4}-\d{2}/")


class AwsCurSource(SourceConfig):
    """An `aws-cur` source: `report_name` picks one report under a prefix several share."""

    report_name: str | None = Field(default=None, min_length=1)


class AwsCurConnector(AwsExportConnector):
    kind = "aws-cur"
    config_model = AwsCurSource
    manifest_files, manifest_id, manifest_name = "reportKeys", "assemblyId", "a CUR manifest"
    suffixes = (".csv", ".csv.gz", ".csv.zip", ".parquet")  # DATA_FILE's

    def deliveries(self) -> Iterator[Delivery]:
        periods: dict[str, dict] = defaultdict(lambda: {"manifest": None, "parts": []})
        athena: dict[str, list[StoredObject]] = defaultdict(list)
        bare: list[StoredObject] = []
        exports: set[str] = set()
        for obj in self._list():
            if not self._in_report(obj.key):
                continue
            exported = DATA_EXPORTS.search(obj.key)
            if exported:
                exports.add(obj.uri[: len(obj.uri) - len(obj.key) + exported.start()].rstrip("/"))
                continue
            folder = PERIOD_DIR.search(obj.key)
            if folder:
                group = periods[obj.key[: folder.end()]]
                group["period"] = f"{folder.group(1)}-{folder.group(2)}"
                rest = obj.key[folder.end():]
                if "/" not in rest and rest.endswith(MANIFEST_SUFFIX):
                    group["manifest"] = obj
                elif DATA_FILE.search(rest):
                    group["parts"].append(obj)
                continue
            month = ATHENA_MONTH.search(obj.key)
            if month and obj.key.lower().endswith(".parquet"):
                athena[f"{month.group(1)}-{int(month.group(2)):02d}"].append(obj)
            elif DATA_FILE.search(obj.key) and not obj.key.lower().endswith(".parquet"):
                bare.append(obj)

        found: list[Delivery] = []
        reports: dict[str, list[str]] = defaultdict(list)
        for folder, group in periods.items():
            reports[group["period"]].append(folder)
        kept = {period: self._copy_kept(period, {f: periods[f]["manifest"] for f in folders})
                if all(periods[f]["manifest"] for f in folders) else None
                for period, folders in reports.items() if len(folders) > 1}
        for folder, group in periods.items():
            if len(reports[group["period"]]) > 1 and kept[group["period"]] != folder:
                if kept[group["period"]] is None and folder == min(reports[group["period"]]):
                    found.append(self._ambiguous(group["period"], reports[group["period"]], group))
            elif group["manifest"] is not None:
                found.append(self._manifest_delivery(folder, group["period"], group["manifest"]))
            elif group["parts"]:
                found.append(Delivery("waiting:" + fingerprint(group["parts"]), (group["period"],),
                                      tuple(o.uri for o in group["parts"]), waiting="waiting for manifest"))
        # a Parquet report's period manifest lists the month's files; without it they are loose
        bare += [obj for period, objs in athena.items() if period not in reports for obj in objs]
        for obj in bare:
            found.append(Delivery(fingerprint([obj]), None, (obj.uri,), loose=True))
            self._loose.add(obj.uri)
        if not found and exports:
            raise SourceError(f"{', '.join(sorted(exports))}: an AWS Data Exports export (data/BILLING_PERIOD=…, "
                              "metadata/), not a legacy Cost and Usage Report", where=f"{self.config.config_path}.kind",
                              hint="set kind: aws-cur2 (CUR 2.0) or focus (a FOCUS export), which read it by its manifests")
        for folder in exports:
            self.storage.passed_over[folder] = ("an AWS Data Exports export (data/BILLING_PERIOD=…), not a legacy CUR: "
                                                "give it a source of kind aws-cur2 (CUR 2.0) or focus (a FOCUS export)")
        if not found:
            report = f" of report {self.config.report_name!r}" if self.config.report_name else ""
            raise SourceError(f"no legacy CUR{report} manifests or data (yyyymmdd-yyyymmdd/…-Manifest.json, "
                              f"year=/month= Parquet, CSV) under {self.config.location}",
                              where=f"{self.config.config_path}.location",
                              hint="point it at the prefix the Cost and Usage Report is delivered to")
        return iter(sorted(found, key=lambda d: (d.periods or ("",), d.files)))

    def _in_report(self, key: str) -> bool:
        """Below the report's folder, or a file named as its files are (`<report>-1.csv.gz`,
        `<report>-Manifest.json`), not as those of a report whose name begins with it (`<report>-hourly`)."""
        name = self.config.report_name
        *folders, file = key.split("/")
        return not name or name in folders or re.fullmatch(re.escape(name) + r"-(\d+\..+|Manifest\.json)", file) is not None

    def _ambiguous(self, period: str, folders: list[str], group: dict) -> Delivery:
        """Two reports delivering one period would replace each other in the lake."""
        objs = [group["manifest"]] if group["manifest"] else group["parts"]
        failed = Delivery("ambiguous:" + fingerprint(objs), (period,), tuple(o.uri for o in objs))
        self._problem(failed.delivery_id, ConfigError(
            f"{len(folders)} reports deliver {period} under this location: {', '.join(sorted(folders))}",
            where=f"{self.config.config_path}.location", hint="set report_name, or give each report its own source" + STALE_COPY))
        return failed

    @staticmethod
    def _delivered_in(base: str, key: str) -> bool:
        """`<prefix>/<report>/20240501-20240601/<assembly>/x.csv.gz` is delivered in the period
        folder `base` when its path up to the period folder ends with it."""
        folder = PERIOD_DIR.search(key)
        return folder is not None and ("/" + key[: folder.end()]).endswith("/" + base)

    @staticmethod
    def _located(base: str, key: str) -> str:
        """A manifest key is bucket-absolute; keep what follows its period folder, so a copy
        of the export under another bucket or prefix (or a local directory) still resolves. A
        Parquet report's manifest lists `<report>/year=YYYY/month=M/` files, found beside the
        period folder `base`."""
        folder = PERIOD_DIR.search(key)
        if folder:
            return base + key[folder.end():]
        month = ATHENA_MONTH.search(key)
        if month:
            period = PERIOD_DIR.search(base)
            beside = base[: period.start() + 1] if period.start() else ""
            return beside + key[: month.start()].rsplit("/", 1)[-1] + key[month.start():]
        return base + key.rsplit("/", 1)[-1]
