"""Shared GPU clusters: each instance-hour's cost on the jobs that held its GPUs, the rest on
the cluster's idle, exactly (SQL generated here, run inside the attribution statement).

Which instances: cost lines of an instance (`ResourceId` an EC2 id or its ARN, `x_instance_type`
set, a charge period of positive length) that jobs reach: by a job's `instance_ids`; else
(no instance ids) by its `nodes` through the instance tag `node_tag`, within the job's cluster
where the instances' `cluster_tag` says it (allocation_placement.py); else (no instance ids,
and no nodes or no `node_tag`) through the pool of instances whose `cluster_tag` names the
job's cluster. An instance of a GPU type (`ClustersConfig.gpu_table`) in a cluster pool, or
one that jobs reach, is the cluster's: its lines are cut at the clock hours (each hour's part
by its share of the line's charge period) and each hour is split.

How an hour of an instance (a slot: the hour within the line's charge period) is split, in
weights of 1/5040 GPU-microseconds (integers: MIG slices of 1/7 and 1/4 GPU and a job's GPUs
over up to ten nodes are whole in them):
- a job placed on it holds round(5040 × its GPUs there) × the microseconds it overlaps the
  slot; its GPUs there are its GPUs ÷ its instance ids (or nodes);
- the jobs of the pool (no placement) share the free capacity of their cluster's instances in
  that clock hour: a pool job k weighs g_k·t_k × free_i ÷ max(Σ free, Σ g·t) on instance i;
- the instance's capacity is its GPUs × 5040 × the slot's microseconds (its type's GPUs, else
  the most any job placed there holds per node); what the jobs do not hold is `idle`;
- jobs holding more than the capacity (an over-booked slot) share the whole cost in
  proportion (no dollar made up, none idle), and the slot is counted (`a_overbooked`).
The cost is split by these weights with the exact-remainder rule (service/attribution/exact.py).

EKS split cost allocation data (CUR `split_line_item_*`, `ClustersConfig.eks_split`): an hour
of an instance that pod rows name as their parent is split by the pods instead: each pod
weighs its split cost in that hour, the parent's unused cost (Σ of the pods' unused cost) is
the idle of the pods' cluster (the weights are AWS's amortized costs; the parent's own lines
are what is split, so the bill's total stays). Its hours without pod rows are split as above
when it is a cluster's GPU instance, else left as they are.

What the parts are: a job's part takes its dimensions from the job (run, job_state, cluster,
user; team/project/experiment/job_type where the source states them, else the job's labels
through the dimensions' tag keys, then the virtual-tag rules, then the default), never from
the instance's tags; an idle part keeps the instance line's values but shows `idle` in run,
job_type and job_state and the cluster in `cluster`. `--explain` names them `job:<id>` and
`idle:<cluster>`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from service.attribution.allocation_eks import PARENT_ID, pod_ctes, pod_weights_cte
from service.attribution.allocation_hours import INSTANCES, LINE_HOURS_COLUMN, cut_ctes
from service.attribution.allocation_placement import hour_ctes, instance_ctes, jobs_cte, placement_ctes
from service.attribution.allocation_weights import GPU_SHARES, weight_ctes
from service.attribution.exact import from_units, split_select, to_units
from service.attribution.job_how import RECORD_MARK
from service.core.config_clusters import IDLE, IDLE_DIMENSIONS, JOB_MATCH_FIELDS, ClustersConfig
from service.core.job_windows import POD_UID
from service.core.schema import LINE_PRODUCTS

FAR = "TIMESTAMP '9999-12-31'"  # a running job (no end yet) holds its GPUs until further notice
MEASURE_COLUMNS = ("BilledCost", "EffectiveCost", "ListCost")
# Summable columns split alike when a statement carries them (every cost column: an export),
# with their decimals; the others (unit prices, names) stay on each part as the line has them.
CARRIED_MEASURES = {"ContractedCost": 12, "PricingCurrencyEffectiveCost": 12, "x_credits": 12,
                    "ConsumedQuantity": 16, "PricingQuantity": 16, "CommitmentDiscountQuantity": 16,
                    **{name: 12 for name in LINE_PRODUCTS}}
# A part's share of its slot (`a_weight` of `a_weight_total`) and its basis: `gpu` (weights of
# 1/5040 GPU-microseconds) or `eks` (EKS split cost in nano-units).
SHARE_COLUMNS = ("a_weight", "a_weight_total", "a_basis")
# Job fields the dimensions' tag keys can name, beside the job's labels (a label of the same
# key wins): `tags: [team, account]` takes a Slurm job's account when it has no team label.
JOB_FIELD_KEYS = {"account": "account", "partition": "partition", "qos": "qos", "namespace": "namespace",
                  "user": '"user"', "job_name": "name"}
# Dimensions a job states in its own columns (they win over its labels).
JOB_COLUMNS = {"run": "run_id", "job_state": "state", "cluster": "cluster", "user": '"user"', "team": "team",
               "project": "project", "experiment": "experiment", "job_type": "job_type"}
EXTRA_TAGS = {"node": "node_tag", "cluster": "cluster_tag"}  # instance tags the allocation reads
EKS_WORKLOAD_TAG = "aws:eks:workload-name"
INSTANCE_ID = "CASE WHEN ResourceId LIKE 'arn:%' THEN regexp_replace(ResourceId, '^arn:.*/', '') ELSE ResourceId END"
# A job record's job (DuckDB and Spark SQL alike).
# A Slurm attempt is its id without the submit epoch (cluster, raw job id) and its submit time as
# stored (UTC), not the id's text: ids before 2026-12-03 took the epoch in the host's zone, so on
# a non-UTC host an old and a new snapshot of one attempt hold different ids (it counted twice).
# An attempt requeued in its successor's submit second is `@<epoch>~<start>`: an attempt of its own.
# A pod is its namespace/name, creation time and `a_pod` (newest_records): k8s-pods names it
# <cluster>/<uid>, or <cluster>/<ns>/<pod>@<start> in a window read by name before 2026-12-04,
# so a pod running across such a change held two ids, the older running on for ever (two pods
# of one name are never created in one second: the second is created once the first is gone).
JOB_ID = ("CASE WHEN scheduler = 'slurm' THEN regexp_replace(record_id, '@[0-9]+$', '') WHEN scheduler = "
          "'kubernetes' AND submit_time IS NOT NULL THEN job_id ELSE record_id END")
JOB_SUBMIT = "CASE WHEN scheduler IN ('slurm', 'kubernetes') THEN submit_time END"
JOB_KEY = f"{JOB_ID}, {JOB_SUBMIT}, CASE WHEN scheduler = 'kubernetes' THEN a_pod END"
# `a_final` 0: the record holds the job's end as read (`{ended}`) and is its source's newest of
# the job. Rank 1: a job's record as the newest snapshot holding it shows it, unless another
# source's newest holds its end (an attempt or a pod that ended does not run again: a sacct
# dump taken while it ran, read again each day as a source of its own beside the live one, is
# stale); the newest of those. Within a source the newest wins, so a job seen again runs on.
FINAL = (f"CASE WHEN {{ended}} AND row_number() OVER (PARTITION BY {JOB_KEY}, source "
         "ORDER BY snapshot_date DESC, record_id DESC) = 1 THEN 0 ELSE 1 END")
NEWEST_RECORD = (f"row_number() OVER (PARTITION BY {JOB_KEY} "
                 "ORDER BY a_final, snapshot_date DESC, source DESC, record_id DESC)")


def _of_pods(*keys: str) -> str:
    """A window's partition over pod records by `keys`: other schedulers' records share one
    (cheaper than hashing a million Slurm ids)."""
    return ", ".join(f"CASE WHEN scheduler = 'kubernetes' THEN {key} END" for key in keys)


# A record's pod: its uid; a by-name one the uid the records of its name and creation were read
# by, if they hold one and it read one in its cluster or only in newer snapshots than it (a
# source's `cluster` renamed: read by name under the old, by uid under the new); else its
# cluster (a pod read by name only is its cluster, name and creation). Not taken: c1's pod read
# by uid in the snapshot holding c2's of the same name and creation second by name (a source
# reading two clusters through cluster_label), nor any when two pods of them were read by uid.
_OF_NAME = f"OVER (PARTITION BY {_of_pods('job_id', 'submit_time')})"
_UID_CLUSTER = "CASE WHEN a_uid IS NOT NULL THEN coalesce(cluster, '') END"
POD = (f"coalesce(a_uid, CASE WHEN min(a_uid) {_OF_NAME} = max(a_uid) {_OF_NAME} AND (coalesce(cluster, '') = "
       f"min({_UID_CLUSTER}) {_OF_NAME} OR coalesce(cluster, '') = max({_UID_CLUSTER}) {_OF_NAME} OR "
       f"min(CASE WHEN a_uid IS NOT NULL THEN snapshot_date END) {_OF_NAME} > snapshot_date) "
       f"THEN max(a_uid) {_OF_NAME} END, concat('cluster ', coalesce(cluster, '')))")
RECORD_COLUMNS = ("a_uid", "a_pod", "a_final")  # what newest_records adds besides the rank


def newest_records(relation: str, rank: str = "newest", ended: str = "end_time IS NOT NULL") -> str:
    """The job records of `relation` (a table or a parenthesised query), each with its `a_pod`
    (and the columns it is made from: RECORD_COLUMNS) and its `rank` (NEWEST_RECORD: 1 as the
    newest snapshot holding it shows it, or another source's with the end; `ended`: true of a
    record holding its end as read, SETTLED_ENDED over SETTLED_JOBS). DuckDB and Spark SQL alike."""
    return (f"SELECT *, {NEWEST_RECORD} AS {rank} FROM (SELECT *, {FINAL.format(ended=ended)} AS a_final FROM "
            f"(SELECT *, {POD} AS a_pod FROM (SELECT *, {POD_UID} AS a_uid FROM {relation} AS r) AS u) AS p) AS j")


# Job history as its readers take it (in place of `jobs`, before NEWEST_RECORD: a row's end
# depends on its own snapshot only, so on the newest alike): a record a window source saw
# running when snapshot S was taken, that a newer snapshot of the source (whatever it read
# from or asked) does not hold, ended when S was taken (service/core/job_windows.py). Its
# state stays as stored; having an end, it no longer runs. The hours since go to idle.
# SETTLED_ENDED: whether it held its end as read (NEWEST_RECORD's `ended`).
SETTLED_ENDED = "a_ended"
SETTLED_JOBS = ("SELECT j.* REPLACE (CASE WHEN j.end_time IS NULL AND j.start_time IS NOT NULL "
                "AND e.taken_at IS NOT NULL THEN greatest(j.start_time, e.taken_at) ELSE j.end_time END AS end_time), "
                f"j.end_time IS NOT NULL AS {SETTLED_ENDED} "
                "FROM jobs AS j LEFT JOIN (SELECT s.source, s.snapshot_date, s.taken_at FROM job_snapshots AS s "
                "WHERE EXISTS (SELECT 1 FROM job_snapshots AS n WHERE n.source = s.source "
                "AND n.snapshot_date > s.snapshot_date)) "
                "AS e ON e.source = j.source AND e.snapshot_date = CAST(j.snapshot_date AS VARCHAR)")
SETTLED_COLUMNS = (SETTLED_ENDED, *RECORD_COLUMNS)  # what settled_records adds besides the rank


def settled_records(rank: str = "newest") -> str:
    """`newest_records` of SETTLED_JOBS (with SETTLED_COLUMNS)."""
    return newest_records(f"({SETTLED_JOBS})", rank, SETTLED_ENDED)


@dataclass(frozen=True)
class AllocationInputs:
    """What the allocation of one statement needs besides the config: whether the lake has
    job records (the `jobs` view) and EKS split rows, and the job labels' keys."""

    clusters: ClustersConfig
    has_jobs: bool
    has_split: bool
    label_keys: tuple[str, ...] = ()


