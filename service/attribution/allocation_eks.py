"""EKS split cost allocation data in the allocation (service/attribution/allocation.py): the
pod rows of CUR's `split_line_item_*` columns, one row per pod, and each pod's weight in an
hour of its parent instance (its split cost; the pods' unused cost is the idle of their cluster).
An ECS task on EC2 has split rows too; it is a pod without a namespace, named by its task id.
"""

from __future__ import annotations

from collections.abc import Sequence

NANO = 1_000_000_000  # EKS pods weigh their split cost in nano-units
# The parent instance's id, as allocation names instances (an ARN's last part).
PARENT_ID = ("CASE WHEN x_split_parent_resource_id LIKE 'arn:%' "
             "THEN regexp_replace(x_split_parent_resource_id, '^arn:.*/', '') ELSE x_split_parent_resource_id END")

# A pod's ARN is `arn:aws:eks:...:pod/<cluster>/<namespace>/<pod>/<uid>`; an ECS task's
# `arn:aws:ecs:...:task/<cluster>/<task id>` (`task/<task id>` in the old format, without cluster).
ECS_TASK = "ResourceId LIKE 'arn:%:ecs:%:task/%'"
POD_PARTS = (
    f"CASE WHEN {ECS_TASK} THEN nullif(regexp_extract(ResourceId, ':task/([^/]+)/', 1), '') "
    "ELSE split_part(ResourceId, '/', 2) END AS a_pod_cluster, "
    f"CASE WHEN {ECS_TASK} THEN NULL ELSE split_part(ResourceId, '/', 3) END AS a_pod_namespace, "
    f"CASE WHEN {ECS_TASK} THEN regexp_extract(ResourceId, '([^/]+)$', 1) ELSE split_part(ResourceId, '/', 4) END "
    "AS a_pod_name"
)


def pod_ctes(split: bool, tag_cols: Sequence[str], run_cols: Sequence[str], workload: str | None, held: str) -> str:
    """`a_pod_rows` (EKS split rows of pods, each with its parent instance), `a_pods` (one
    row per pod: its dimensions' tag columns, cluster, namespace, name, run) and `a_parents`."""
    if not split:
        return ("a_pod_rows AS (SELECT CAST(NULL AS VARCHAR) AS a_instance, CAST(NULL AS TIMESTAMP) AS cp_start, "
                "CAST(NULL AS TIMESTAMP) AS cp_end, CAST(NULL AS VARCHAR) AS ResourceId, "
                "CAST(NULL AS DECIMAL(38,12)) AS x_split_cost, CAST(NULL AS DECIMAL(38,12)) AS x_split_unused_cost, "
                "CAST(NULL AS VARCHAR) AS a_pod_cluster "
                "WHERE false), a_pods AS (SELECT CAST(NULL AS VARCHAR) AS pod, CAST(NULL AS VARCHAR) AS pod_cluster, "
                "CAST(NULL AS VARCHAR) AS pod_namespace, CAST(NULL AS VARCHAR) AS pod_name, "
                "CAST(NULL AS VARCHAR) AS pod_run" + "".join(f", CAST(NULL AS VARCHAR) AS {c}" for c in tag_cols)
                + " WHERE false), a_parents AS (SELECT a_instance FROM a_pod_rows), ")
    # A pod's run: the first run tag any of its rows carry, else its workload, else <namespace>/<pod>
    # (a task: its id).
    # Per column over the pod's rows, not per row: AWS writes a pod label on the rows after its tag's
    # activation only (a label added or activated mid-month), and the label names the pod's run.
    run = ", ".join([*(f"max({c})" for c in [*run_cols, *([workload] if workload else [])]),
                     "any_value(concat_ws('/', a_pod_namespace, a_pod_name))"])
    picks = "".join(f", max({c}) AS {c}" for c in tag_cols)
    return (
        f"a_pod_rows AS MATERIALIZED (SELECT *, {PARENT_ID} AS a_instance, {POD_PARTS} "
        f"FROM {held} WHERE x_split_parent_resource_id IS NOT NULL AND cp_end > cp_start), "
        "a_pods AS (SELECT ResourceId AS pod, any_value(a_pod_cluster) AS pod_cluster, "
        "any_value(a_pod_namespace) AS pod_namespace, any_value(a_pod_name) AS pod_name, "
        f"coalesce({run}) AS pod_run{picks} FROM a_pod_rows GROUP BY ResourceId), "
        "a_parents AS (SELECT DISTINCT a_instance FROM a_pod_rows), "
    )


def pod_weights_cte(split: bool) -> str:
    """`a_pod_w`: per parent slot, each pod's split cost and the pods' unused cost (→ idle of
    the pod's cluster) in that slot, in nano-units. Without `split` (no pod rows) none, and the
    slots are not grouped for them (DuckDB groups them before it learns the pods are none)."""
    if not split:
        return ("a_pod_w AS (SELECT CAST(NULL AS HUGEINT) AS a_slot, CAST(NULL AS VARCHAR) AS kind, "
                "CAST(NULL AS VARCHAR) AS ref, CAST(NULL AS HUGEINT) AS w WHERE false), ")
    overlap = "(epoch_us(least(s_end, r_end)) - epoch_us(greatest(s_start, r_start)))"
    share = f"CAST(round(CAST(cost AS DOUBLE) * {NANO} * {overlap} / (epoch_us(r_end) - epoch_us(r_start))) AS HUGEINT)"
    return (
        "a_pod_w AS (SELECT a_slot, kind, ref, sum(w) AS w FROM ("
        f"SELECT s.a_slot, r.kind, r.ref, {share} AS w FROM "
        "(SELECT a_slot, any_value(a_instance) AS a_instance, any_value(s_start) AS s_start, any_value(s_end) AS s_end "
        "FROM a_slots GROUP BY a_slot) AS s JOIN ("
        "SELECT a_instance, cp_start AS r_start, cp_end AS r_end, 'pod' AS kind, ResourceId AS ref, "
        "x_split_cost AS cost FROM a_pod_rows UNION ALL SELECT a_instance, cp_start, cp_end, 'idle', "
        "a_pod_cluster, x_split_unused_cost FROM a_pod_rows) AS r "
        "ON r.a_instance = s.a_instance AND r.r_start < s.s_end AND r.r_end > s.s_start) AS pw "
        "WHERE w > 0 GROUP BY ALL), "
    )
