"""The Slurm cluster's jobs as a jobs file (README "jobs-file"), with as many eval sweeps as a
benchmark asks for: a month of a 2,000-GPU cluster holds some 200k jobs, most of them short.

    result = write_jobs_file(org, cluster, path, jobs=200_000)

The cluster's own workload (connectors.synthetic.slurm.cluster_jobs) keeps its nodes but the
last few, which sweeps fill: one-GPU array tasks (`<array>_<task>`, 1,000 tasks an array, run
`sweep-<array>`) back to back on every GPU with short gaps, most COMPLETED, some FAILED or
CANCELLED. The file's columns say what a site's own export would: `team` the account,
`project` the wckey, `run_id`, `experiment`, `job_type` and `parent_run` the labels (`debug` for the debug
partition), `nodes` a comma-separated list (a hostlist without brackets, so a bare query can
split it). Written in batches of `BATCH` rows: memory grows with the cluster, not with the jobs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from connectors.synthetic.org import INSTANCES, Cluster, Organisation
from connectors.synthetic.slurm import HOUR, JOB_ID_BASE, SlurmJob, cluster_jobs

BATCH = 50_000
ARRAY_TASKS = 1000
SWEEP_CYCLE_HOURS = 1.0  # a sweep task and the gap after it, on average
SCHEMA = pa.schema([
    ("job_id", pa.string()), ("run_id", pa.string()), ("cluster", pa.string()), ("state", pa.string()),
    ("submit_time", pa.timestamp("s")), ("start_time", pa.timestamp("s")), ("end_time", pa.timestamp("s")),
    ("gpus", pa.float64()), ("nodes", pa.string()), ("user", pa.string()), ("account", pa.string()),
    ("partition", pa.string()), ("name", pa.string()), ("team", pa.string()), ("project", pa.string()),
    ("experiment", pa.string()), ("job_type", pa.string()), ("restarts", pa.int32()), ("parent_run", pa.string()),
])


@dataclass(frozen=True)
class JobsFile:
    path: Path
    rows: int
    story: int  # the cluster's own workload
    sweeps: int
    sweep_nodes: list[str]


def sweep_nodes_for(org: Organisation, cluster: Cluster, sweeps: int) -> int:
    """Nodes the sweeps need to run about one task an hour on each GPU."""
    gpus = INSTANCES[cluster.instance_type][2]
    return math.ceil(sweeps * SWEEP_CYCLE_HOURS / (gpus * org.hours)) if sweeps > 0 else 0


def write_jobs_file(org: Organisation, cluster: Cluster, path: str | Path, *, jobs: int) -> JobsFile:
    """`jobs` job records of the cluster over the window as one Parquet jobs file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    story_estimate = len(cluster_jobs(org, cluster))
    reserved = sweep_nodes_for(org, cluster, jobs - story_estimate)
    story = cluster_jobs(org, cluster, sweep_nodes=reserved)
    sweeps = jobs - len(story)
    if sweeps < 0 or (sweeps and not reserved):
        raise ValueError(f"{jobs:,} jobs: the cluster's own workload is {len(story):,} already")
    nodes = list(cluster.nodes)[len(cluster.nodes) - reserved:]
    epoch = np.datetime64(datetime(org.start.year, org.start.month, org.start.day), "s")
    written = 0
    with pq.ParquetWriter(path, SCHEMA, compression="zstd") as writer:
        for offset in range(0, len(story), BATCH):
            table = story_table(story[offset:offset + BATCH], cluster.name, epoch)
            writer.write_table(table)
            written += table.num_rows
        first_array = JOB_ID_BASE + len({job.job_id for job in story})
        for table in sweep_tables(org, cluster.name, nodes, sweeps, first_array, epoch):
            writer.write_table(table)
            written += table.num_rows
    return JobsFile(path, written, len(story), sweeps, nodes)


def story_table(jobs: list[SlurmJob], cluster: str, epoch: np.datetime64) -> pa.Table:
    def at(seconds):
        return None if seconds is None else (epoch + np.timedelta64(seconds, "s")).astype(datetime)

    rows = []
    for job in jobs:
        labels = dict(job.labels)
        started = job.start is not None
        rows.append({
            "job_id": str(job.job_id), "run_id": job.run, "cluster": cluster, "state": job.state,
            "submit_time": at(job.submit), "start_time": at(job.start if started else job.end),
            "end_time": at(job.end), "gpus": float(job.gpus if started else 0),
            "nodes": ",".join(job.nodes) or None, "user": job.user, "account": job.account,
            "partition": job.partition, "name": job.name, "team": job.account, "project": job.wckey or None,
            "experiment": labels.get("experiment"),
            "job_type": labels.get("job_type") or ("debug" if job.partition == "debug" else None),
            "restarts": job.attempt, "parent_run": labels.get("parent_run")})
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def sweep_tables(org: Organisation, cluster: str, nodes: list[str], count: int, first_array: int,
                 epoch: np.datetime64):
    """`count` one-GPU sweep tasks on `nodes`' GPUs, in start order, in tables of BATCH rows."""
    if count <= 0:
        return
    rng = np.random.default_rng([org.seed, 43])
    gpus = INSTANCES["p5.48xlarge"][2]
    slots = len(nodes) * gpus
    per_slot = np.full(slots, count // slots) + (np.arange(slots) < count % slots)
    slot = np.repeat(np.arange(slots), per_slot)
    index = np.arange(count) - np.repeat(np.cumsum(per_slot) - per_slot, per_slot)  # position in its slot
    cycle = org.hours * HOUR / per_slot[slot]
    length = (cycle * rng.uniform(0.55, 0.95, count)).astype(np.int64)
    start = (index * cycle + rng.uniform(0, 1, count) * (cycle - length)).astype(np.int64)
    roll = rng.random(count)
    state = np.where(roll < 0.06, "FAILED", np.where(roll < 0.10, "CANCELLED", "COMPLETED"))
    length = np.where(roll < 0.10, (length * rng.uniform(0.1, 0.9, count)).astype(np.int64), length)
    submit = start - rng.integers(0, 300, count)
    order = np.argsort(start, kind="stable")
    names = np.array(nodes)
    for offset in range(0, count, BATCH):
        take = order[offset:offset + BATCH]
        number = np.arange(offset, offset + len(take))
        array = (first_array + number // ARRAY_TASKS).astype(str)
        n = len(take)
        table = pa.table({
            "job_id": np.char.add(np.char.add(array, "_"), (number % ARRAY_TASKS).astype(str)),
            "run_id": np.char.add("sweep-", array), "cluster": [cluster] * n, "state": state[take],
            "submit_time": epoch + submit[take].astype("timedelta64[s]"),
            "start_time": epoch + start[take].astype("timedelta64[s]"),
            "end_time": epoch + (start[take] + length[take]).astype("timedelta64[s]"),
            "gpus": np.ones(n), "nodes": names[slot[take] // gpus], "user": ["evalbot"] * n,
            "account": ["eval"] * n, "partition": ["eval"] * n, "name": ["eval-sweep"] * n, "team": ["eval"] * n,
            "project": ["eval-sweeps"] * n, "experiment": ["eval-sweeps"] * n, "job_type": ["eval"] * n,
            "restarts": np.zeros(n, np.int32), "parent_run": pa.nulls(n, pa.string())})
        yield table.cast(SCHEMA)