def extra_tag_aliases(clusters: ClustersConfig) -> dict[str, tuple[str, ...]]:
    """Instance tags read besides the dimensions' (name → tag keys): node, cluster, EKS workload."""
    aliases = {name: (getattr(clusters, key),) for name, key in EXTRA_TAGS.items() if getattr(clusters, key)}
    return aliases | {"workload": (EKS_WORKLOAD_TAG,)}


def part_columns(dims: Sequence[str]) -> list[str]:
    """Columns the allocated lines add to the cost lines' (NULL on lines left as they are)."""
    return ([f"jd_{d}" for d in dims if d in JOB_COLUMNS] + ["a_how", "a_overbooked"]
            + list(JOB_MATCH_FIELDS.values()) + list(SHARE_COLUMNS))


def jobs_sql(inputs: AllocationInputs) -> str:
    """What `Stage.jobs` holds: every job record as the newest snapshot holding it shows it,
    that held GPUs (read once: the members' stage and the statement select from it)."""
    if not inputs.has_jobs:
        return ("SELECT CAST(NULL AS VARCHAR) AS record_id, CAST(NULL AS VARCHAR) AS job_id, "
                "CAST(NULL AS VARCHAR) AS run_id, CAST(NULL AS VARCHAR) AS cluster, CAST(NULL AS VARCHAR) AS state, "
                "CAST(NULL AS TIMESTAMP) AS j_start, CAST(NULL AS TIMESTAMP) AS j_end, CAST(NULL AS DOUBLE) AS gpus, "
                "CAST(NULL AS VARCHAR[]) AS nodes, CAST(NULL AS VARCHAR[]) AS instance_ids, "
                + ", ".join(f"CAST(NULL AS VARCHAR) AS {c}" for c in
                            ("\"user\"", "team", "project", "experiment", "job_type", "name", "account", "partition",
                             "qos", "namespace"))
                + ", CAST(NULL AS MAP(VARCHAR, VARCHAR)) AS labels WHERE false")
    # A record alone of its (job id, submit time) (JOB_KEY without its pod: a coarser key) is its
    # job's newest, a_final aside (FINAL: its own partition), and takes no part in another's ranks:
    # not ranked. Only the others go through `settled_records`' windows, which sort every column
    # they carry (the bench's 200k records, each alone: 0.9 -> 0.25 CPU s, bench/README.md perf16b).
    # A pod without a submit time is always ranked: its pod window (POD) spans job ids.
    columns = ("record_id, job_id, run_id, cluster, state, start_time, end_time, gpus, nodes, instance_ids, "
               "\"user\", team, project, experiment, job_type, name, account, partition, qos, namespace, labels")
    lone = "(a_shared.a_many IS NULL AND (scheduler IS DISTINCT FROM 'kubernetes' OR submit_time IS NOT NULL))"
    marked = ("a_records AS r LEFT JOIN a_shared ON a_shared.a_id IS NOT DISTINCT FROM r.a_id "
              "AND a_shared.a_submit IS NOT DISTINCT FROM r.a_submit")
    shared = f"(SELECT r.* EXCLUDE (a_id, a_submit) FROM {marked} WHERE NOT {lone})"
    return (
        f"WITH a_records AS MATERIALIZED (SELECT *, {JOB_ID} AS a_id, {JOB_SUBMIT} AS a_submit FROM ({SETTLED_JOBS}) "
        "AS s), a_shared AS (SELECT a_id, a_submit, true AS a_many FROM a_records GROUP BY ALL HAVING count(*) > 1) "
        f"SELECT record_id, job_id, run_id, cluster, state, start_time AS j_start, coalesce(end_time, {FAR}) AS j_end, "
        "gpus, nodes, instance_ids, \"user\", team, project, experiment, job_type, name, account, partition, qos, "
        f"namespace, labels FROM (SELECT {columns} FROM {marked} WHERE {lone} UNION ALL SELECT {columns} FROM ("
        f"{newest_records(shared, 'a_newest', SETTLED_ENDED)}"
        ") AS ranked WHERE a_newest = 1) AS j WHERE start_time IS NOT NULL AND gpus > 0 "
        f"AND coalesce(end_time, {FAR}) > start_time"
    )


