"""Storing rollups (service/attribution/rollup_versions.py names them) and removing superseded ones;
with `clusters:`, each period's placed parts beside its rollup, under its version name
(service/attribution/placed.py), written, recorded and removed alike; a period that needs both
is allocated once, its attributed rows staged and grouped for each.

Who writes: ingest after its commits, and `spendlake rollup` after a config change, both
under the lake's ingest lock (`build_rollups`); each file is staged, fsynced, recorded
(service/core/derived_records.py) and renamed into place, so a reader finds it whole or not
at all, and reads it only while it matches its record. Queries never write: a period whose
version is not stored is rolled up from its raw lines in memory, for that query only
(service/attribution/rollup.py `rollup_view`; `-v` logs which). So a config change
re-attributes history at once.

Which files go (`build_rollups` again, under the lock): a version superseded for at least
ROLLUP_GRACE, by the wall clock, and already found superseded by an earlier build (when, kept
in `_state/rollups_superseded.json`), so a clock stepped forward between a commit and its build
removes nothing readers of the previous delivery hold, and one that ran ahead at the commit
keeps nothing longer than the grace after it was first found. Superseded means its period has a
newer delivery (whatever config wrote it; since that commit), or, for the building config's
own owner only, newer inventory tags (since the current version was stored). A version of
the current data that another config reads (another owner) is never removed by this
config's build unless it is damaged. A reader picks the version named by the ledger it read at its start, so a
query shorter than the grace always finds its files; one that finds a file gone anyway reads
again (service/core/snapshot.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb

from service.attribution.allocation_stage import drop_stage
from service.attribution.node_sharing import shared_nodes_on
from service.attribution.placed import PLACED_TABLE, placed_file, placed_of_staged, placed_relation
from service.attribution.rollup import rollup_relation, stored_whole
from service.attribution.rollup_versions import (READ_TABLES, ROLLUP_TABLE, Partition, Version, cost_partitions,
                                                 inventory_keys, inventory_latest, owner_of, rollup_file, version_of)
from service.core import derived_records, derived_sweep
from service.core.config_attribution import AttributionConfig
from service.core.coverage import parse_utc
from service.core.errors import DataError
from service.core.lake import WRITER_MEMORY_LIMIT, Lake
from service.core.ledger import LedgerEntry
from service.core.timewindow import iso_utc

log = logging.getLogger(__name__)

ROLLUP_GRACE = timedelta(hours=1)
SUPERSEDED_STATE = "rollups_superseded"  # the versions earlier builds found superseded (and kept)
STAGED = "a_rollup_rows"  # a period's attributed rows, staged for its rollup and its placed parts


@dataclass(frozen=True)
class RollupBuild:
    """What `build_rollups` did: periods written (the rollup, or only its placed parts), already
    stored, superseded versions removed."""

    built: int = 0
    stored: int = 0
    removed: int = 0
    warnings: list[str] = field(default_factory=list)  # for the CLI's `warning:` lines


def build_rollups(lake: Lake, config: AttributionConfig, *, grace: timedelta = ROLLUP_GRACE,
                  now: datetime | None = None) -> RollupBuild:
    """Store the current rollup of every period for `config` and remove the versions
    superseded for at least `grace` (see the module). Call only while holding the ingest lock."""
    now = now or datetime.now(timezone.utc)
    snapshot = lake.snapshot()
    parts = cost_partitions(lake, snapshot)
    if not parts:
        return RollupBuild()
    inventory = inventory_latest(lake, config)
    # A period's rollup groups every (hour, team, project, experiment, ...): 9M groups for a
    # month of 1M experiments, 2.7 GB of hash tables unbounded. Spilling beyond the ingest
    # writer's limit keeps the service that builds them after each ingest under 1 GB.
    con = lake.query(snapshot, memory_limit=WRITER_MEMORY_LIMIT, tables=READ_TABLES)
    built = stored = removed = 0
    found = derived_records.problems(lake)
    # a version → when a build first found it superseded, by its clock (one ahead: counts as now)
    since, warnings = superseded_since(lake)
    seen = {key: min(parse_utc(at), now) for key, at in since.items()}
    sweep = _Sweep(now, grace, owner_of(config, {}), seen, set(seen), found)
    try:
        keys = inventory_keys(lake, con)
        for part in parts:
            version = version_of(config, part.entry, inventory)
            target = rollup_file(lake, part, version)
            wrote = False  # a period counts as built when its rollup or its placed parts were written
            placed = placed_file(lake, part, version.name)
            # the parts it placed per instance-hour (placed.py), beside it: missing, unrecorded or damaged
            placing = config.clusters is not None and not derived_records.check(lake, placed, found).ok
            staged = None
            if stored_whole(lake, target, found):
                derived_records.restat(lake, target)  # its stat recorded again if it changed: reads hash no more
            else:
                log.info("attributing %s %s (config %s)", part.source, part.period, config.fingerprint())
                staged = STAGED if placing else None  # the period allocated once, grouped for both files
                relation, _, stage = rollup_relation(lake, config, con, part, keys, staged=staged)
                path = lake.commit_snapshot(con, relation, table=ROLLUP_TABLE, source=part.source,
                                            key="billing_period", value=part.period, version=version.name)
                drop_stage(con, stage)  # the next period's allocation stages its own
                wrote = True
                _warn_overbooked(con, config, part, path)
            if placing:
                relation, stage = (placed_of_staged(con, staged), None) if staged else placed_relation(
                    lake, config, con, part)  # its rollup was stored: the placed parts alone
                lake.commit_snapshot(con, relation, table=PLACED_TABLE, source=part.source, key="billing_period",
                                     value=part.period, version=version.name)
                drop_stage(con, stage)
                wrote = True  # a repair `spendlake rollup` says it did
            elif config.clusters is not None:
                derived_records.restat(lake, placed)
            if staged:
                con.execute(f"DROP TABLE IF EXISTS {staged}")
            built, stored = built + wrote, stored + (not wrote)
            for folder in (target.parent, placed.parent):
                removed += sweep.remove(lake, target, folder, version, part.entry)
        strays = derived_sweep.sweep_periods(lake, {part.source for part in parts})  # and records of files gone
        if strays:
            log.warning("removed %d rollup or placed file(s) of period folders the ledger holds no cost partition for "
                        "(renamed or copied in)", strays)
    finally:
        con.close()
    lake.write_state(SUPERSEDED_STATE, {"since": {key: iso_utc(at) for key, at in sorted(seen.items())
                                                  if (lake.root / f"{key}.parquet").exists()}})
    log.info("rollups for config %s: %d built, %d already stored, %d superseded removed",
             config.fingerprint(), built, stored, removed)
    return RollupBuild(built, stored, removed, warnings)


@dataclass
class _Sweep:
    """What one build knows as it removes superseded versions (`remove`)."""

    now: datetime
    grace: timedelta
    before: str  # this config's owner before the lake had inventory it reads
    seen: dict[str, datetime]  # a version → when a build first found it superseded, by its clock
    earlier: set[str]  # of those, the ones an earlier build found
    found: dict[str, dict]  # derived_records.problems

    def remove(self, lake: Lake, target: Path, folder: Path, version: Version, entry: LedgerEntry) -> int:
        """Remove the versions in `folder` (the rollup's, or its placed rows') that the rollup
        `target` at `version` supersedes (see the module); returns how many went."""
        # superseded for the grace and already when an earlier build looked (a clock stepped
        # forward alone removes nothing a reader from before this commit holds), since the
        # earlier of its stamp and when first found (a stamp by a clock that ran ahead would
        # keep it until the calendar got there); a damaged one at once, and another config's
        # current one only when damaged: no reader gets a sound answer from it, and `verify`
        # would flag it (saying to run this build) until the grace ran out, or for ever
        listed = {}
        for name, since in superseded(target, version, entry, self.before, folder).items():
            key = str(folder.relative_to(lake.root) / name)
            if since is not None:
                since = min(since, self.seen.setdefault(key, self.now))
            listed[key] = (name, since)
        gone = [name for key, (name, since) in listed.items()
                if since is not None and since <= self.now - self.grace and key in self.earlier
                or derived_records.check(lake, folder / f"{name}.parquet", self.found).damaged]
        derived_records.drop_versions(lake.root, folder, gone)
        return len(gone)


def superseded_since(lake: Lake) -> tuple[dict[str, str], list[str]]:
    """When earlier builds first found each version superseded (rollups; metric tops of replaced configs,
    service/attribution/tops.py), by path under the lake without `.parquet`; a damaged file (truncated by a full
    disk) read as none, said once: it stopped every build until deleted, and only delays removals
    by a grace (each found again now), the build writing it whole again."""
    try:
        return lake.read_state(SUPERSEDED_STATE).get("since", {}), []
    except DataError as exc:
        return {}, [f"{exc.where}: unreadable ({exc.message.removeprefix('state file is unreadable: ')}); read as "
                    "empty and written again: superseded rollups are removed a grace later than they would be"]


def _warn_overbooked(con: duckdb.DuckDBPyConnection, config: AttributionConfig, part: Partition, path: Path) -> None:
    if config.clusters is None:
        return
    count = con.execute("SELECT coalesce(sum(overbooked), 0) FROM read_parquet(?)", [str(path)]).fetchall()[0][0]
    if count:
        log.warning("%s %s: %d instance-hour(s) over-booked (their jobs held more GPU-seconds than the instance "
                    "has); shared in proportion to the jobs, none idle", part.source, part.period, count)
        lo, hi = con.execute("SELECT min(cp_start), max(cp_end) FROM read_parquet(?) WHERE overbooked > 0",
                             [str(path)]).fetchall()[0]
        for shared in shared_nodes_on(con, lo, hi) if lo is not None and config.clusters.node_tag else ():
            log.warning("%s %s: %s", part.source, part.period, shared.text())


def superseded(current: Path, version: Version, entry: LedgerEntry, before: str,
               folder: Path | None = None) -> dict[str, datetime | None]:
    """Versions beside `current` (or in `folder`, another table's of the same period: a version
    named as `current` is it) → since when they are superseded: of an older delivery (since
    `entry` was committed), or of this owner with older inventory tags or an older name, or
    of this config before the lake had inventory it reads (owner `before`: a first ingest
    comes before the first inventory) (since `current` was stored); None for the current data
    as another config reads it (not superseded). One listing of the folder."""
    committed = datetime.fromisoformat(entry.ingested_at.replace("Z", "+00:00"))
    stored = datetime.fromtimestamp(current.stat().st_mtime, timezone.utc)
    gone = {}
    for file in sorted((folder or current.parent).glob("*.parquet")):
        other = Version.parse(file.stem)
        if file.stem == current.stem:
            continue
        if other is not None and other.data != version.data:
            since = committed
        elif other is None or (other.owner in (version.owner, before) and other.inventory != version.inventory):
            since = stored
        else:
            since = None  # the current data as another config reads it
        gone[file.stem] = since
    return gone
