"""SQL over the attribution rollups (service/attribution/sql.py writes them):

- `window_sql`: rollups → sums for a window, inside rows by output period, rows whose
  charge period sticks out of the window kept apart so they can be prorated exactly;
- `spellings_sql`: how often each original spelling of each dimension value occurs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from service.attribution.sql import MEASURES, dim_col, how_col
from service.attribution.statement import Sql

# A row of the window ($since, $until) and one lying inside it (not prorated); a zero-length
# charge period is an instant: inside when since <= start < until. run_sums reads the same rules.
OVERLAPS = "cp_start < $until AND (cp_end > $since OR (cp_end = cp_start AND cp_start >= $since))"
INSIDE = "(cp_start >= $since AND cp_end <= $until AND (cp_end > cp_start OR cp_start < $until))"

GRANULARITIES = ("total", "day", "week", "month")


def window_sql(rollup: str, dims: Sequence[str], measure: str, granularity: str,
               since: datetime | None, until: datetime | None, *, explain: bool, per_partition: bool,
               placement: bool = False, whole_runs: Sequence[str] = ()) -> Sql:
    """Sums from the rollup relation `rollup` for [since, until). Rows whose charge period
    lies inside the window (and, per period, inside one day/week/month) are grouped by output
    period; the others (edge_start/edge_end set) keep their charge period so the caller can
    prorate them and spread them over the periods they span. No window: everything.
    `placement` (with `explain`): each how only as its kind (`job`, `idle`, `tag`, ...: what
    precedes the colon), so the parts of 200k jobs are not 200k rows; but the rows whose run
    (`dims` holds it) lowers to one of `whole_runs`, or is not ASCII (`folded` may fold it to
    one: the caller tells), keep their whole hows, so one run's jobs are rows of their own."""
    if granularity not in GRANULARITIES or measure not in MEASURES:
        raise ValueError(f"granularity {granularity!r} or measure {measure!r}")
    params: dict[str, Any] = {}
    if since is None or until is None:
        inside = "TRUE"
        where = "TRUE"
    else:
        inside, where = INSIDE, OVERLAPS
        params = {"since": since, "until": until}
    if granularity != "total":  # a charge period that spans several periods is spread over them
        inside = (f"({inside} AND (cp_end <= cp_start OR "
                  f"date_trunc('{granularity}', cp_start) = date_trunc('{granularity}', cp_end - INTERVAL 1 MICROSECOND)))")
    period = "CAST(NULL AS TIMESTAMP)" if granularity == "total" else f"date_trunc('{granularity}', cp_start)"
    cols = ["currency", "shared"] + [f"lower({dim_col(d)})" for d in dims]
    if explain:
        cols += [_kind(how_col(d), whole_runs, params) if placement else how_col(d) for d in dims]
    if per_partition:
        cols += ["source", "billing_period"]
    keys = [
        f"CASE WHEN inside THEN {period} END",
        "CASE WHEN inside THEN NULL ELSE cp_start END",
        "CASE WHEN inside THEN NULL ELSE cp_end END",
        *cols,
    ]
    text = (
        "SELECT " + ", ".join(keys) + f", sum({measure}) "
        f"FROM (SELECT *, {inside} AS inside FROM {rollup} WHERE {where}) AS w "
        "GROUP BY " + ", ".join(keys)
    )
    return Sql(text, params)


def _kind(how: str, whole_runs: Sequence[str], params: dict[str, Any]) -> str:
    """`how` as its kind, or whole on the rows of `whole_runs` (`window_sql`)."""
    kind = f"split_part({how}, ':', 1)"
    if not whole_runs:
        return kind
    params["whole_runs"] = list(whole_runs)
    run = dim_col("run")
    return (f"CASE WHEN list_contains($whole_runs, lower({run})) OR strlen({run}) <> length({run}) "
            f"THEN {how} ELSE {kind} END")


def spellings_sql(rollup: str, dims: Sequence[str]) -> Sql:
    """How often each original spelling of each dimension value occurs."""
    parts = [f"SELECT '{d}' AS dim, lower({dim_col(d)}), {dim_col(d)}, sum(lines) FROM {rollup} "
             f"GROUP BY lower({dim_col(d)}), {dim_col(d)}" for d in dims]
    return Sql(" UNION ALL ".join(parts), {})