# A slot's key (its instance, start and end) as one integer: the instance's row number in
# `stage.members` (`a_no`), the start's microseconds since 1970 shifted to be >= 0 (< 2^64) and
# the slot's length (1 µs .. 1 hour < 2^33), in HUGEINT (< 2^127 below 2^30 instances). The
# slots' joins and groups take this one key where they took three (a text and two times).
SLOT = ("(CAST(a_no AS HUGEINT) * (CAST(1 AS HUGEINT) << 97) + (CAST(epoch_us(s_start) AS HUGEINT) + "
        "(CAST(1 AS HUGEINT) << 63)) * (CAST(1 AS HUGEINT) << 33) + (epoch_us(s_end) - epoch_us(s_start)))")
INSTANCE_LINE = ("ResourceId IS NOT NULL AND x_instance_type IS NOT NULL AND cp_end > cp_start "
                 "AND x_split_parent_resource_id IS NULL")
# Every cost line the allocation reads (instance lines and EKS pod rows, and a few more), as
# SQL over `costs`: any other line is attributed without the allocation as with it
# (the Spark engine relies on it: service/attribution/spark/clusters.py).
ALLOCATION_LINES = "(x_instance_type IS NOT NULL OR x_split_parent_resource_id IS NOT NULL)"


@dataclass(frozen=True)
class Stage:
    """The temporary tables one allocation fills before its statement runs, in this order, on
    the statement's connection (SQL of `jobs_sql`, and service/attribution/allocation_stage.py)."""

    jobs: str  # the job records (`jobs_sql`)
    lines: str  # the lines whose tags the allocation reads (`keep` too, unless TRUE), every column of `s0`
    members: str  # each instance a cluster holds (its GPUs, cluster) or EKS pods name as parent, its lines' types
    held: str  # those instances' cost lines `lines` does not hold, and the EKS pod rows, every column of `s0`


