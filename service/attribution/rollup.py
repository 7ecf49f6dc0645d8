"""Reading the rollups (service/attribution/rollup_versions.py names them): a query reads
each period's stored rollup for its config and delivery, and rolls up from the raw lines, in
memory and for that query only, each period that has none (`rollup_view`; `-v` logs which).
Queries never write (service/attribution/rollup_build.py stores them); so a config change
re-attributes history at once. A rollup holds the attributed sums of its period per exact
charge period (service/attribution/sql.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import duckdb

from service.attribution.allocation import Stage
from service.attribution.allocation_stage import drop_stage
from service.attribution.jobs import allocation_inputs
from service.attribution.grouped_lines import tag_map_groups_sql
from service.attribution.needs import Needs, loosely, needed_dimensions
from service.attribution.rollup_kept import Kept, keeper
from service.attribution.rollup_told import tell_rolled_up
from service.attribution.rollup_versions import (Partition, cost_partitions, inventory_keys, inventory_latest,
                                                 recorded_tag_keys, rollup_file, version_of)
from service.attribution.sql import rollup_select, rollup_sql
from service.attribution.statement import run_setup
from service.attribution.tag_keys import tag_candidates, tag_keys_sql
from service.core import derived_records
from service.core.config_attribution import AttributionConfig
from service.core.folding import folded, folded_forms
from service.core.lake import Lake
from service.core.snapshot import Snapshot

log = logging.getLogger(__name__)

MEMORY_TABLE = "rollups_in_memory"
# The bench's 10M-line month grouped by the values of 4 tag keys costs about what grouping by
# its maps does (1.56 vs 1.68 CPU s), by 5 more (1.71), by 8 a third more (2.23; bench/README.md)
TAG_MAP_KEYS = 5


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


def rollup_relation(lake: Lake, config: AttributionConfig, con: duckdb.DuckDBPyConnection,
                     part: Partition, inventory: list[str] | None,
                     needs: Needs = Needs(), staged: str | None = None
                     ) -> tuple[duckdb.DuckDBPyRelation, bool, Stage | None]:
    """The attributed rollup of one period, from its raw lines (`con` has the `costs` view),
    and whether it holds only the lines `needs.where` can match (`narrowed_to`); `needs`:
    only those dimensions and measures (default all). `staged` (with `clusters:`): the name of a
    temporary table to stage the attributed rows in first, which the placed rows are grouped
    from too (placed.py `placed_of_staged`): the period is allocated once; the caller drops it."""
    keys_sql = tag_keys_sql(part.source, part.period)
    tag_keys = recorded_tag_keys([part])
    if tag_keys is None:
        tag_keys = [row[0] for row in con.execute(keys_sql.text, keys_sql.params).fetchall()]
    allocation = allocation_inputs(lake, config, con, "source = $source AND billing_period = $period",
                                   keys_sql.params)
    narrow = narrowed_to(config, needs, tag_keys, inventory)
    by_map = groups_by_tag_map(con, config, tag_keys, part, needs.dims)
    sql = rollup_sql(config, tag_keys, part.source, part.period, inventory, allocation, needs, narrow=narrow,
                     by_tag_map=by_map, placed=staged is not None)
    run_setup(con, sql)
    if staged is None:
        return con.sql(sql.text, params=sql.params), narrow is not None, sql.stage
    con.execute(f"CREATE OR REPLACE TEMP TABLE {staged} AS {sql.text}", sql.params)
    return con.sql(rollup_select(config, needs, True, staged)), narrow is not None, sql.stage


def groups_by_tag_map(con: duckdb.DuckDBPyConnection, config: AttributionConfig, tag_keys: list[str],
                      part: Partition, dims: tuple[str, ...] | None) -> bool:
    """Whether a rollup groups the period's lines (with allocation: those it does not split) by
    their whole Tags map rather than by the values of the tag keys it reads (sql.py `by_tag_map`):
    no lookup per line and key (the bench's 10M-line month: its build 2.6 -> 2.0 CPU s; with
    `clusters:` `spendlake rollup` 20.5 -> 18.7 CPU s, bench/README.md rollup42), unless the maps vary more
    than those values (a Name tag per resource makes each line its own group: 2.4x the CPU).
    Judged on the period's first lines: by the map when that makes at most twice the groups,
    and TAG_MAP_KEYS keys or more are read (fewer lookups cost less than the map's grouping; the
    node and cluster tags allocation reads are not counted: at 6 lookups the map cost 1.4 CPU s more)."""
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
    inventory: dict[str, str]  # the inventory and job snapshots the versions are of (inventory_latest)


def rollup_split(lake: Lake, config: AttributionConfig, snapshot: Snapshot) -> RollupSplit:
    inventory = inventory_latest(lake, config, snapshot.tables)
    found = derived_records.problems(lake)
    stored, missing = [], []
    for part in cost_partitions(lake, snapshot):
        file = rollup_file(lake, part, version_of(config, part.entry, inventory))
        (stored if stored_whole(lake, file, found) else missing).append((part, file))
    return RollupSplit(stored, missing, inventory)


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
    if missing:
        tell_rolled_up([part for part, _ in missing])
    kept_by, narrowed = keeper(), False
    if kept_by is not None:  # `missing` is every period of the lake this config has no rollup of
        kept_by.only({str(file) for _, file in missing})
    for number, (part, file) in enumerate(missing):
        temp = f"rollup_part_{number}"
        kept = kept_by.get((str(file), needs)) if kept_by is not None else None
        stage = None
        if kept is None:
            relation, narrow, stage = rollup_relation(lake, config, con, part, keys, needs)
            if kept_by is None:
                relation.create_view(temp)
            else:  # rolled up once for the requests to come (rollup_kept.py)
                kept = Kept(relation.to_arrow_table(), tuple(zip(relation.columns, map(str, relation.types))), narrow)
                kept_by.keep((str(file), needs), kept)
        narrowed = narrowed or (kept.narrow if kept is not None else narrow)
        columns = "*"
        if kept is not None:  # Arrow has no HUGEINT: each column back to its DuckDB type
            con.register(temp, kept.table)
            columns = ", ".join(f'CAST("{name}" AS {kind}) AS "{name}"' for name, kind in
                                ((name.replace('"', '""'), kind) for name, kind in kept.types))
        into = f"CREATE TEMP TABLE {MEMORY_TABLE} AS" if number == 0 else f"INSERT INTO {MEMORY_TABLE}"
        con.execute(f"{into} SELECT {columns}, ? AS source, ? AS billing_period FROM {temp}",
                    [part.source, part.period])
        if kept is None:
            con.execute(f"DROP VIEW {temp}")
        else:
            con.unregister(temp)
        drop_stage(con, stage)
    if missing:
        log.info("attribution: %d period(s) from stored rollups, %d rolled up from the raw lines in memory "
                 "(none stored for this config and delivery, or the stored one damaged: %s; `spendlake rollup` "
                 "stores them)",
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
