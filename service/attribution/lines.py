"""What the service hands rules beyond SQL over the lake (rules import only service.core):
attributed daily spend per dimension.

`attributed_daily_lookup(lake, config)` → `attributed_daily(dimension, since, until)`: cost
lines whose charge period starts in [since, until) and lasts at most a day, attributed line
by line with the attribution SQL (service/attribution/sql.py; tags, inventory tags, virtual
tags, default), summed by day and by the fields the anomaly and unallocated rules read (dimension values
lower-cased: attribution compares them case-insensitively).
Shared-cost rules are not applied here: a shared line keeps its own values, so a series
shows the spend its lines really carry. Results are cached per call arguments for the run.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal

from rules.base import DailySpend
from service.attribution.rollup import cost_partitions, inventory_keys
from service.attribution.sql import all_tag_keys_sql, attributed_sql, dim_col, tag_candidates
from service.core.config import Config
from service.core.errors import ConfigError
from service.core.lake import Lake

GROUP = ["ServiceName", "SubAccountId", "RegionId", "x_usage_type", "ResourceId", "ChargeCategory", "x_line_item_type"]


def attributed_daily_lookup(lake: Lake, config: Config) -> Callable[[str, datetime, datetime], list[DailySpend]]:
    attribution = config.attribution
    cache: dict[tuple[str, datetime, datetime], list[DailySpend]] = {}

    def attributed_daily(dimension: str, since: datetime, until: datetime) -> list[DailySpend]:
        if dimension not in attribution.dimensions:
            raise ConfigError(f"unknown dimension {dimension!r}", where="rules.*.dimension",
                              hint=f"use one of the attribution dimensions: {', '.join(attribution.dimensions)}")
        key = (dimension, since, until)
        if key not in cache:
            cache[key] = _query(lake, config, dimension, since, until) if cost_partitions(lake) else []
        return cache[key]

    return attributed_daily


def _query(lake: Lake, config: Config, dimension: str, since: datetime, until: datetime) -> list[DailySpend]:
    attribution = config.attribution
    con = lake.query()
    try:
        keys_sql = all_tag_keys_sql()
        tag_keys = [row[0] for row in con.execute(keys_sql.text, keys_sql.params).fetchall()]
        covered = sorted({k for name, dim in attribution.dimensions.items()
                          for k in tag_candidates(dim.tags or (name,), tag_keys)})
        start = "coalesce(ChargePeriodStart, BillingPeriodStart)"
        lines = attributed_sql(attribution, tag_keys, f"{start} >= ? AND {start} < ?", [since, until],
                               inventory_keys(lake, con), extra_columns=("x_line_item_type", "Tags"))
        # values compare case-insensitively in attribution: one series per value, lower-cased
        values = [f"lower({dim_col(d)})" for d in (dimension, "project", "experiment")]
        uncovered = ("list_sort(list_filter(coalesce(map_keys(Tags), []), "
                     "lambda k: NOT list_contains(CAST(? AS VARCHAR[]), k)))")
        keys = [*values, *GROUP, "uncovered_keys", "day", "currency"]
        sql = (lines.text + "SELECT " + ", ".join(keys) + ", sum(BilledCost) FROM (SELECT *, "
               f"{uncovered} AS uncovered_keys, CAST(cp_start AS DATE) AS day FROM attributed "
               "WHERE cp_end <= cp_start + INTERVAL 1 DAY) AS lines GROUP BY " + ", ".join(keys))
        rows = con.execute(sql, [*lines.params, covered]).fetchall()
    finally:
        con.close()
    return [DailySpend(value, project, experiment, service, account, region, usage_type, resource, category,
                       line_type, tuple(tag_keys_left or ()), day, currency, Decimal(cost or 0))
            for (value, project, experiment, service, account, region, usage_type, resource, category, line_type,
                 tag_keys_left, day, currency, cost) in rows]