def bind_types(inputs: AllocationInputs, params) -> tuple[str, str]:
    """The markers of the GPU table (instance types, their GPUs) and the weights' unit, bound once."""
    if "a_types" not in params.values:
        types = inputs.clusters.gpu_table()
        params.bind(GPU_SHARES, "a_shares")
        params.bind(list(types), "a_types")
        params.bind([float(g) for g in types.values()], "a_gpus")
    return "$a_types", "$a_gpus"


def _member(stage: Stage) -> str:
    """SQL over cost lines: an instance line of an instance `stage.members` holds."""
    return f"{INSTANCE_LINE} AND {INSTANCE_ID} IN (SELECT a_instance FROM {stage.members})"


def _held_lines(stage: Stage) -> str:
    """The members' instance lines and the EKS split rows, numbered (`a_line`: ties are broken
    in this order): those `stage.lines` holds read where they were staged, not copied into
    `stage.held` (at 10M lines 180k rows of every column: 0.15 CPU s), then `stage.held`'s."""
    return (f"(SELECT *, rowid AS a_line FROM {stage.lines} WHERE {_member(stage)} UNION ALL "
            f"SELECT *, rowid + (SELECT count(*) FROM {stage.lines}) AS a_line FROM {stage.held})")


def _lines_cte(source: str, columns: Sequence[str], extra_cols: Mapping[str, str], a_types: str, a_gpus: str) -> str:
    node, cluster = extra_cols.get("node", "NULL"), extra_cols.get("cluster", "NULL")
    return (f"a_lines AS (SELECT {', '.join(columns)}, "
            f"{INSTANCE_ID} AS a_instance, {a_gpus}[list_position({a_types}, lower(x_instance_type))] AS a_type_gpus, "
            f"{node} AS a_node, {cluster} AS a_cluster FROM {source} WHERE {INSTANCE_LINE}), ")


