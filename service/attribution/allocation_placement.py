"""Where jobs meet instances in the allocation (service/attribution/allocation.py): the
instances of the held lines (`a_inst`, `a_span`), the jobs overlapping them (`a_jobs`), each
job on the instances it names (`a_place`) and the jobs spread over the clock hours (`a_place_h`,
and the pool jobs' `a_pool_h`)."""

from __future__ import annotations

from service.attribution.allocation_weights import GPU_SHARES
from service.core.config_clusters import ClustersConfig


def instance_key(column: str) -> str:
    """SQL (DuckDB and Spark alike): the instance an id names, in one spelling for its forms:
    an EC2 id from its ARN or a Kubernetes node's providerID (`aws:///us-east-1a/i-0c`), an
    Azure resource id in lower case (Azure ids ignore case; the cost exports lowercase them,
    ARM and schedulers do not)."""
    return (f"CASE WHEN {column} LIKE '/subscriptions/%' THEN lower({column}) "
            f"WHEN {column} LIKE 'arn:%' OR {column} LIKE 'aws:///%' THEN regexp_replace({column}, '^.*/', '') "
            f"ELSE {column} END")


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
    """`a_place` (job × instance it names by id, or by node within its cluster, and the job's
    time on it (`t_start`, `t_end`; none for a node's instance billed at other times): its GPUs
    there, and in weights of 1/GPU_SHARES GPU (`gw`), summed where the job names the instance
    more than once: one row per job, instance and time). `jobs`: every job record (`Stage.jobs`),
    whose clusters are known ones."""
    named = ("SELECT record_id, i.a_instance, g, j_start AS t_start, j_end AS t_end, 1 AS times FROM ("
             "SELECT record_id, gpus / len(instance_ids) AS g, unnest(instance_ids) AS iid, j_start, j_end "
             "FROM a_jobs WHERE coalesce(len(instance_ids), 0) > 0) AS ids "
             f"JOIN a_inst i ON {instance_key('i.a_instance')} = {instance_key('ids.iid')}")
    return (
        (_node_ctes(jobs) if clusters.node_tag else "")
        + f"a_place AS (SELECT record_id, a_instance, t_start, t_end, max(g) AS g, "
        f"sum(CAST(round(g * {GPU_SHARES}) AS HUGEINT) * times) AS gw FROM ({named}"
        + (" UNION ALL SELECT record_id, a_instance, g, t_start, t_end, times FROM a_node_place"
           if clusters.node_tag else "")
        + ") AS named GROUP BY record_id, a_instance, t_start, t_end), "
    )


