"""What attribution reads of the job records (`jobs`) and of EKS split rows, to allocate a
statement's GPU instance lines (service/attribution/allocation.py), and the part of a rollup's
version that stands for them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import datetime

import duckdb

from service.attribution.allocation import AllocationInputs, newest_records
from service.core.config_attribution import AttributionConfig
from service.core.config_clusters import ClustersConfig
from service.core.lake import DATA_FILE, Lake
from service.core.job_windows import asked_alike, window_stamp
from service.core.snapshot_ledger import recorded_snapshot
from service.core.snapshot_pins import Pinned

JOBS_TABLE = "jobs"


def allocation_inputs(lake: Lake, config: AttributionConfig, con: duckdb.DuckDBPyConnection, where: str = "TRUE",
                      params: dict | None = None) -> AllocationInputs | None:
    """The allocation's inputs for the cost lines matching `where` (bound `params`) on `con`
    (a `Lake.query` connection); None when the config has no `clusters:` section."""
    if config.clusters is None:
        return None
    return inputs_on(con, config.clusters, lake.has_table(JOBS_TABLE), where, params)


def inputs_on(con: duckdb.DuckDBPyConnection, clusters: ClustersConfig, has_jobs: bool, where: str = "TRUE",
              params: dict | None = None) -> AllocationInputs:
    """As `allocation_inputs`, on any connection with the `costs` view (and `jobs` when `has_jobs`)."""
    keys = label_keys(con) if has_jobs else ()
    has_split = clusters.eks_split and bool(con.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM costs WHERE ({where}) AND x_split_parent_resource_id IS NOT NULL "
        "LIMIT 1) AS found", {k: v for k, v in (params or {}).items() if re.search(rf"\${re.escape(k)}\b", where)}).fetchall()[0][0])
    return AllocationInputs(clusters, has_jobs, has_split, keys)


def label_keys(con: duckdb.DuckDBPyConnection) -> tuple[str, ...]:
    """The keys of the job records' labels (the `jobs` view on `con`)."""
    return tuple(sorted(row[0] for row in con.execute(
        "SELECT DISTINCT unnest(map_keys(labels)) FROM jobs WHERE labels IS NOT NULL").fetchall()))


def jobs_basis(lake: Lake, pinned: Mapping[str, Sequence[Pinned]] | None = None) -> dict[str, str]:
    """Each configured job source (`jobs/source=<name>`) → a digest of its snapshot files'
    names and contents: a new or changed snapshot changes it, so the rollups of a config with
    `clusters:` are rebuilt (history is every snapshot of a source, not only its latest); a
    snapshot rewritten with the same records (a re-run the same day) changes nothing. The
    digests are the snapshots' recorded ones (`snapshot_digest`): no file is read whole, and
    each record is read for its digest and times at once. `pinned`: a reader's snapshot's
    tables (service/core/snapshot_pins.py): the job snapshots it holds, not those there now."""
    if pinned is not None and JOBS_TABLE in pinned:
        held: dict[str, list[tuple[str, str, str]]] = {}
        for pin in pinned[JOBS_TABLE]:
            digest = pin.digest or recorded_snapshot(lake, pin.folder / DATA_FILE)[0]
            held.setdefault(pin.folder.parent.name, []).append((pin.folder.name, digest, window_stamp(pin.record)))
        return basis_of(held)
    stamps = {}
    for source_dir in sorted(lake.table_dir(JOBS_TABLE).glob("source=*")):
        if lake.counts(source_dir.name.split("=", 1)[1]):
            stamps[source_dir.name] = [(file.parent.name, digest, window_stamp(record)) for file in sorted(
                source_dir.glob(f"snapshot_date=*/{DATA_FILE}")) for digest, record in [recorded_snapshot(lake, file)]]
    return basis_of(stamps)


def basis_of(stamps: Mapping[str, Sequence[tuple[str, str, str]]]) -> dict[str, str]:
    """`jobs_basis` from each source directory's (snapshot directory, SHA-256 hex of its file,
    its job_windows.window_stamp), in snapshot order (the Spark engine finds them where it
    reads the files); a snapshot without times stamps as before."""
    return {f"{JOBS_TABLE}/{name}": hashlib.sha256(";".join(
        f"{snap}:{digest}" + (f"@{window}" if window else "") for snap, digest, window in files).encode())
            .hexdigest() for name, files in stamps.items() if files}


def newly_ended(con: duckdb.DuckDBPyConnection, source: str, snapshot_date: str) -> tuple[int, str | None,
                                                                                        datetime | None]:
    """(how many, the first's record id, when its snapshot was taken) of the job records of
    `source` its snapshot of `snapshot_date` ends (allocation.SETTLED_JOBS) and no earlier did."""
    return _left_out(con, source, snapshot_date, asked_alike("n", "s"))


def newly_unasked(con: duckdb.DuckDBPyConnection, source: str, snapshot_date: str) -> tuple[int, str | None,
                                                                                          datetime | None]:
    """As `newly_ended`, of the records it ends having asked otherwise than their snapshot
    (service/core/job_windows.py)."""
    return _left_out(con, source, snapshot_date, f"NOT {asked_alike('n', 's')}")


def _left_out(con: duckdb.DuckDBPyConnection, source: str, snapshot_date: str,
              newer: str) -> tuple[int, str | None, datetime | None]:
    """The running job records of `source` whose snapshot `s` the one of `snapshot_date` (`n`,
    matching `newer`) ends, leaving them out, and no snapshot `m` between ended."""
    return con.execute(
        f"SELECT count(*), arg_min(j.record_id, j.start_time), arg_min(s.taken_at, j.start_time) FROM ("
        f"{newest_records('jobs')}) AS j JOIN job_snapshots AS s ON s.source = j.source "
        "AND s.snapshot_date = CAST(j.snapshot_date AS VARCHAR) JOIN job_snapshots AS n ON n.source = s.source "
        f"AND n.snapshot_date = $date AND {newer} "
        "WHERE j.newest = 1 AND j.source = $source AND j.end_time IS NULL AND j.start_time IS NOT NULL "
        "AND s.taken_at IS NOT NULL "
        "AND s.snapshot_date < $date AND NOT EXISTS (SELECT 1 FROM job_snapshots AS m WHERE m.source = s.source "
        "AND m.snapshot_date > s.snapshot_date AND m.snapshot_date < $date)",
        {"date": snapshot_date, "source": source}).fetchall()[0]
