"""Materialised attribution: one small rollup per (source, billing period), kept in the lake.

A rollup holds the attributed sums of its period per exact charge period (see
service/attribution/sql.py), at `<lake>/attribution_rollup/source=<s>/billing_period=<p>/
<owner>-<data>-<inventory>.parquet`. Its name is its version:
- owner: the allocation config's fingerprint and the inventory sources it reads;
- data: the delivery the ledger records for the period (id, commit time, rows);
- inventory: the content of the latest inventory tag snapshots it reads and, with
  `attribution.clusters`, the job snapshots (service/attribution/jobs.py).

Who writes: ingest after its commits, and `spendlake rollup` after a config change, both
under the lake's ingest lock (`build_rollups`); each file is staged, fsynced, recorded
(service/core/derived_records.py) and renamed into place, so a reader finds it whole or not
at all, and reads it only while it matches its record. Queries never write: a period whose
version is not stored is rolled up from its raw lines in memory, for that query only
(`rollup_view`; `-v` logs which). So a config change re-attributes history at once.

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

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb

from service.attribution.allocation import Stage
from service.attribution.allocation_stage import drop_stage
from service.attribution.jobs import allocation_inputs, jobs_basis
from service.attribution.grouped_lines import tag_map_groups_sql
from service.attribution.needs import Needs, loosely, needed_dimensions
from service.attribution.node_sharing import shared_nodes_on
from service.attribution.sql import inventory_keys_sql, rollup_sql, run_setup, tag_candidates, tag_keys_sql
from service.core import derived_records
from service.core.config_attribution import AttributionConfig
from service.core.coverage import parse_utc
from service.core.folding import folded, folded_forms
from service.core.lake import DATA_FILE, WRITER_MEMORY_LIMIT, Lake
from service.core.ledger import LedgerEntry
from service.core.snapshot import Snapshot
from service.core.snapshot_ledger import snapshot_digest
from service.core.timewindow import iso_utc

log = logging.getLogger(__name__)

ROLLUP_TABLE = "attribution_rollup"
# Bump when the rollup's columns or meaning change, so old files are recomputed.
ROLLUP_FORMAT = "3"  # 2: an EKS pod's run from its run tag on any of its rows; 3: a window job left out by a
# snapshot that asked otherwise ends when last seen (service/core/job_windows.py), and a pod read by name
# under a source's former `cluster` is the pod it read by uid under the new one
ROLLUP_GRACE = timedelta(hours=1)
SUPERSEDED_STATE = "rollups_superseded"  # the versions earlier builds found superseded (and kept)
MEMORY_TABLE = "rollups_in_memory"
# The bench's 10M-line month grouped by the values of 4 tag keys costs about what grouping by
# its maps does (1.56 vs 1.68 CPU s), by 5 more (1.71), by 8 a third more (2.23; bench/README.md)
TAG_MAP_KEYS = 5


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


@dataclass(frozen=True)
class RollupBuild:
    """What `build_rollups` did: versions written, already stored, superseded ones removed."""

    built: int = 0
    stored: int = 0
    removed: int = 0


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


def inventory_latest(lake: Lake, config: AttributionConfig | None = None) -> dict[str, str]:
    """What attribution reads of `resource_tags`: `source=<name>` → SHA-256 of that configured
    source's latest snapshot. A new day's identical snapshot changes nothing. With
    `clusters:` in `config`, the job snapshots too (`jobs_basis`)."""
    latest = jobs_basis(lake) if config is not None and config.clusters is not None else {}
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


def narrowed_to(config: AttributionConfig, needs: Needs, tag_keys: list[str],
                inventory: list[str] | None) -> tuple[str, tuple[str, ...]] | None:
    """(dimension, lowercase values) when a period rolled up in memory for `needs` may keep, of
    the lines allocation does not split, only those whose own or inventory tags for that
    dimension hold one of the values (`needs.where`); else None. A line left out then has
    none of them (its value is a rule's or the default), so the query's rows stay exact. Only
    with one `--where` dimension, no shared rules (their splits read every line's spend), no
    rule or default giving a wanted value, and no other dimension it reads from a tag key the
    period's lines or the inventory carry: a line left out can then only carry constants in
    those (rules' values, defaults), whose spellings `api.py` checks against the shown ones."""
    if len(needs.where) != 1 or config.shared or needs.dims is None:
        return None
    dim, values = needs.where[0]
    wanted = tuple(sorted({form for value in values for form in folded_forms(value)}))
    loose = {loosely(value) for value in values}
    definition = config.dimensions[dim]
    if any(folded(value) in wanted or loosely(value) in loose
           for value in (definition.default, *(r.value for r in definition.rules))):
        return None
    for other in needs.dims:
        aliases = config.dimensions[other].tags or (other,)
        if other != dim and (tag_candidates(aliases, tag_keys) or tag_candidates(aliases, inventory or ())):
            return None
    return dim, wanted


def _rollup_relation(lake: Lake, config: AttributionConfig, con: duckdb.DuckDBPyConnection,
                     part: Partition, inventory: list[str] | None,
                     needs: Needs = Needs()) -> tuple[duckdb.DuckDBPyRelation, bool, Stage | None]:
    """The attributed rollup of one period, from its raw lines (`con` has the `costs` view),
    and whether it holds only the lines `needs.where` can match (`narrowed_to`); `needs`:
    only those dimensions and measures (default all)."""
    keys_sql = tag_keys_sql(part.source, part.period)
    tag_keys = recorded_tag_keys([part])
    if tag_keys is None:
        tag_keys = [row[0] for row in con.execute(keys_sql.text, keys_sql.params).fetchall()]
    allocation = allocation_inputs(lake, config, con, "source = $source AND billing_period = $period",
                                   keys_sql.params)
    narrow = narrowed_to(config, needs, tag_keys, inventory)
    by_map = allocation is None and groups_by_tag_map(con, config, tag_keys, part, needs.dims)
    sql = rollup_sql(config, tag_keys, part.source, part.period, inventory, allocation, needs, narrow=narrow,
                     by_tag_map=by_map)
    run_setup(con, sql)
    return con.sql(sql.text, params=sql.params), narrow is not None, sql.stage


def groups_by_tag_map(con: duckdb.DuckDBPyConnection, config: AttributionConfig, tag_keys: list[str],
                      part: Partition, dims: tuple[str, ...] | None) -> bool:
    """Whether a rollup without allocation groups the period's lines by their whole Tags map
    rather than by the values of the tag keys it reads (sql.py `by_tag_map`): no lookup per
    line and key (the bench's 10M-line month: its build 2.6 -> 2.0 CPU s), unless the maps vary more
    than those values (a Name tag per resource makes each line its own group: 2.4x the CPU).
    Judged on the period's first lines: by the map when that makes at most twice the groups,
    and TAG_MAP_KEYS keys or more are read (fewer lookups cost less than the map's grouping)."""
    keys = list(dict.fromkeys(key for name in needed_dimensions(config, dims)
                              for key in tag_candidates(config.dimensions[name].tags or (name,), tag_keys)))
    if len(keys) < TAG_MAP_KEYS:
        return False
    params = {"source": part.source, "period": part.period, **{f"k{n}": key for n, key in enumerate(keys)}}
    [(by_map, by_values)] = con.execute(tag_map_groups_sql(len(keys)), params).fetchall()
    return by_map <= 2 * by_values


@dataclass(frozen=True)
class RollupSplit:
    """The periods of a snapshot whose rollup for a config is stored, and those without one
    (rolled up in memory by a reader), each as (partition, its rollup file)."""

    stored: list[tuple[Partition, Path]]
    missing: list[tuple[Partition, Path]]


def rollup_split(lake: Lake, config: AttributionConfig, snapshot: Snapshot) -> RollupSplit:
    inventory = inventory_latest(lake, config)
    found = derived_records.problems(lake)
    stored, missing = [], []
    for part in cost_partitions(lake, snapshot):
        file = rollup_file(lake, part, version_of(config, part.entry, inventory))
        (stored if stored_whole(lake, file, found) else missing).append((part, file))
    return RollupSplit(stored, missing)


def stored_whole(lake: Lake, file: Path, found: dict[str, dict] | None = None) -> bool:
    """True when the rollup `file` is stored and matches its record (size, footer rows, and
    the last `spendlake verify`: `found`, derived_records.problems). One that does not, or
    has no record, is derived data: the period is rolled up from its raw lines instead (said
    with -v), and the next build writes it again."""
    check = derived_records.check(lake, file, found)
    if check.state not in ("ok", "missing"):
        log.info("attribution: the stored rollup %s is %s (%s): its period is rolled up from the raw lines; %s",
                 file, "damaged" if check.damaged else check.state, check.reason, derived_records.REPAIR)
    return check.ok


def rollup_view(lake: Lake, config: AttributionConfig, con: duckdb.DuckDBPyConnection, snapshot: Snapshot,
                view: str, needs: Needs = Needs(), split: RollupSplit | None = None) -> tuple[list[Path], bool]:
    """Create `view` over every period's rollup: the stored version where there is one, else
    rolled up from the raw lines into a temporary table of `con` (a `Lake.query` connection
    on `snapshot`), with only the dimensions and measures of `needs` (default all): a query
    rolls up no more than it reads. Writes nothing to the lake;
    returns the stored files it reads. `split`: `rollup_split` of the same snapshot, if taken."""
    split = split or rollup_split(lake, config, snapshot)
    stored, missing = split.stored, split.missing
    keys = inventory_keys(lake, con) if missing else None
    narrowed = False
    for number, (part, _) in enumerate(missing):
        relation, narrow, stage = _rollup_relation(lake, config, con, part, keys, needs)
        narrowed = narrowed or narrow
        temp = f"rollup_part_{number}"
        relation.create_view(temp)
        into = f"CREATE TEMP TABLE {MEMORY_TABLE} AS" if number == 0 else f"INSERT INTO {MEMORY_TABLE}"
        con.execute(f"{into} SELECT *, ? AS source, ? AS billing_period FROM {temp}", [part.source, part.period])
        con.execute(f"DROP VIEW {temp}")
        drop_stage(con, stage)
    if missing:
        log.info("attribution: %d period(s) from stored rollups, %d rolled up from the raw lines in memory "
                 "(no stored rollup for this config and delivery yet: %s; `spendlake rollup` stores them)",
                 len(stored), len(missing), ", ".join(f"{p.source} {p.period}" for p, _ in missing[:5])
                 + (" …" if len(missing) > 5 else ""))
    selects, params = [], []
    if stored:
        selects.append("SELECT * FROM read_parquet(?, hive_partitioning = true, "
                       "hive_types = {'source': VARCHAR, 'billing_period': VARCHAR})")
        params.append([str(file) for _, file in stored])
    if missing:
        selects.append(f"SELECT * FROM {MEMORY_TABLE}")
    if selects:
        con.sql(" UNION ALL BY NAME ".join(selects), params=params).create_view(view)
    return [file for _, file in stored], narrowed


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
    con = lake.query(snapshot, memory_limit=WRITER_MEMORY_LIMIT)
    built = stored = removed = 0
    found = derived_records.problems(lake)
    # a version → when a build first found it superseded, by its clock (one ahead: counts as now)
    seen = {key: min(parse_utc(at), now) for key, at in lake.read_state(SUPERSEDED_STATE).get("since", {}).items()}
    earlier = set(seen)
    before = owner_of(config, {})  # this config's versions stored before the lake had inventory it reads
    try:
        keys = inventory_keys(lake, con)
        for part in parts:
            version = version_of(config, part.entry, inventory)
            target = rollup_file(lake, part, version)
            if stored_whole(lake, target, found):
                stored += 1
            else:
                log.info("attributing %s %s (config %s)", part.source, part.period, config.fingerprint())
                relation, _, stage = _rollup_relation(lake, config, con, part, keys)
                path = lake.commit_snapshot(con, relation, table=ROLLUP_TABLE, source=part.source,
                                            key="billing_period", value=part.period, version=version.name)
                drop_stage(con, stage)  # the next period's allocation stages its own
                built += 1
                _warn_overbooked(con, config, part, path)
            # superseded for the grace and already when an earlier build looked (a clock stepped
            # forward alone removes nothing a reader from before this commit holds), since the
            # earlier of its stamp and when first found (a stamp by a clock that ran ahead would
            # keep it until the calendar got there); a damaged one at once, and another config's
            # current one only when damaged: no reader gets a sound answer from it, and `verify`
            # would flag it (saying to run this build) until the grace ran out, or for ever
            listed = {}
            for name, since in superseded(target, version, part.entry, before).items():
                key = str(target.parent.relative_to(lake.root) / name)
                if since is not None:
                    since = min(since, seen.setdefault(key, now))
                listed[key] = (name, since)
            gone = [name for key, (name, since) in listed.items()
                    if since is not None and since <= now - grace and key in earlier
                    or derived_records.check(lake, target.parent / f"{name}.parquet", found).damaged]
            derived_records.drop_versions(lake.root, target.parent, gone)
            removed += len(gone)
    finally:
        con.close()
    lake.write_state(SUPERSEDED_STATE, {"since": {key: iso_utc(at) for key, at in sorted(seen.items())
                                                  if (lake.root / f"{key}.parquet").exists()}})
    log.info("rollups for config %s: %d built, %d already stored, %d superseded removed",
             config.fingerprint(), built, stored, removed)
    return RollupBuild(built, stored, removed)


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


def superseded(current: Path, version: Version, entry: LedgerEntry, before: str) -> dict[str, datetime | None]:
    """Versions beside `current` → since when they are superseded: of an older delivery (since
    `entry` was committed), or of this owner with older inventory tags or an older name, or
    of this config before the lake had inventory it reads (owner `before`: a first ingest
    comes before the first inventory) (since `current` was stored); None for the current data
    as another config reads it (not superseded). One listing of the folder."""
    committed = datetime.fromisoformat(entry.ingested_at.replace("Z", "+00:00"))
    stored = datetime.fromtimestamp(current.stat().st_mtime, timezone.utc)
    gone = {}
    for file in sorted(current.parent.glob("*.parquet")):
        other = Version.parse(file.stem)
        if file == current:
            continue
        if other is not None and other.data != version.data:
            since = committed
        elif other is None or (other.owner in (version.owner, before) and other.inventory != version.inventory):
            since = stored
        else:
            since = None  # the current data as another config reads it
        gone[file.stem] = since
    return gone
