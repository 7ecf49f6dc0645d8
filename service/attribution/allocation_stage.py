"""The temporary tables one allocation fills before its statement (service/attribution/allocation.py
`Stage`), each SQL to follow `WITH ..., s0 AS (...)` (the statement's cost lines):

1. `stage.jobs` (`jobs_sql`): the job records;
2. `stage.lines` (`lines_sql`): the only pass that reads the lines' tags for the allocation:
   the instance lines carrying a node or cluster tag, and, when the statement keeps only some
   of the lines it does not split (`keep`), those lines too;
3. `stage.members` (`members_sql`): the instances a cluster holds, from the instance lines'
   plain columns (times, instance, type) and the staged lines' tags;
4. `stage.held` (`held_sql`): the members' instance lines the staged lines lack, read from the
   cost lines only for a member whose lines were not all staged (lines without its tags), and the
   EKS split rows; the statement reads the members' staged lines from `stage.lines` itself.

Tags are decoded once per line where they were decoded up to three times (members, held
lines, `keep`): on the bench's month of 10M lines (bench/runs_bench.py) the members' stage
0.8 -> 0.4 CPU s, the held lines' 0.45 -> 0.15, the statement 2.1-2.4 -> 1.6-2.0, for the
staged lines' 0.8: the whole query -11%.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from service.attribution.allocation import INSTANCE_ID, INSTANCE_LINE, AllocationInputs, Stage, bind_types
from service.attribution.allocation_eks import PARENT_ID
from service.attribution.allocation_placement import instance_ctes, jobs_cte, placement_ctes

MEMBERS_CTE = (
    "a_members AS (SELECT i.a_instance, coalesce(i.a_type_gpus, p.most) AS a_gpus, "
    "coalesce(i.a_cluster, p.job_cluster) AS a_cl FROM a_inst i LEFT JOIN ("
    "SELECT a_place.a_instance, max(a_place.g) AS most, min(a_jobs.cluster) AS job_cluster FROM a_place "
    "JOIN a_jobs USING (record_id) GROUP BY a_place.a_instance) AS p ON p.a_instance = i.a_instance "
    "WHERE (p.a_instance IS NOT NULL OR (i.a_cluster IS NOT NULL AND i.a_type_gpus IS NOT NULL)) "
    "AND coalesce(i.a_type_gpus, p.most) > 0)"
)


STAGED_TAGS = ("node", "cluster")  # the allocation's own tags (allocation.py EXTRA_TAGS) a staged line holds


def drop_stage(con, stage: Stage | None) -> None:
    """Drop the tables `stage` names once its statement has run: the job records and the
    members' instance lines (at 10M lines ~150 MB of DuckDB's memory) would otherwise stay
    until the connection closes, beside the next allocation's own."""
    for table in dataclasses.astuple(stage) if stage else ():
        con.execute(f"DROP TABLE IF EXISTS {table}")


def keyed_lines(keys: Sequence[str] | None) -> str:
    """SQL over the cost view, implied by `staged` when its values come from the Tags of
    `keys` (markers of bound tag keys) alone (None: not only): whether a line's Tags hold one
    of `keys`. A condition on one column, DuckDB pushes it into the Parquet scan, which then
    decodes the other columns of the few lines that hold a key (the bench's `stage.lines`:
    1.17 -> 0.82 CPU s)."""
    if keys is None:
        return "TRUE"
    return " OR ".join(f"map_contains(Tags, {key})" for key in dict.fromkeys(keys)) or "FALSE"


def staged(extra_cols: Mapping[str, str], keep: str) -> str:
    """Which lines of `s0` `stage.lines` holds (SQL): instance lines with a node or cluster
    tag (every line a member's node or cluster can come from), and those where `keep` holds
    unless it is TRUE (every line: then the statement reads `s0` itself)."""
    node, cluster = extra_cols.get("node", "NULL"), extra_cols.get("cluster", "NULL")
    tagged = f"({INSTANCE_LINE} AND ({node} IS NOT NULL OR {cluster} IS NOT NULL))"
    return tagged if keep == "TRUE" else f"(({keep}) OR {tagged})"


def lines_sql(extra_cols: Mapping[str, str], keep: str, keyed: str) -> str:
    """`stage.lines`: every column of `s0` for the lines `staged` names (one pass: every
    line's Tags are decoded, once). `keyed`: the column of `s0` holding `keyed_lines`."""
    return f"SELECT * EXCLUDE ({keyed}) FROM s0 WHERE {keyed} AND {staged(extra_cols, keep)}"


