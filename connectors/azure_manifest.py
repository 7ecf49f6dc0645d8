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

import json
from dataclasses import dataclass
from pathlib import PurePosixPath

from connectors.base import Delivery
from connectors.storage import Storage, StoredObject
from service.core.errors import DataError, SourceError, SpendlakeError

MANIFEST_NAME = "manifest.json"


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
            body = json.loads(storage.read_bytes(manifest).decode("utf-8"))
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
    """The newest run of each (export, date range), in date order."""
    newest: dict[tuple[str, tuple[str, str]], ExportRun] = {}
    for run in runs:
        key = (run.export, run.date_range)
        if key not in newest or (run.submitted, run.run_id) > (newest[key].submitted, newest[key].run_id):
            newest[key] = run
    return sorted(newest.values(), key=lambda r: (r.date_range, r.export))


def run_delivery(run: ExportRun) -> Delivery:
    return Delivery(run.run_id, None, tuple(o.uri for o in run.files))