def allocation_ctes(inputs: AllocationInputs, stage: Stage, columns: Sequence[str], label_cols: Mapping[str, str],
                    inventory_cols: Sequence[str], extra_cols: Mapping[str, str], run_cols: Sequence[str],
                    dims: Sequence[str], params, keep: str = "TRUE", unread: Sequence[str] = ()) -> str:
    """CTEs turning `s0` (the cost lines: `columns`, their tag columns `label_cols` (tag key →
    column), inventory tag columns, the allocation's own tags `extra_cols`) into `s0a`: the
    lines no cluster holds as they are, and the others (`stage.held`, filled beforehand) split
    into job and idle parts, with the columns of `part_columns(dims)` added. `run_cols`: the
    run dimension's tag columns. Only the held lines are spread hourly and joined to jobs:
    the rest of `s0` streams through once, those where `keep` (SQL over `s0`) holds. `unread`:
    cost measures the statement holds NULL (a query that does not read them): not split, NULL on
    the parts too."""
    tags = list(label_cols.values())
    a_types, a_gpus = bind_types(inputs, params)
    split = inputs.has_split and inputs.clusters.eks_split
    numbered = [*columns, "a_instance", "a_type_gpus", "a_node", "a_cluster", "a_gpus", "a_cl", "a_line"]
    read = [m for m in MEASURE_COLUMNS if m not in unread] or list(MEASURE_COLUMNS)  # a split needs a measure
    measures = {m: 12 for m in read} | {m: d for m, d in CARRIED_MEASURES.items() if m in columns}
    plain = [c for c in numbered if c not in measures and c not in ("cp_start", "cp_end")]
    units = [f"u_{i}" for i in range(len(measures))]
    cut = [*plain, "cp_start", "cp_end", "s_start", "s_end", "a_slot", "a_mult"]
    text = (
        _lines_cte(_held_lines(stage), [*columns, LINE_HOURS_COLUMN, "a_line"], extra_cols, a_types, a_gpus)
        + instance_ctes() + jobs_cte(stage.jobs)
        + pod_ctes(split, tags, run_cols, extra_cols.get("workload"), stage.held)
        + placement_ctes(inputs.clusters, stage.jobs)
        + hour_ctes(inputs.clusters)
        # a parent of EKS pods that no cluster holds is in `stage.members` too (no GPUs, no cluster)
        + f"a_member_lines AS (SELECT l.*, m.a_gpus, m.a_cl, m.rowid AS a_no FROM a_lines l JOIN {stage.members} m "
        "USING (a_instance) WHERE m.a_member OR l.a_instance IN (SELECT a_instance FROM a_parents)), "
        # the slots (`a_cut0`), weighed by their up time (allocation_hours.py: `a_cut`)
        f"a_cut0 AS (SELECT *, {INSTANCES} AS a_mult FROM (SELECT *, "
        f"epoch_us(s_end) - epoch_us(s_start) AS a_sw, {SLOT} AS a_slot, "
        "epoch_us(cp_end) - epoch_us(cp_start) AS a_ll, s_start = cp_start AND s_end = cp_end AS a_alone, "
        + ", ".join(f"{to_units(m, d)} AS {u}" for (m, d), u in zip(measures.items(), units))
        + " FROM (SELECT *, greatest(h, cp_start) AS s_start, least(h + INTERVAL 1 HOUR, cp_end) AS s_end FROM ("
        "SELECT *, unnest(generate_series(date_trunc('hour', cp_start), cp_end - INTERVAL 1 MICROSECOND, "
        "INTERVAL 1 HOUR)) AS h FROM a_member_lines) AS hours) AS slots) AS sized), "
        + cut_ctes(inputs.clusters, stage.members)
        # a line within one clock hour is its one slot's whole (read from `a_cut0`: no weight to join)
        + f"a_slots AS MATERIALIZED ({split_select('a_cut', cut, ['a_line'], units, 'a_w', 'a_len', ['a_w DESC', 's_start'], alone='a_alone', alone_rows='a_cut0')}), "
        + pod_weights_cte(split)
        + weight_ctes()
        + _split_ctes(columns, measures, units, label_cols, inventory_cols, dims, stage, params, keep)
    )
    return text


