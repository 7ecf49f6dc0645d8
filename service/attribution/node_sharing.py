"""Node names that the job records of two sources both use over the same hours: a job reaches
every instance whose `node_tag` names its node (service/attribution/allocation.py), so two
clusters' sources with a node of the same name put each other's jobs on their instances and
over-book them. The over-booked warnings name them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from service.attribution.jobs import JOBS_TABLE
from service.core.lake import Lake
from service.core.timewindow import Window

SHOWN = 5  # node names a warning lists before "+N more"

# per source and node (lowercase, as the allocation matches it), the span of its node-placed
# jobs in the window; two sources meet on a node where their spans overlap (one source read
# after another, e.g. files then slurmrestd, does not)
_MEETINGS = (
    "WITH n AS (SELECT source, lower(unnest(nodes)) AS node, start_time AS lo, coalesce(end_time, $until) AS hi "
    "FROM jobs WHERE coalesce(len(instance_ids), 0) = 0 AND coalesce(len(nodes), 0) > 0 "
    "AND start_time < $until AND coalesce(end_time, $until) > $since), "
    "s AS (SELECT source, node, min(lo) AS lo, max(hi) AS hi FROM n GROUP BY source, node) "
    "SELECT a.source, b.source, list(a.node ORDER BY a.node) FROM s AS a JOIN s AS b "
    "ON a.node = b.node AND a.source < b.source AND a.lo < b.hi AND b.lo < a.hi "
    "GROUP BY a.source, b.source ORDER BY a.source, b.source"
)


@dataclass(frozen=True)
class SharedNodes:
    sources: tuple[str, str]
    nodes: tuple[str, ...]

    def text(self) -> str:
        more = len(self.nodes) - SHOWN
        names = ", ".join(self.nodes[:SHOWN]) + (f" (+{more} more)" if more > 0 else "")
        return (f"the job sources {self.sources[0]} and {self.sources[1]} both name node(s) {names} over the same "
                "hours: their jobs are placed on every instance tagged with that node, so each source's jobs "
                "over-book the other's instances; give the clusters' nodes distinct names (or the jobs their "
                "instance ids), or drop a source that repeats another's jobs")


def shared_nodes(lake: Lake, window: Window) -> list[SharedNodes]:
    """Each pair of job sources whose node-placed jobs name a node alike in overlapping hours of `window`."""
    if not lake.has_table(JOBS_TABLE):
        return []
    with lake.query() as con:
        return shared_nodes_on(con, window.since.replace(tzinfo=None), window.until.replace(tzinfo=None))


def shared_nodes_on(con: duckdb.DuckDBPyConnection, since: datetime, until: datetime) -> list[SharedNodes]:
    """As `shared_nodes`, on a query connection (none without a `jobs` view), from `since` to `until` (UTC)."""
    if not con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = ?", [JOBS_TABLE]).fetchall()[0][0]:
        return []
    return [SharedNodes((a, b), tuple(nodes))
            for a, b, nodes in con.execute(_MEETINGS, {"since": since, "until": until}).fetchall()]
