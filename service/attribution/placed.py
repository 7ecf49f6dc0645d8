"""The parts allocation placed on the shared GPU clusters' instances, per instance-hour: what a
run's idle share, its story's instances (`spendlake runs`, `runs --run X`) and the idle-gpu
rule's held hours read (service/attribution/run_inputs.py `placed_parts`).

    parts_sql(lake, con, config, where, params, tag_keys, measures) -> Sql ending in `placed AS (...)`
    placed_relation(lake, config, con, part) -> (relation of one period's placed rows, its stage)
    stored_placed(lake, config, snapshot, inventory) -> the stored files of every period, or None

Stored per (source, billing period) beside the rollup, with the rollup's version name, at
`<lake>/attribution_placed/source=<s>/billing_period=<p>/<owner>-<data>-<inventory>.parquet`:
per (run, instance, hour, currency, charge category, kind: `job` or `idle`) the three cost
measures summed (a month of 250 GPU nodes and 200k jobs, 10M lines: ~220k rows). Built with the
rollup, versioned, recorded, verified and removed as it is (service/attribution/rollup_build.py,
service/core/derived_records.py), only with `attribution.clusters`. A reader uses them only when
every period of its snapshot has its file whole for the config; else it allocates the window's
raw lines as before (a query never writes), so a config, delivery, inventory or job change
never reads a stale one.
"""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb

from service.attribution.allocation import Stage
from service.attribution.jobs import allocation_inputs
from service.attribution.needs import Needs
from service.attribution.rollup_versions import (Partition, cost_partitions, inventory_keys, inventory_latest,
                                                 recorded_tag_keys, version_of)
from service.attribution.sql import MEASURES, attributed_sql, dim_col, how_col
from service.attribution.statement import Params, Sql, run_setup
from service.attribution.tag_keys import tag_keys_sql
from service.core import derived_records
from service.core.config_attribution import AttributionConfig
from service.core.lake import Lake
from service.core.snapshot import Snapshot

log = logging.getLogger(__name__)

PLACED_TABLE = "attribution_placed"
KEYS = ("run", "resource", "hour", "currency", "category", "kind")


def parts_sql(lake: Lake, con: duckdb.DuckDBPyConnection, config: AttributionConfig, where: str, params: Params,
              tag_keys: list[str], measures: tuple[str, ...]) -> Sql:
    """`WITH ..., placed AS (...)`: allocation's job and idle parts of the cluster lines matching
    `where` (bound in `params`), with columns `run` (lower case), `resource`, `hour` (the part's
    charge period start), `currency`, `category` (the line's ChargeCategory), `kind` (`job` or
    `idle`) and each of `measures` under its name (`billed`, `effective`, `list`). Its stage
    (`Sql.stage`) is filled by `run_setup` and dropped by the caller."""
    allocation = allocation_inputs(lake, config, con, where, dict(params.values))
    lines = attributed_sql(config, tag_keys, where, params, inventory_keys(lake, con), allocation=allocation,
                           needs=Needs(("run",), measures), parts_only=True)
    text = lines.text + f", placed AS ({_placed_rows('attributed', 'ResourceId', 'ChargeCategory', measures)}) "
    return Sql(text, lines.params, lines.setup, lines.stage)


def _placed_rows(rows: str, resource: str, category: str, measures: tuple[str, ...]) -> str:
    """The job and idle parts of the attributed rows `rows` as `placed` holds them (`parts_sql`)."""
    run, kind = dim_col("run"), f"split_part({how_col('run')}, ':', 1)"
    amounts = "".join(f", {MEASURES[measure]} AS {measure}" for measure in measures)
    return (f"SELECT lower({run}) AS run, {resource} AS resource, cp_start AS hour, currency, {category} AS category, "
            f"{kind} AS kind{amounts} FROM {rows} WHERE {kind} IN ('job', 'idle')")


def _stored_rows(placed: str) -> str:
    """The rows a placed file stores, of the CTE `placed` (`parts_sql`)."""
    keys = ", ".join(KEYS)
    sums = ", ".join(f"sum({measure}) AS {measure}" for measure in MEASURES)
    return f"SELECT {keys}, {sums} FROM {placed} GROUP BY {keys} ORDER BY hour, resource"


def placed_of_staged(con: duckdb.DuckDBPyConnection, staged: str) -> duckdb.DuckDBPyRelation:
    """One period's placed rows from the table `staged` its rollup build staged the attributed
    rows in (sql.rollup_sql `placed`: the parts with `a_resource`, `a_category`): the period's
    lines allocated once for both."""
    return con.sql(f"WITH placed AS ({_placed_rows(staged, 'a_resource', 'a_category', tuple(MEASURES))}) "
                   + _stored_rows("placed"))


def placed_relation(lake: Lake, config: AttributionConfig, con: duckdb.DuckDBPyConnection,
                    part: Partition) -> tuple[duckdb.DuckDBPyRelation, Stage | None]:
    """One period's placed rows (the module's), from its raw lines (`con` has the `costs` view),
    and the stage to drop once they are written."""
    params = Params()
    where = f"source = {params.bind(part.source, 'source')} AND billing_period = {params.bind(part.period, 'period')}"
    tag_keys = recorded_tag_keys([part])
    if tag_keys is None:
        keys_sql = tag_keys_sql(part.source, part.period)
        tag_keys = [row[0] for row in con.execute(keys_sql.text, keys_sql.params).fetchall()]
    sql = parts_sql(lake, con, config, where, params, tag_keys, tuple(MEASURES))
    run_setup(con, sql)
    return con.sql(sql.text + _stored_rows("placed"), params=sql.params), sql.stage


def placed_file(lake: Lake, part: Partition, name: str) -> Path:
    """Where the placed rows of `part` at version `name` (the rollup's) live."""
    folder = lake.partition_file(PLACED_TABLE, [("source", part.source), ("billing_period", part.period)]).parent
    return folder / f"{name}.parquet"


def stored_placed(lake: Lake, config: AttributionConfig, snapshot: Snapshot,
                  inventory: dict[str, str] | None = None) -> list[Path] | None:
    """The stored placed files of every period of `snapshot` for `config`, each whole (its
    record, derived_records); None when one is missing (not yet built: said by nothing, as a
    missing rollup), stale or damaged (said with -v), or the config has no `clusters:`: the reader
    allocates the raw lines. `inventory`: the inventory and job snapshots they are of, those of
    the reader's rollups (RollupSession.inventory: a jobs ingest and its build between the two
    reads would give it parts of other jobs than its costs); None: the lake's latest."""
    if config.clusters is None:
        return None
    inventory = inventory_latest(lake, config, snapshot.tables) if inventory is None else inventory
    found = derived_records.problems(lake)
    files = [placed_file(lake, part, version_of(config, part.entry, inventory).name)
             for part in cost_partitions(lake, snapshot)]
    for file in files:
        check = derived_records.check(lake, file, found)
        if not check.ok:
            if check.state == "missing":
                return None
            log.info("attribution: the placed parts %s are %s (%s): the window's cluster lines are allocated from the "
                     "raw lines; %s", file, "damaged" if check.damaged else check.state, check.reason,
                     derived_records.REPAIR)
            return None
    return files or None
