"""Errors of the lake's own files that DuckDB cannot read: damaged (cut short, bytes altered),
named with the command that writes them again; or behind a symbolic link out of the lake.

DuckDB reads only inside the lake folder (its sandbox, service/core/connection.py), following a
link that stays inside it. A folder moved to another disk and linked back (`costs/`, a period's
folder, `jobs/`) is refused with a Permission Error that names the file: that is no damage, and
deleting the file as damage's fix would lose committed data a source may no longer hold. Such a
link is refused by name instead, before DuckDB opens anything where it is cheap to look (the
lake's table folders at each connection and partition check, a cost partition's folders at its
check, the staging area before an ingest empties it), and where a DuckDB error shows it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from service.core.errors import ERROR_KIND, SANDBOX_REFUSAL, DataError, duckdb_reason, resource_error

LAKE_FILE = re.compile(r"""['"](/[^'"]*/([a-z0-9_]+)/source=([^/'"]+)/[^'"]*\.parquet)['"]""")
REWRITTEN_BY = {"costs": "spendlake ingest", "attribution_rollup": "spendlake rollup",
                "attribution_placed": "spendlake rollup", "metric_tops": "spendlake rollup",
                "findings": "spendlake rules run", "plans": "spendlake estimate --register NAME ... (each plan again)"}
STAGING = "_staging"


def damaged_lake_file(exc: BaseException, path: str | None = None) -> DataError | None:
    """A DuckDB error reading one of the lake's own Parquet files (cut short, bytes altered),
    found in the error's text or given as `path`: the file named, with the command that writes
    it again; else None. Cost partitions and recorded snapshots are checked before they are
    read; a rollup, the metric tops or a snapshot written before records is named here. The
    sandbox's refusal of a file behind a link out of the lake is that link's error, not damage."""
    if type(exc).__module__ not in ("duckdb", "_duckdb") or resource_error(exc) is not None:
        return None
    found = LAKE_FILE.search(str(exc) if path is None else f"'{path}'")
    if found is None:
        return None
    path, table, source = found.groups()
    if SANDBOX_REFUSAL.search(str(exc)):
        root = Path(path[:path.rindex(f"/{table}/source=")])
        return linked_error(root, Path(path)) or DataError(
            "DuckDB may not read this lake file: it is not inside the lake folder it was started on", where=path,
            hint="put the lake's folders back inside it (a folder moved to another disk: mount the disk there)")
    reason = duckdb_reason(exc).splitlines()[0].replace(f" '{path}'", "").replace(f' "{path}"', "")
    return damaged_file(path, table, source, ERROR_KIND.sub('', reason).strip())


def damaged_file(path: str, table: str, source: str, reason: str, hint: str | None = None) -> DataError:
    """The error for a lake file of `table` (a path or URL) that cannot be read for `reason`,
    with the command that writes it again (the DuckDB and the Spark reads name it alike), or
    `hint` where a smaller fix keeps the rest of the file."""
    command = REWRITTEN_BY.get(table, f"spendlake inventory --source {source}")
    again = "" if table in REWRITTEN_BY else " as far as the source still holds it (an older snapshot is gone)"
    return DataError(f"this lake file cannot be read, it is damaged ({reason})",
                     where=path, hint=hint or f"delete it and run `{command}`, which writes it again{again}")


def refuse_top_links(root: Path) -> None:
    """A DataError for a table's folder of the lake's root that is a symbolic link out of the
    lake: one listing of the root, at every connection and check of the partitions."""
    try:
        with os.scandir(root) as listing:
            entries = list(listing)
    except FileNotFoundError:  # a lake not made yet: the writer makes it
        return
    for entry in entries:
        if entry.is_symlink() and not entry.name.startswith("_"):
            refuse_links(root, Path(entry.path))


def refuse_links(root: Path, path: Path) -> None:
    """A DataError when `path` or a folder between `root` and it is a symbolic link out of
    `root` (linked_error). The checks pass a partition's folder: a file of its own replaced by a
    link (to /dev/zero) is judged by its size and footer, as a file in its place would be."""
    error = linked_error(root, path)
    if error is not None:
        raise error


def linked_error(root: Path, path: Path) -> DataError | None:
    """The error for the first folder (or file) from `root` down to `path` that is a symbolic
    link to somewhere outside `root`; None when there is none. Strings and os.path, not Path
    objects, on the way down: every partition check of every snapshot passes here."""
    text = str(root)
    for part in str(path)[len(text) + 1:].split(os.sep):
        text = os.path.join(text, part)
        if not os.path.islink(text):
            continue
        link, target = Path(text), Path(text).resolve()
        if target == root or root in target.parents:  # DuckDB follows a link that stays inside
            continue
        if link.name == STAGING:
            return DataError(f"{link} is a symbolic link to {target}, outside the lake: an ingest writes its files "
                             "there through DuckDB, which writes only inside the lake (its sandbox), and moves them "
                             "into place by rename", where=str(link),
                             hint="remove the link (spendlake makes the folder again), or mount the disk there")
        return DataError(f"{link} is a symbolic link to {target}, outside the lake: DuckDB reads only inside the lake "
                         "(its sandbox)", where=str(link), hint="move the folder back, or mount the disk there"
                         if target.is_dir() else "copy the file in place of the link")
    return None
