"""Azure Cost Management export runs, told apart by the `manifest.json` each run writes.

An export that does not overwrite writes every run into its own folder,
`<root>/<export>/<YYYYMMDD-YYYYMMDD>/<runId>/part_*.csv` plus `manifest.json`:

    {"exportConfig": {"exportName": …, "type": "ActualCost" | "AmortizedCost" | "FocusCost"},
     "runInfo": {"runId": …, "submittedTime": "2024-02-03T18:33:03.1032074Z",
                 "startDate": "2024-01-01T00:00:00", "endDate": "2024-01-31T00:00:00"},
     "blobs": [{"blobName": "<container path>/part_1_0001.csv", …}]}

A daily month-to-date export leaves ~30 runs of one month side by side; each is a full
snapshot, so only the newest run of each (export, date range) counts. Its files are the
manifest's blobs, found next to the manifest; its delivery id is the runId.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from connectors.base import Delivery
from connectors.storage import Storage, StoredObject
from service.core import json_text
from service.core.errors import ConfigError, DataError, SourceError, SpendlakeError

MANIFEST_NAME = "manifest.json"
# Export types that deliver no costs (azure_cost skips their files), so no
# month's costs of another export in the location are replaced by them
NO_COSTS = ("PriceSheet", "ReservationDetails", "ReservationRecommendations", "ReservationTransactions")
MONTH = re.compile(r"\d{4}-\d{2}")
# A run of an export made before run manifests: `<export>/<YYYYMMDD-YYYYMMDD>/<export>_<guid>.csv`.
UNLISTED_RUN = re.compile(r"(?:^|/)\d{8}-\d{8}/[^/]+_[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\.csv(?:\.gz)?$",
                          re.IGNORECASE)


@dataclass(frozen=True)
class ExportRun:
    run_id: str
    submitted: str
    export: str  # the export's name, or the folder above the run folders
    date_range: tuple[str, str]
    cost_type: str | None  # ActualCost, AmortizedCost, FocusCost, …
    files: tuple[StoredObject, ...]
    problem: SpendlakeError | None = None  # a broken manifest fails its run, not the source


def export_runs(storage: Storage, listing: list[StoredObject]) -> list[ExportRun]:
    """Every run whose manifest.json is in the listing; other JSON files are not manifests."""
    by_key = {obj.key: obj for obj in listing}
    runs = []
    for manifest in (o for o in listing if o.name == MANIFEST_NAME):
        try:
            body = json_text.loads(storage.read_bytes(manifest).decode("utf-8"))
            if not isinstance(body, dict) or not isinstance(body.get("runInfo"), dict) or "blobs" not in body:
                continue
            runs.append(_run(manifest, body, by_key))
        except (UnicodeDecodeError, ValueError) as exc:
            runs.append(_broken(manifest, DataError(f"the export manifest is not valid JSON: {exc}", where=manifest.uri,
                                                    hint="wait for the run to finish, or run the export again")))
        except SpendlakeError as exc:
            runs.append(_broken(manifest, exc))
    return runs


def _broken(manifest: StoredObject, problem: SpendlakeError) -> ExportRun:
    folder = PurePosixPath(manifest.key).parent
    return ExportRun(f"invalid:{manifest.uri}", "", str(folder.parent.parent), (str(folder.parent), ""), None,
                     (manifest,), problem)


def _run(manifest: StoredObject, body: dict, by_key: dict[str, StoredObject]) -> ExportRun:
    info, config = body["runInfo"], body.get("exportConfig") or {}
    folder = PurePosixPath(manifest.key).parent
    files = []
    for blob in body["blobs"]:
        name = PurePosixPath(str(blob.get("blobName", "")) if isinstance(blob, dict) else "").name
        if not name:
            raise DataError("a blob of the export manifest has no blobName", where=manifest.uri)
        key = str(folder / name) if str(folder) != "." else name
        if key not in by_key:
            raise SourceError(f"the export manifest lists {name}, which is not there", where=manifest.uri,
                              hint="the run is incomplete or was partly deleted; run the export again")
        files.append(by_key[key])
    return ExportRun(
        run_id=str(info.get("runId") or manifest.uri),
        submitted=str(info.get("submittedTime") or ""),
        export=str(config.get("exportName") or folder.parent.parent),
        date_range=(str(info.get("startDate") or folder.parent), str(info.get("endDate") or "")),
        cost_type=config.get("type"),
        files=tuple(files),
    )


def newest_runs(runs: list[ExportRun]) -> list[ExportRun]:
    """The newest run of each (export, date range), in date order; runs of two exports covering
    one month fail (see `_one_export_a_month`)."""
    newest: dict[tuple[str, tuple[str, str]], ExportRun] = {}
    for run in runs:
        key = (run.export, run.date_range)
        if key not in newest or (run.submitted, run.run_id) > (newest[key].submitted, newest[key].run_id):
            newest[key] = run
    return _one_export_a_month(sorted(newest.values(), key=lambda r: (r.date_range, r.export)))


def _one_export_a_month(runs: list[ExportRun]) -> list[ExportRun]:
    """Two exports in one location covering one month (actual and amortized, or two scopes') would
    replace each other's month in the lake on every ingest: their runs fail, naming both."""
    exports: dict[str, dict[str, str | None]] = {}  # month → export → its cost type
    for run in runs:
        for month in _costs_months(run):
            exports.setdefault(month, {})[run.export] = run.cost_type
    failed = []
    for run in runs:
        clash = next((m for m in _costs_months(run) if len(exports[m]) > 1), None)
        if clash and run.problem is None:
            named = ", ".join(f"{name} ({kind})" if kind else name for name, kind in sorted(exports[clash].items()))
            run = replace(run, problem=ConfigError(
                f"{len(exports[clash])} exports deliver {clash} under this location: {named}",
                where=run.files[0].uri if run.files else None,
                hint="give each export its own source, its location the export's folder"))
        failed.append(run)
    return failed


def _costs_months(run: ExportRun) -> list[str]:
    """The months whose costs the run delivers: none for an export of another dataset."""
    return [] if run.cost_type in NO_COSTS else _months(run.date_range)


def _months(date_range: tuple[str, str]) -> list[str]:
    """The months (YYYY-MM) a run's startDate…endDate covers; none when they are not dates."""
    start, end = (value[:7] for value in date_range)
    if not (MONTH.fullmatch(start) and MONTH.fullmatch(end or start)):
        return []
    months, (year, month) = [], map(int, start.split("-"))
    while f"{year:04d}-{month:02d}" <= (end or start):
        months.append(f"{year:04d}-{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return months


def run_delivery(run: ExportRun) -> Delivery:
    return Delivery(run.run_id, None, tuple(o.uri for o in run.files))


def without_older_unlisted_runs(listing: list[StoredObject]) -> list[StoredObject]:
    """The listing less the older runs of exports made before run manifests: each run writes a
    month-to-date snapshot `<export>_<guid>.csv` beside the earlier ones in its date range's
    folder, so only the newest file of each folder counts (its modification time; then key)."""
    newest: dict[str, StoredObject] = {}
    for obj in listing:
        if UNLISTED_RUN.search(obj.key):
            folder = obj.key.rsplit("/", 1)[0]
            if folder not in newest or (obj.modified, obj.key) > (newest[folder].modified, newest[folder].key):
                newest[folder] = obj
    kept = {obj.key for obj in newest.values()}
    return [obj for obj in listing if not UNLISTED_RUN.search(obj.key) or obj.key in kept]
