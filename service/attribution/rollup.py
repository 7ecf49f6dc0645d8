"""Materialised attribution: one small rollup per (source, billing period), kept in the lake.

A rollup holds the attributed sums of its period per exact charge period (see
service/attribution/sql.py). Its file name is its version: the allocation config's
fingerprint plus what the period's data came from (the ledger's delivery id and commit
time). A query asks for the versions it needs; a missing one — new delivery, changed
config, first query — is computed then and written through `Lake.commit_snapshot` as
`<lake>/attribution_rollup/source=<s>/billing_period=<p>/<version>.parquet`. So a config
change re-attributes history on the next query, without re-ingesting.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

import duckdb

from service.attribution.sql import inventory_keys_sql, rollup_sql, tag_keys_sql
from service.core.config_attribution import AttributionConfig
from service.core.lake import DATA_FILE, Lake
from service.core.ledger import LedgerEntry

log = logging.getLogger(__name__)

ROLLUP_TABLE = "attribution_rollup"
# Bump when the rollup's columns or meaning change, so old files are recomputed.
ROLLUP_FORMAT = "1"


@dataclass(frozen=True)
class Partition:
    source: str
    period: str
    file: Path | str  # a local path, or the URL Spark reads it at


def cost_partitions(lake: Lake) -> list[Partition]:
    """The configured sources' cost partitions, verified against the ledger (DataError if not)."""
    return [Partition(check.source, check.period, check.path) for check in lake.verified_costs()]


def rollup_version(lake: Lake, config: AttributionConfig, part: Partition, inventory: str) -> str:
    """The version of `part`'s rollup in `lake`; `inventory` is `inventory_tags_basis(lake)`."""
    entry = lake.ledger_entry(part.source, part.period)
    identity = ""
    if entry is None:  # a partition without a ledger entry: its file identity stands in for the delivery
        stat = Path(part.file).stat()
        identity = f"{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ino}"
    return version_name(config, entry, identity, inventory)


def version_name(config: AttributionConfig, entry: LedgerEntry | None, file_identity: str, inventory: str) -> str:
    """A rollup's file name: the config's fingerprint, then a hash of what the period's data
    came from (the ledger's delivery, else `file_identity`) and of the inventory tags."""
    basis = f"{entry.delivery_id}|{entry.ingested_at}|{entry.rows}" if entry is not None else file_identity
    if inventory:  # inventory tags fill in missing bill tags: a new snapshot re-attributes
        basis = f"{basis}|{inventory}"
    data = hashlib.sha256(f"{ROLLUP_FORMAT}|{basis}".encode()).hexdigest()[:16]
    return f"{config.fingerprint()}-{data}"


def inventory_tags_basis(lake: Lake) -> str:
    """What attribution reads of `resource_tags`: the content of each source's latest
    snapshot (empty without any). A new day's identical snapshot changes nothing."""
    latest = {}
    for source_dir in sorted(lake.table_dir("resource_tags").glob("source=*")):
        if not lake.counts(source_dir.name.split("=", 1)[1]):
            continue
        snapshots = sorted(source_dir.glob(f"snapshot_date=*/{DATA_FILE}"))
        if snapshots:
            latest[source_dir.name] = hashlib.sha256(snapshots[-1].read_bytes()).hexdigest()
    return inventory_basis(latest)


def inventory_basis(latest: dict[str, str]) -> str:
    """`source=<name>` directory → SHA-256 (hex) of its latest snapshot file, as one string."""
    return ";".join(f"{name}:{digest[:16]}" for name, digest in sorted(latest.items()))


def inventory_keys(lake: Lake, con: duckdb.DuckDBPyConnection) -> list[str] | None:
    """The inventory's tag keys (None when the lake has no `resource_tags`)."""
    if not lake.has_table("resource_tags"):
        return None
    sql = inventory_keys_sql()
    return sorted(row[0] for row in con.execute(sql.text, sql.params).fetchall())


def ensure_rollups(lake: Lake, config: AttributionConfig, con: duckdb.DuckDBPyConnection) -> list[Path]:
    """The current rollup file of every cost partition, computing the missing ones.
    `con` is a `Lake.query()` connection (it has the `costs` view)."""
    files = []
    inventory = inventory_tags_basis(lake)
    for part in cost_partitions(lake):
        version = rollup_version(lake, config, part, inventory)
        target = lake.partition_file(ROLLUP_TABLE, [("source", part.source), ("billing_period", part.period)])
        target = target.with_name(f"{version}.parquet")
        if not target.exists():
            build_rollup(lake, config, con, part, target.stem)
        files.append(target)
    return files


def build_rollup(lake: Lake, config: AttributionConfig, con: duckdb.DuckDBPyConnection, part: Partition,
                 version: str) -> Path:
    log.info("attributing %s %s (config %s)", part.source, part.period, version.split("-")[0])
    keys_sql = tag_keys_sql(part.source, part.period)
    tag_keys = [row[0] for row in con.execute(keys_sql.text, keys_sql.params).fetchall()]
    sql = rollup_sql(config, tag_keys, part.source, part.period, inventory_keys(lake, con))
    con.execute(f"CREATE OR REPLACE TEMP TABLE rollup_build AS {sql.text}", sql.params)
    try:
        return lake.commit_snapshot(con, con.table("rollup_build"), table=ROLLUP_TABLE,
                                    source=part.source, key="billing_period", value=part.period, version=version)
    finally:
        con.execute("DROP TABLE rollup_build")
