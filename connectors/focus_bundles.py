"""FOCUS 1.4 bundles that focus-data-toolkit rewrote into versions, told apart by their `_run.json`.

`focus-toolkit convert --on-exists version` leaves the bundle it finds in place and writes the
new one into a folder inside it, `<out>/run-<run_id>/`, with its own `_run.json`
(`{"run_id": …, "generated_at": "2026-12-03T13:50:41.772747+00:00", …}`) and
`focus_1_4_manifest.json`. Each version holds the same billing periods in full: read together
they count every dollar (and every commitment, invoice and period row) twice. Only the version
generated last is read; each other one is told once, as skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath

from connectors.storage import Storage, StoredObject
from service.core import json_text

RUN_NAME = "_run.json"


def newest_versions(storage: Storage, listing: list[StoredObject]) -> list[StoredObject]:
    """`listing` (a source's location) without the files of older versions of a toolkit bundle;
    each older version is told through `storage.passed_over`."""
    runs = {obj.key: obj for obj in listing if obj.name == RUN_NAME}
    older = older_versions(list(runs), lambda key: storage.read_bytes(runs[key]))
    kept = []
    for obj in listing:
        version = _bundle_of(obj.key, older)
        if version is None:
            kept.append(obj)
        else:
            folder = obj.uri[:len(obj.uri) - len(obj.key)] + ("" if version == "." else version)
            storage.passed_over.setdefault(folder.rstrip("/"), skipped(older[version]))
    return kept


def newest_local(root: Path, files: list[Path], passed_over: dict[str, str]) -> list[Path]:
    """`files` (under the local folder `root`) without those of older versions of a toolkit
    bundle, each older version told once in `passed_over` (its folder → why)."""
    keys = {path.relative_to(root).as_posix(): path for path in files} if root.is_dir() else {}
    older = older_versions([key for key in keys if PurePosixPath(key).name == RUN_NAME],
                           lambda key: keys[key].read_bytes())
    for version, newer in sorted(older.items()):
        passed_over.setdefault(str(root / version), skipped(newer))
    return [path for key, path in keys.items() if _bundle_of(key, older) is None] if older else files


def older_versions(runs: list[str], read: Callable[[str], bytes]) -> dict[str, str]:
    """The folders of `runs` (the keys of `_run.json` files) that are older versions of a toolkit
    bundle → the folder of the version generated last."""
    bundles = {PurePosixPath(key).parent.as_posix(): key for key in runs}
    older: dict[str, str] = {}
    for folder in bundles:
        if _version_of(folder, PurePosixPath(folder).parent.as_posix()):
            continue  # a version inside another bundle: taken with that bundle
        versions = [folder] + [inner for inner in bundles if _version_of(inner, folder)]
        if len(versions) > 1:
            made = {version: _generated(read, bundles[version]) for version in versions}
            newest = max(versions, key=lambda version: (made[version], version))
            older.update((version, newest) for version in versions if version != newest)
    return older


def skipped(newer: str) -> str:
    shown = "the bundle at the location" if newer == "." else f"{newer}/"
    return (f"a focus-data-toolkit bundle that {shown} replaces (generated later, as their {RUN_NAME} say): its "
            "files are not read, they hold the same billing periods")


def _version_of(inner: str, folder: str) -> bool:
    """Whether `inner` is a `run-<id>/` folder the toolkit wrote inside the bundle `folder`."""
    path = PurePosixPath(inner)
    return path.name.startswith("run-") and path.parent.as_posix() == folder and inner != folder


def _bundle_of(key: str, older: dict[str, str]) -> str | None:
    """The older version holding `key`, if any: its innermost bundle folder, when that is one."""
    for parent in PurePosixPath(key).parents:
        folder = parent.as_posix()
        if folder in older:
            return folder
        if folder in older.values():
            return None  # inside the newest version
    return None


def _generated(read: Callable[[str], bytes], key: str) -> str:
    try:
        body = json_text.loads(read(key).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return ""
    return str(body.get("generated_at") or "") if isinstance(body, dict) else ""
