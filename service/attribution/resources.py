"""Each dimension's value on a resource's latest cost line (`attribute_resources`: the
owners findings name), spelt as `attribute` shows it."""

from __future__ import annotations

from collections.abc import Sequence

from service.attribution.needs import Needs
from service.attribution.rollup_versions import HELD_TABLES, READ_TABLES, cost_partitions, inventory_keys, recorded_tag_keys
from service.attribution.sessions import answer_on
from service.attribution.sql import resources_sql
from service.attribution.tag_keys import all_tag_keys_sql
from service.core.config import Config, attribution_of
from service.core.config_attribution import AttributionConfig
from service.core.folding import folded
from service.core.lake import READER_MEMORY_LIMIT, Lake
from service.core.snapshot import Snapshot, read_within


def attribute_resources(lake: Lake, config: AttributionConfig | Config,
                        resource_ids: Sequence[str] = (), snapshot: Snapshot | None = None
                        ) -> dict[str, dict[str, str]]:
    """Resource id → {dimension: value} from the resource's latest cost line (all resources
    with a cost line when `resource_ids` is empty). Resources without cost lines are absent.
    `snapshot`: a command's (taken with HELD_TABLES), else one of its own (read_within)."""
    config = attribution_of(config)
    return read_within(lake, snapshot, lambda held: _resources(lake, config, resource_ids, held), HELD_TABLES)


def _resources(lake: Lake, config: AttributionConfig, resource_ids: Sequence[str], snapshot) -> dict:
    if not snapshot.checks:
        return {}
    # the keys ingest recorded: decoding every line's tags for them took most of the commitment tops
    tag_keys = recorded_tag_keys(cost_partitions(lake, snapshot))
    with lake.query(snapshot, memory_limit=READER_MEMORY_LIMIT, tables=READ_TABLES) as con:  # every line's resource
        if tag_keys is None:  # a partition from before the ledger recorded them
            keys_sql = all_tag_keys_sql()
            tag_keys = [row[0] for row in con.execute(keys_sql.text, keys_sql.params).fetchall()]
        sql = resources_sql(config, tag_keys, list(resource_ids), inventory_keys(lake, con))
        rows = con.execute(sql.text, sql.params).fetchall()
    order = config.dimension_order()
    # Shown in each value's most common spelling, as `attribute` shows it (`Eval` → `eval`).
    # the spellings count lines alone: a period rolled up in memory for them sums no measure, keeps no hows
    spell = answer_on(lake, config, snapshot, lambda session: session.spellings(order),
                       Needs(order, (), hows=False)) if rows else {}
    return {row[0]: {d: spell.get((d, folded(v)), v) if v else v for d, v in zip(order, row[1:])}
            for row in rows}