def _node_ctes(jobs: str) -> str:
    """`a_node_place`: the instances a job reaches by its nodes, and its time on each."""
    # a node name reaches the instances of that node in the job's cluster (two clusters may both
    # have a gpu-001), else those in no cluster, else those whose tag names no job's cluster (spelled
    # otherwise): never another known cluster's, even where the job's own is not billed (on premises,
    # a bill not in yet). Ranked at each moment of the job among those billed then (`s` to `e`), so
    # while a node's instance was replaced the job is on each for its own hours; those billed at
    # other times (no hour of the job on them) ranked among all, as the cluster's members.
    rank = ("CASE WHEN lower(trim(i.a_cluster)) = n.cl THEN 0 WHEN i.a_cluster IS NULL THEN 1 WHEN n.cl IS NOT NULL "
            f"AND lower(trim(i.a_cluster)) IN (SELECT lower(trim(cluster)) FROM {jobs} WHERE cluster IS NOT NULL) "
            "THEN NULL ELSE 2 END")
    # Only a node name of more than one instance (`shared`) has candidates to rank: the window is
    # partitioned by job and node for those alone, all others share one partition and keep their
    # own rank (hashing and sorting every (job, node) pair cost as much as the split's window: the
    # bench's 1M-line month -315M instructions, bench/README.md perf16 of session 44).
    return (
        "a_node_cand AS (SELECT *, CASE WHEN shared THEN min(rank) OVER w ELSE rank END AS best, "
        "CASE WHEN shared THEN min(CASE WHEN s < e THEN rank END) OVER w WHEN s < e THEN rank END AS best_ov, "
        "CASE WHEN shared THEN max(CASE WHEN s < e THEN rank END) OVER w WHEN s < e THEN rank END AS worst_ov "
        "FROM (SELECT n.record_id, n.node, n.g, i.a_instance, i.shared, "
        f"greatest(i.lo, n.j_start) AS s, least(i.hi, n.j_end) AS e, {rank} AS rank FROM (SELECT record_id, "
        "gpus / len(nodes) AS g, lower(unnest(nodes)) AS node, lower(trim(cluster)) AS cl, j_start, j_end FROM a_jobs "
        "WHERE coalesce(len(instance_ids), 0) = 0 AND coalesce(len(nodes), 0) > 0) AS n JOIN (SELECT *, "
        "count(*) OVER (PARTITION BY lower(a_node)) > 1 AS shared FROM a_inst) AS i ON lower(i.a_node) = n.node) AS c "
        "WHERE rank IS NOT NULL WINDOW w AS (PARTITION BY CASE WHEN shared THEN record_id END, "
        "CASE WHEN shared THEN node END)), "
        # a (job, node) whose instances billed over it rank alike is on each for its time there
        # (most are: one instance); where they do not, its time is cut where one of them starts
        # or ends being billed, each cut on the best ranked billed over all of it, and an
        # instance's consecutive cuts joined into one time
        "a_node_mixed AS (SELECT record_id, node, a_instance, g, s, e, rank, count(*) AS times FROM a_node_cand "
        "WHERE s < e AND best_ov < worst_ov GROUP BY ALL), "
        "a_node_cuts AS (SELECT record_id, node, b AS s, lead(b) OVER (PARTITION BY record_id, node ORDER BY b) AS e "
        "FROM (SELECT DISTINCT record_id, node, unnest([s, e]) AS b FROM a_node_mixed) AS b), "
        "a_node_won AS (SELECT *, sum(CASE WHEN s = prev THEN 0 ELSE 1 END) OVER (PARTITION BY record_id, node, "
        "a_instance ORDER BY s) AS run FROM (SELECT *, lag(e) OVER (PARTITION BY record_id, node, a_instance "
        "ORDER BY s) AS prev FROM (SELECT c.record_id, c.node, c.a_instance, c.g, c.times, k.s, k.e, c.rank, "
        "min(c.rank) OVER (PARTITION BY k.record_id, k.node, k.s) AS best FROM a_node_cuts k JOIN a_node_mixed c "
        "ON c.record_id = k.record_id AND c.node = k.node AND c.s <= k.s AND c.e >= k.e) AS w "
        "WHERE rank = best) AS r), "
        "a_node_place AS (SELECT record_id, a_instance, g, CASE WHEN s < e THEN s END AS t_start, "
        "CASE WHEN s < e THEN e END AS t_end, 1 AS times FROM a_node_cand WHERE CASE WHEN s < e THEN rank = best_ov "
        "AND best_ov = worst_ov ELSE rank = best END UNION ALL SELECT record_id, a_instance, g, min(s), max(e), times "
        "FROM a_node_won GROUP BY record_id, node, a_instance, g, times, run), "
    )


def pool_job(clusters: ClustersConfig) -> str:
    """SQL over a job of `a_jobs`: a pool job (no instance ids, and no nodes or no `node_tag`)."""
    pool_needs = "coalesce(len(nodes), 0) = 0" if clusters.node_tag else "TRUE"
    return f"coalesce(len(instance_ids), 0) = 0 AND {pool_needs} AND cluster IS NOT NULL"


def hour_ctes(clusters: ClustersConfig) -> str:
    """The jobs exploded over the clock hours they overlap: placed (`a_place_h`) and pool jobs
    (`a_pool_h`: no instance ids, and no nodes or no `node_tag`)."""
    return (
        f"a_pool_jobs AS (SELECT * FROM a_jobs WHERE {pool_job(clusters)}), "
        "a_place_h AS (SELECT p.a_instance, p.record_id, p.gw, p.t_start AS j_start, p.t_end AS j_end, "
        "unnest(generate_series(date_trunc('hour', greatest(p.t_start, s.lo)), least(p.t_end, s.hi) - "
        "INTERVAL 1 MICROSECOND, INTERVAL 1 HOUR)) AS h FROM a_place p, a_span s "
        "WHERE p.t_start < s.hi AND p.t_end > s.lo AND p.t_start < p.t_end), "
        "a_pool_h AS (SELECT j.record_id, lower(trim(j.cluster)) AS pool, j.gpus AS g, j.j_start, j.j_end, "
        "unnest(generate_series(date_trunc('hour', greatest(j.j_start, s.lo)), "
        "least(j.j_end, s.hi) - INTERVAL 1 MICROSECOND, INTERVAL 1 HOUR)) AS h FROM a_pool_jobs j, a_span s "
        "WHERE j.j_start < s.hi AND j.j_end > s.lo), "
    )