def members_sql(inputs: AllocationInputs, stage: Stage, extra_cols: Mapping[str, str], params) -> str:
    """`stage.members`: each instance a cluster holds (its GPUs, cluster) or EKS pods name as
    parent, with the instance types its lines bill (`a_line_types`) and whether some of its
    lines are not in `stage.lines` (`a_rest`, for `held_sql`). Its lines' types, times and
    counts come from the instance lines of `s0` (their plain columns: no Tags read), their
    node and cluster tags from `stage.lines`, which holds every line that carries one."""
    a_types, a_gpus = bind_types(inputs, params)
    node, cluster = extra_cols.get("node", "NULL"), extra_cols.get("cluster", "NULL")
    parents = (f"SELECT DISTINCT {PARENT_ID} FROM s0 WHERE x_split_parent_resource_id IS NOT NULL "
               "AND cp_end > cp_start" if inputs.has_split and inputs.clusters.eks_split else "SELECT NULL WHERE false")
    return (
        f"a_plain AS (SELECT {INSTANCE_ID} AS a_instance, x_instance_type AS a_line_type, "
        f"max({a_gpus}[list_position({a_types}, lower(x_instance_type))]) AS a_type_gpus, min(cp_start) AS cp_start, "
        f"max(cp_end) AS cp_end, count(*) AS a_n FROM s0 WHERE {INSTANCE_LINE} GROUP BY ALL), "
        f"a_tagged AS (SELECT {INSTANCE_ID} AS a_instance, max({node}) AS a_node, max({cluster}) AS a_cluster, "
        f"count(*) AS a_staged FROM {stage.lines} WHERE {INSTANCE_LINE} GROUP BY ALL), "
        "a_inst_types AS (SELECT p.*, t.a_node, t.a_cluster FROM a_plain p LEFT JOIN a_tagged t USING (a_instance)), "
        "a_line_types AS (SELECT a_instance, list(a_line_type) AS a_line_types, "
        "sum(a_n) > coalesce(max(t.a_staged), 0) AS a_rest FROM a_plain LEFT JOIN a_tagged t USING (a_instance) "
        "GROUP BY a_instance), "
        + instance_ctes("a_inst_types") + jobs_cte(stage.jobs) + placement_ctes(inputs.clusters, stage.jobs) + MEMBERS_CTE
        + f", a_parents AS ({parents}) "
        "SELECT m.a_instance, m.a_gpus, m.a_cl, true AS a_member, t.a_line_types, t.a_rest FROM a_members m "
        "LEFT JOIN a_line_types t ON t.a_instance = m.a_instance UNION ALL "
        "SELECT CAST(p.a_instance AS VARCHAR), NULL, NULL, false, t.a_line_types, t.a_rest "
        "FROM a_parents AS p(a_instance) LEFT JOIN a_line_types t ON t.a_instance = CAST(p.a_instance AS VARCHAR) "
        "WHERE p.a_instance IS NOT NULL AND p.a_instance NOT IN (SELECT a_instance FROM a_members)"
    )


def held_sql(stage: Stage, extra_cols: Mapping[str, str], keep: str, keyed: str) -> str:
    """`stage.held`: the members' instance lines `stage.lines` does not hold, and the EKS split
    rows (the statement reads the others from `stage.lines`: not copied). The cost lines are read
    again only for the members with lines it does not hold (`a_rest`), each a filter of plain conditions DuckDB pushes into the Parquet scan
    (the types: on a column of few values it leaves only those types' lines to have their Tags
    decoded), and none at all when there is no such member (an empty join ends the scan)."""
    rest = f"(SELECT a_instance FROM {stage.members} WHERE a_rest)"
    return (f"SELECT * EXCLUDE ({keyed}) FROM s0 WHERE {INSTANCE_LINE} AND x_instance_type "
            f"IN (SELECT unnest(a_line_types) FROM {stage.members} WHERE a_rest) AND {INSTANCE_ID} IN {rest} "
            f"AND NOT coalesce({keyed} AND {staged(extra_cols, keep)}, false) "
            f"UNION ALL SELECT * EXCLUDE ({keyed}) FROM s0 WHERE x_split_parent_resource_id IS NOT NULL")
