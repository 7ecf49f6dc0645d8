"""The inventory's tags as a statement reads them (service/attribution/sql.py): one row per
resource id with a column per wanted tag key."""

from __future__ import annotations

from collections.abc import Sequence

# An ARN's resource part, as billing exports name the resource: `instance/i-0abc` → `i-0abc`,
# `arn:aws:s3:::bucket` → `bucket`. Lines are matched on the ARN itself or on this short id.
ARN_HEAD = "^arn:[^:]*:[^:]*:[^:]*:[^:]*:"
ARN_PATH = "^.*/"


def inventory_tags_cte(inventory_keys: Sequence[str], params) -> tuple[str, dict[str, str]]:
    """`inv` CTE: one row per resource id (ARN and short id) of the latest `resource_tags`
    snapshot of each inventory source, one column per wanted tag key (trimmed, empty = absent)."""
    columns = {key: f"i_{n}" for n, key in enumerate(inventory_keys)}
    picks = []
    for key, col in columns.items():
        picks.append(f"max(CASE WHEN key = {params.bind(key)} THEN nullif(trim(value), '') END) AS {col}")
    text = (
        "inv_latest AS (SELECT r.resource_id, r.key, r.value FROM resource_tags r JOIN "
        "(SELECT source AS s, max(snapshot_date) AS d FROM resource_tags GROUP BY source) l "
        "ON r.source = l.s AND r.snapshot_date = l.d), "
        "inv AS (SELECT rid, " + ", ".join(picks) + " FROM ("
        "SELECT resource_id AS rid, key, value FROM inv_latest UNION ALL "
        f"SELECT regexp_replace(regexp_replace(resource_id, {params.bind(ARN_HEAD)}, ''), {params.bind(ARN_PATH)}, '') "
        "AS rid, key, value "
        "FROM inv_latest WHERE resource_id LIKE 'arn:%') AS ids GROUP BY rid), "
    )
    return text, columns
