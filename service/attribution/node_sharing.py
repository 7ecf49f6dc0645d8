"""Node names that the job records of two sources both use over the same hours: a job reaches
the instances whose `node_tag` names its node, in its own cluster where the instances'
`cluster_tag` names it, else those naming no job's cluster (service/attribution/allocation_placement.py),
so two sources of one cluster (or of none), or two clusters whose instances do not carry their
cluster, put each other's jobs on their instances and over-book them. The over-booked warnings
name them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from service.attribution.jobs import JOBS_TABLE
from service.core.lake import READER_MEMORY_LIMIT, Lake
from service.core.snapshot import Snapshot
from service.core.timewindow import Window

SHOWN = 5  # node names a warning lists before "+N more"

# per source, cluster and node (lowercase and trimmed, as the allocation matches them), the span
# of its node-placed jobs in the window; two sources meet on a node where their spans overlap (one
# source read after another, e.g. files then slurmrestd, does not), apart where their clusters differ
_MEETINGS = (
    "WITH n AS (SELECT source, lower(trim(cluster)) AS cl, lower(unnest(nodes)) AS node, start_time AS lo, "
    "coalesce(end_time, $until) AS hi FROM jobs WHERE coalesce(len(instance_ids), 0) = 0 "
    "AND coalesce(len(nodes), 0) > 0 AND start_time < $until AND coalesce(end_time, $until) > $since), "
    "s AS (SELECT source, cl, node, min(lo) AS lo, max(hi) AS hi FROM n GROUP BY ALL), "
    "m AS (SELECT a.source AS a, b.source AS b, a.node, a.cl AS a_cl, b.cl AS b_cl, "
    "coalesce(a.cl <> b.cl, false) AS apart FROM s AS a JOIN s AS b "
    "ON a.node = b.node AND a.source < b.source AND a.lo < b.hi AND b.lo < a.hi) "
    "SELECT a, b, list_sort(list(DISTINCT node)), apart, list_sort(list_distinct(list(a_cl) || list(b_cl))) "
    "FROM m GROUP BY a, b, apart ORDER BY a, b, apart"
)


@dataclass(frozen=True)
class SharedNodes:
    sources: tuple[str, str]
    nodes: tuple[str, ...]
    apart: bool = False  # the two sources' jobs there are of distinct clusters
    clusters: tuple[str, ...] = ()

    def text(self) -> str:
        more = len(self.nodes) - SHOWN
        names = ", ".join(self.nodes[:SHOWN]) + (f" (+{more} more)" if more > 0 else "")
        said = f"the job sources {self.sources[0]} and {self.sources[1]} both name node(s) {names} over the same hours"
        if self.apart:
            return (f"{said}, in clusters {' and '.join(self.clusters)}: a job reaches the instances of its node "
                    "whose cluster tag (attribution.clusters.cluster_tag) names its cluster, else those that name no "
                    "job's cluster; where those instances carry no cluster tag or spell it otherwise, each source's jobs "
                    "over-book the other's instances: tag them with their cluster, or give the nodes distinct names")
        where = f"in the same cluster ({', '.join(self.clusters)})" if self.clusters else "without a cluster"
        return (f"{said} {where}: their jobs are placed on the same instances, so each source's jobs over-book the "
                "other's; drop a source that repeats another's jobs, or, for two clusters, give each its own name "
                "(the source's cluster) and its instances that cluster tag")


def shared_nodes(lake: Lake, window: Window, snapshot: Snapshot | None = None) -> list[SharedNodes]:
    """Each pair of job sources whose node-placed jobs name a node alike in overlapping hours of `window`,
    in the job records `snapshot` holds (an answer's: Snapshot.tables; None: those there now)."""
    if not lake.has_table(JOBS_TABLE):
        return []
    with lake.query(snapshot, memory_limit=READER_MEMORY_LIMIT, tables=(JOBS_TABLE,)) as con:  # the window's jobs, each with each
        return shared_nodes_on(con, window.since.replace(tzinfo=None), window.until.replace(tzinfo=None))


def shared_nodes_on(con: duckdb.DuckDBPyConnection, since: datetime, until: datetime) -> list[SharedNodes]:
    """As `shared_nodes`, on a query connection (none without a `jobs` view), from `since` to `until` (UTC)."""
    if not con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = ?", [JOBS_TABLE]).fetchall()[0][0]:
        return []
    return [SharedNodes((a, b), tuple(nodes), apart, tuple(clusters))
            for a, b, nodes, apart, clusters in con.execute(_MEETINGS, {"since": since, "until": until}).fetchall()]