def job_label(key: str, params) -> str:
    """A job's value for tag key `key`: its label, else the job field of that name."""
    label = f"nullif(trim(j.labels[{params.bind(key)}]), '')"
    field = JOB_FIELD_KEYS.get(key)
    return f"coalesce({label}, nullif(trim(j.{field}), ''))" if field else label


def _job_dimension(dim: str) -> str:
    """A part's own value of a job dimension: the job's (or pod's) column, `idle`, the cluster."""
    job = f"nullif(trim(j.{JOB_COLUMNS[dim]}), '')"
    if dim == "cluster":
        job = f"coalesce({job}, sl.a_cl)"
    pod = {"run": "p.pod_run", "job_state": "'UNKNOWN'", "cluster": "p.pod_cluster"}.get(dim, "NULL")
    idle = f"'{IDLE}'" if dim in IDLE_DIMENSIONS else ("sp.a_ref" if dim == "cluster" else "NULL")
    return f"CAST(CASE sp.a_part WHEN 'job' THEN {job} WHEN 'pod' THEN {pod} WHEN 'idle' THEN {idle} END AS VARCHAR) AS jd_{dim}"


def _split_ctes(columns: Sequence[str], measures: Mapping[str, int], units: Sequence[str], label_cols: Mapping[str, str],
                inventory_cols: Sequence[str], dims: Sequence[str], stage: Stage, params, keep: str) -> str:
    """`a_split` (each slot's amount split by its weights: narrow rows, the slot's key and its
    parts), `a_parts` (their columns: the slot line's, with the job's labels and fields for a
    job part) and `s0a` (kept lines and parts)."""
    split_in = (
        f"a_split_in AS MATERIALIZED (SELECT sl.a_line, sl.s_start, {', '.join(f'sl.{u}' for u in units)}, "
        "coalesce(w.kind, 'none') AS a_part, w.ref AS a_ref, coalesce(w.w, 1) AS a_wt, "
        "coalesce(t.total, 1) AS a_total, coalesce(t.overbooked AND sl.a_line = t.first_line AND w.kind = t.first_kind "
        "AND w.ref IS NOT DISTINCT FROM t.first_ref, false) AS a_over, coalesce(t.a_eks, false) AS a_eks, "
        "coalesce(t.weights, 0) <= 1 AS a_alone FROM a_slots sl LEFT JOIN a_totals t USING (a_slot) "
        "LEFT JOIN a_weights w USING (a_slot)), "
    )
    extra = ["a_part", "a_ref", "a_wt", "a_total", "a_over", "a_eks"]
    order = ["a_wt DESC", "a_ref", "a_part"]
    # a slot with one weight (one job, or all idle: its weight is the total) is that part's whole
    split = "a_split AS (" + split_select("a_split_in", ["a_line", "s_start", *extra], ["a_line", "s_start"], units,
                                          "a_wt", "a_total", order, alone="a_alone") + "), "
    labels = {col: key for key, col in label_cols.items()}
    picks = []
    for column in columns:
        if column in ("cp_start", "cp_end", "ChargePeriodStart", "ChargePeriodEnd"):  # a part is of its hour
            picks.append(f"sl.s_{'start' if column.endswith('Start') or column == 'cp_start' else 'end'} AS {column}")
        elif column in measures:
            picks.append(f"{from_units('sp.' + units[list(measures).index(column)], measures[column])} AS {column}")
        elif column in labels:
            picks.append(f"CASE sp.a_part WHEN 'job' THEN {job_label(labels[column], params)} "
                         f"WHEN 'pod' THEN p.{column} ELSE sl.{column} END AS {column}")
        elif column in inventory_cols:
            picks.append(f"CASE WHEN sp.a_part IN ('job', 'pod') THEN NULL ELSE sl.{column} END AS {column}")
        else:
            picks.append(f"sl.{column}")
    job_dims = [d for d in dims if d in JOB_COLUMNS]
    how = (f"CASE sp.a_part WHEN 'job' THEN 'job:' || j.job_id || chr({ord(RECORD_MARK)}) || j.record_id "
           "WHEN 'pod' THEN 'job:' || "
           "concat_ws('/', p.pod_namespace, p.pod_name) WHEN 'idle' THEN 'idle:' || coalesce(sp.a_ref, 'unknown') END")
    fields = {"j_name": ("j.name", "p.pod_name"), "j_partition": ("j.partition", "NULL"),
              "j_qos": ("j.qos", "NULL"), "j_namespace": ("j.namespace", "p.pod_namespace")}
    added = ([_job_dimension(d) for d in job_dims] + [f"CAST({how} AS VARCHAR) AS a_how",
             "CAST(CASE WHEN sp.a_over THEN 1 ELSE 0 END AS INTEGER) AS a_overbooked"]
             + [f"CAST(CASE sp.a_part WHEN 'job' THEN {gpu} WHEN 'pod' THEN {pod} END AS VARCHAR) AS {name}"
                for name, (gpu, pod) in fields.items()]
             + [f"CASE WHEN sp.a_part <> 'none' THEN {value} END AS {name}" for name, value in zip(
                 SHARE_COLUMNS, ("sp.a_wt", "sp.a_total", "CASE WHEN sp.a_eks THEN 'eks' ELSE 'gpu' END"))])
    nulls = ([f"CAST(NULL AS VARCHAR) AS jd_{d}" for d in job_dims] + ["CAST(NULL AS VARCHAR) AS a_how",
             "CAST(0 AS INTEGER) AS a_overbooked"] + [f"CAST(NULL AS VARCHAR) AS {name}" for name in fields]
             + ["CAST(NULL AS HUGEINT) AS a_weight", "CAST(NULL AS HUGEINT) AS a_weight_total",
                "CAST(NULL AS VARCHAR) AS a_basis"])
    return (
        split_in + split
        + f"a_parts AS (SELECT {', '.join(picks + added)} FROM (a_split sp "
        "LEFT JOIN a_jobs j ON sp.a_part = 'job' AND j.record_id = sp.a_ref "
        "LEFT JOIN a_pods p ON sp.a_part = 'pod' AND p.pod = sp.a_ref) "
        "JOIN a_slots sl ON sl.a_line = sp.a_line AND sl.s_start = sp.s_start), "
        # the lines kept as they are: of `stage.lines` when it holds them (their Tags read once)
        f"a_keep AS (SELECT {', '.join([*columns, *nulls])} FROM {'s0' if keep == 'TRUE' else stage.lines} "
        f"WHERE ({keep}) AND NOT coalesce({_member(stage)}, false)), "
        "s0a AS (SELECT * FROM a_keep UNION ALL SELECT * FROM a_parts), "
    )
