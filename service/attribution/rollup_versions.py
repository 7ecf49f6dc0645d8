"""What a rollup is and where it lives: one small file per (source, billing period), kept in
the lake at `<lake>/attribution_rollup/source=<s>/billing_period=<p>/<owner>-<data>-<inventory>.parquet`.
Its name is its version:
- owner: the allocation config's fingerprint and the inventory sources it reads;
- data: the delivery the ledger records for the period (id, commit time, rows);
- inventory: the content of the latest inventory tag snapshots it reads and, with
  `attribution.clusters`, the job snapshots (service/attribution/jobs.py).

service/attribution/rollup.py reads them (or rolls a period up in memory),
service/attribution/rollup_build.py writes them and removes superseded ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from service.attribution.jobs import JOBS_TABLE, jobs_basis
from service.attribution.tag_keys import inventory_keys_sql
from service.core.config_attribution import AttributionConfig
from service.core.lake import DATA_FILE, Lake
from service.core.ledger import LedgerEntry
from service.core.snapshot import Snapshot
from service.core.snapshot_ledger import snapshot_digest
from service.core.snapshot_pins import Pinned

ROLLUP_TABLE = "attribution_rollup"
# What attribution reads of the lake (the tables a version names the state of): its connections
# open these views alone, so a damaged table it does not read (findings, plans) stops none of it
READ_TABLES = ("costs", "resource_tags", JOBS_TABLE)
TAGS_TABLE = "resource_tags"
HELD_TABLES = READ_TABLES[1:]  # what a reader holds with its costs, as they were (core.snapshot_pins)
# Bump when the rollup's columns or meaning change, so old files are recomputed.
ROLLUP_FORMAT = "6"  # 2: an EKS pod's run from its run tag on any of its rows; 3: a window job left out by a
# snapshot that asked otherwise ends when last seen (service/core/job_windows.py), and a pod read by name
# under a source's former `cluster` is the pod it read by uid under the new one; 4: a job's part is placed on
# `job:<id>` and its record (service/attribution/job_how.py); 5: a job's instance id meets a bill's as an
# ARN, a providerID or an Azure id in another case (allocation_placement.instance_key); 6: a line's
# instance-hours bound its instance's capacity (allocation_hours.py: a daily line of 3 hours, a scale set's)


@dataclass(frozen=True)
class Partition:
    source: str
    period: str
    file: Path | str  # a local path, or the URL Spark reads it at
    entry: LedgerEntry | None = None  # the ledger entry the file matched


@dataclass(frozen=True)
class Version:
    owner: str
    data: str
    inventory: str

    @property
    def name(self) -> str:
        return f"{self.owner}-{self.data}-{self.inventory}"

    @classmethod
    def parse(cls, name: str) -> Version | None:
        parts = name.split("-")
        return cls(*parts) if len(parts) == 3 else None  # None: a name from before versions had three parts


def cost_partitions(lake: Lake, snapshot: Snapshot | None = None) -> list[Partition]:
    """The configured sources' cost partitions, verified against the ledger (DataError if not)."""
    snapshot = snapshot or lake.snapshot()
    return [Partition(check.source, check.period, check.path, check.entry) for check in snapshot.checks]


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def owner_of(config: AttributionConfig, inventory: dict[str, str]) -> str:
    """Whose a rollup is: the allocation config and the inventory sources it reads (`inventory_latest`)."""
    return _hash(f"{config.fingerprint()}|{','.join(sorted(inventory))}")


def version_of(config: AttributionConfig, entry: LedgerEntry, inventory: dict[str, str]) -> Version:
    """The version of a period's rollup: `entry` is its ledger entry, `inventory` the
    `inventory_latest` of the lake it reads."""
    return Version(owner=owner_of(config, inventory),
                   data=_hash(f"{ROLLUP_FORMAT}|{entry.delivery_id}|{entry.ingested_at}|{entry.rows}"),
                   inventory=_hash(inventory_basis(inventory)))


def inventory_latest(lake: Lake, config: AttributionConfig | None = None,
                     pinned: Mapping[str, Sequence[Pinned]] | None = None) -> dict[str, str]:
    """What attribution reads of `resource_tags`: `source=<name>` → SHA-256 of that configured
    source's latest snapshot. A new day's identical snapshot changes nothing. With
    `clusters:` in `config`, the job snapshots too (`jobs_basis`). `pinned`: a reader's
    snapshot's tables (Snapshot.tables): the snapshots it holds, not those there now."""
    latest = jobs_basis(lake, pinned) if config is not None and config.clusters is not None else {}
    if pinned is not None and TAGS_TABLE in pinned:
        for pin in pinned[TAGS_TABLE]:  # sorted: a source's latest comes last
            latest[pin.folder.parent.name] = pin.digest or snapshot_digest(lake, pin.folder / DATA_FILE)
        return latest
    for source_dir in sorted(lake.table_dir("resource_tags").glob("source=*")):
        if not lake.counts(source_dir.name.split("=", 1)[1]):
            continue
        snapshots = sorted(source_dir.glob(f"snapshot_date=*/{DATA_FILE}"))
        if snapshots:
            latest[source_dir.name] = snapshot_digest(lake, snapshots[-1])  # recorded: not read whole
    return latest


def inventory_basis(latest: dict[str, str]) -> str:
    """`source=<name>` directory → SHA-256 (hex) of its latest snapshot file, as one string."""
    return ";".join(f"{name}:{digest[:16]}" for name, digest in sorted(latest.items()))


def inventory_keys(lake: Lake, con: duckdb.DuckDBPyConnection) -> list[str] | None:
    """The inventory's tag keys (None when the lake has no `resource_tags`)."""
    if not lake.has_table("resource_tags"):
        return None
    sql = inventory_keys_sql()
    return sorted(row[0] for row in con.execute(sql.text, sql.params).fetchall())


def recorded_tag_keys(parts: list[Partition]) -> list[str] | None:
    """The tag keys of `parts`' lines as ingest recorded them in the ledger (sorted), so no
    query decodes every line's Tags map for them; None when an entry predates that record."""
    keys: set[str] = set()
    for part in parts:
        if part.entry is None or part.entry.tag_keys is None:
            return None
        keys.update(part.entry.tag_keys)
    return sorted(keys)


def rollup_file(lake: Lake, part: Partition, version: Version) -> Path:
    folder = lake.partition_file(ROLLUP_TABLE, [("source", part.source), ("billing_period", part.period)]).parent
    return folder / f"{version.name}.parquet"
