"""Where jobs meet instances in the allocation (service/attribution/allocation.py): the
instances of the held lines (`a_inst`, `a_span`), the jobs overlapping them (`a_jobs`), each
job on the instances it names (`a_place`) and the jobs spread over the clock hours (`a_place_h`,
and the pool jobs' `a_pool_h`)."""

from __future__ import annotations

from service.attribution.allocation_weights import GPU_SHARES
from service.core.config_clusters import ClustersConfig

def jobs_cte(jobs: str) -> str:
    """`a_jobs`: the staged job records (`jobs`: `Stage.jobs`) that overlap the lines' span (`a_span`)."""
    return (f"a_jobs AS (SELECT * FROM {jobs} WHERE j_start < (SELECT hi FROM a_span) "
            "AND j_end > (SELECT lo FROM a_span)), ")


def instance_ctes(lines: str = "a_lines") -> str:
    """`a_inst` (each instance of `a_lines`: its type's GPUs, node, cluster) and `a_span` (the
    lines' first start and last end), both from one pass over `lines` (`a_lines` or its groups)."""
    return (
        "a_inst AS (SELECT a_instance, max(a_type_gpus) AS a_type_gpus, max(a_node) AS a_node, "
        f"max(a_cluster) AS a_cluster, min(cp_start) AS lo, max(cp_end) AS hi FROM {lines} GROUP BY a_instance), "
        "a_span AS (SELECT min(lo) AS lo, max(hi) AS hi FROM a_inst), "
    )


def placement_ctes(clusters: ClustersConfig, jobs: str) -> str:
    """`a_place` (job × instance it names by id, or by node within its cluster: its GPUs there,
    and in weights of 1/GPU_SHARES GPU (`gw`), summed where the job names the instance more than
    once: one row per job and instance). `jobs`: every job record (`Stage.jobs`), whose clusters
    are known ones."""
    # a node name reaches the instances of that node in the job's cluster (two clusters may both
    # have a gpu-001), else those in no cluster, else those whose tag names no job's cluster (spelled
    # otherwise): never another known cluster's, even where the job's own is not billed (on premises,
    # a bill not in yet). Ranked among those billed over the job's time (`ov`), so a node's replaced
    # instance keeps its own hours' jobs; those billed at other times (no hour of the job on them)
    # ranked among all, as the cluster's members.
    by_node = (
        "SELECT record_id, a_instance, g FROM (SELECT *, min(CASE WHEN ov THEN rank END) OVER w AS best_ov, "
        "min(rank) OVER w AS best FROM (SELECT n.record_id, n.node, i.a_instance, n.g, "
        "i.lo < n.j_end AND i.hi > n.j_start AS ov, CASE WHEN lower(trim(i.a_cluster)) = n.cl THEN 0 "
        "WHEN i.a_cluster IS NULL THEN 1 WHEN n.cl IS NOT NULL AND lower(trim(i.a_cluster)) IN "
        f"(SELECT lower(trim(cluster)) FROM {jobs} WHERE cluster IS NOT NULL) THEN NULL ELSE 2 END AS rank "
        "FROM (SELECT record_id, gpus / len(nodes) AS g, lower(unnest(nodes)) AS node, lower(trim(cluster)) AS cl, "
        "j_start, j_end FROM a_jobs WHERE coalesce(len(instance_ids), 0) = 0 AND coalesce(len(nodes), 0) > 0) AS n "
        "JOIN a_inst i ON lower(i.a_node) = n.node) AS m WINDOW w AS (PARTITION BY record_id, node)) AS o "
        "WHERE CASE WHEN ov THEN rank = best_ov ELSE rank = best END "
    ) if clusters.node_tag else ""
    return (
        f"a_place AS (SELECT record_id, a_instance, max(g) AS g, sum(CAST(round(g * {GPU_SHARES}) AS HUGEINT)) AS gw "
        "FROM (SELECT ids.record_id, i.a_instance, ids.g FROM (SELECT record_id, gpus / len(instance_ids) AS g, "
        "unnest(instance_ids) AS iid FROM a_jobs WHERE coalesce(len(instance_ids), 0) > 0) AS ids "
        "JOIN a_inst i ON i.a_instance = ids.iid "
        + (f"UNION ALL {by_node}" if by_node else "") + ") AS named GROUP BY record_id, a_instance), "
    )


def hour_ctes(clusters: ClustersConfig) -> str:
    """The jobs exploded over the clock hours they overlap: placed (`a_place_h`) and pool jobs
    (`a_pool_h`: no instance ids, and no nodes or no `node_tag`)."""
    pool_needs = "coalesce(len(nodes), 0) = 0" if clusters.node_tag else "TRUE"
    return (
        "a_pool_jobs AS (SELECT * FROM a_jobs WHERE coalesce(len(instance_ids), 0) = 0 AND "
        f"{pool_needs} AND cluster IS NOT NULL), "
        "a_place_h AS (SELECT p.a_instance, p.record_id, p.gw, j.j_start, j.j_end, unnest(generate_series("
        "date_trunc('hour', greatest(j.j_start, s.lo)), least(j.j_end, s.hi) - INTERVAL 1 MICROSECOND, "
        "INTERVAL 1 HOUR)) AS h FROM a_place p JOIN a_jobs j USING (record_id), a_span s "
        "WHERE j.j_start < s.hi AND j.j_end > s.lo), "
        "a_pool_h AS (SELECT j.record_id, lower(trim(j.cluster)) AS pool, j.gpus AS g, j.j_start, j.j_end, "
        "unnest(generate_series(date_trunc('hour', greatest(j.j_start, s.lo)), "
        "least(j.j_end, s.hi) - INTERVAL 1 MICROSECOND, INTERVAL 1 HOUR)) AS h FROM a_pool_jobs j, a_span s "
        "WHERE j.j_start < s.hi AND j.j_end > s.lo), "
    )
