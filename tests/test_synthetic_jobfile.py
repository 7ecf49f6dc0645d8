"""The benchmark's jobs file (connectors.synthetic.jobfile): as many job records as asked,
the cluster's own workload on its nodes and eval sweeps on the last few, never more GPUs on a
node than it has, read back whole by the real jobs-file connector."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timedelta

import duckdb
import numpy as np
import pytest
from inventory_support import stored_jobs

from connectors.synthetic.jobfile import ARRAY_TASKS, write_jobs_file
from connectors.synthetic.org import build_organisation
from connectors.synthetic.slurm import HOUR, add_slurm_cluster, cluster_jobs

pytestmark = pytest.mark.slow  # generates and ingests a cluster's jobs

START, DAYS, SEED, NODES, JOBS = date(2026, 11, 1), 6, 11, 16, 9000
T0 = datetime(2026, 11, 1)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    org = build_organisation(SEED, START, DAYS)
    cluster = add_slurm_cluster(org, nodes=NODES)
    root = tmp_path_factory.mktemp("jobfile")
    result = write_jobs_file(org, cluster, root / "jobs.parquet", jobs=JOBS)
    rows = stored_jobs({"name": "jobs", "kind": "jobs-file", "path": str(result.path), "cluster": cluster.name},
                       root / "lake", T0 + timedelta(days=DAYS + 1))
    return org, cluster, result, rows


def test_as_many_jobs_as_asked_read_back_by_the_jobs_file_connector(written):
    _, _, result, rows = written
    assert result.rows == len(rows) == JOBS == result.story + result.sweeps
    assert result.sweeps > 0 and 0 < len(result.sweep_nodes) < NODES
    assert Counter(r["state"] for r in rows)["FAILED"] > 0


def test_sweeps_run_alone_on_the_last_nodes_as_one_gpu_array_tasks(written):
    org, cluster, result, rows = written
    sweeps = [r for r in rows if r["run_id"].startswith("sweep-")]
    assert len(sweeps) == result.sweeps
    assert {node for r in sweeps for node in r["nodes"]} == set(result.sweep_nodes)
    assert result.sweep_nodes == list(cluster.nodes)[-len(result.sweep_nodes):]
    assert all(r["gpus"] == 1 and r["job_type"] == "eval" for r in sweeps)
    arrays = Counter(r["run_id"] for r in sweeps)
    assert max(arrays.values()) == ARRAY_TASKS
    story = [r for r in rows if not r["run_id"].startswith("sweep-")]
    assert not {node for r in story for node in (r["nodes"] or [])} & set(result.sweep_nodes)
    # the story is the cluster's own workload on the other nodes
    own = cluster_jobs(org, cluster, sweep_nodes=len(result.sweep_nodes))
    assert len(story) == len(own) == result.story
    assert {r["run_id"] for r in story} >= {j.run for j in own if j.state not in ("RUNNING", "PENDING")}


def test_no_node_holds_more_gpus_than_it_has_in_any_hour(written):
    org, cluster, result, rows = written
    held = np.zeros((len(cluster.nodes), org.hours))
    index = {node: i for i, node in enumerate(cluster.nodes)}
    horizon = T0 + timedelta(hours=org.hours)
    for r in rows:
        if not r["nodes"] or not r["gpus"]:
            continue
        start = (r["start_time"] - T0).total_seconds()
        end = ((r["end_time"] or horizon) - T0).total_seconds()
        slots = np.arange(int(start // HOUR), int(-(-end // HOUR)))
        overlap = np.minimum(end, (slots + 1) * HOUR) - np.maximum(start, slots * HOUR)
        for node in r["nodes"]:
            held[index[node], slots] += r["gpus"] / len(r["nodes"]) * overlap
    assert held.max() <= 8 * HOUR + 1e-6
    sweep_rows = [index[n] for n in result.sweep_nodes]
    busy = held[sweep_rows].sum() / (8 * HOUR * len(sweep_rows) * org.hours)
    assert 0.5 < busy < 0.95, busy  # sweeps keep their GPUs mostly busy, with gaps between tasks


def test_asking_for_fewer_jobs_than_the_workload_has_is_refused(tmp_path):
    org = build_organisation(SEED, START, DAYS)
    cluster = add_slurm_cluster(org, nodes=NODES)
    with pytest.raises(ValueError, match="the cluster's own workload"):
        write_jobs_file(org, cluster, tmp_path / "jobs.parquet", jobs=10)


def test_the_file_holds_what_a_bare_query_needs(written):
    _, _, result, _ = written
    nodes = duckdb.connect().execute("SELECT count(*) FROM read_parquet($path) WHERE nodes LIKE '%[%'",
                                     {"path": str(result.path)}).fetchone()[0]
    assert nodes == 0  # plain comma lists, so a bare join can split them
