"""The demo organisation's Slurm cluster (connectors.synthetic.slurm, .sacct): its daily
`sacct --json` files have the shape a real Slurm 22.05 writes and read through the real
slurm-jobs connector into the runs and states the workload made; its nodes are billed with
the cluster's and the node's tags only; its GPUs look busy exactly while jobs hold them."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import date, datetime, timedelta, timezone

import duckdb
import pyarrow.parquet as pq
import pytest
from conftest import DATA
from inventory_support import stored_jobs
from slurm_cluster import shape

from connectors.synthetic.billing import write_billing
from connectors.synthetic.inventory import write_inventory
from connectors.synthetic.org import build_organisation
from connectors.synthetic.sacct import write_sacct
from connectors.synthetic.slurm import EVALUATED_RUN, HOUR, add_slurm_cluster, cluster_jobs, node_hour_gpu_seconds

START, DAYS, SEED = date(2026, 10, 20), 12, 7
T0 = datetime(2026, 10, 20)


@pytest.fixture(scope="module")
def org():
    org = build_organisation(SEED, START, DAYS)
    add_slurm_cluster(org)
    return org


@pytest.fixture(scope="module")
def read_back(org, tmp_path_factory):
    """The sacct files as the slurm-jobs connector stores them: {(job_id, restarts): row}."""
    root = tmp_path_factory.mktemp("slurm")
    paths = write_sacct(org, org.clusters[0], root / "sacct")
    rows = stored_jobs({"name": "slurm", "kind": "slurm-jobs", "path": str(root / "sacct")}, root / "lake",
                       T0 + timedelta(days=DAYS + 1))
    return paths, {(row["job_id"], row["restarts"]): row for row in rows}


def at(seconds: int | None) -> datetime | None:
    return None if seconds is None else T0 + timedelta(seconds=seconds)


def test_every_record_reads_back_as_the_workload_made_it(org, read_back):
    _, rows = read_back
    jobs = cluster_jobs(org, org.clusters[0])
    assert len(rows) == len(jobs)
    for job in jobs:
        row = rows[(str(job.job_id), job.attempt)]
        never_started = job.start is None
        # Slurm 22.05 stores a comment when the job ends: a running job's run is its job id until
        # then, unless it is a requeued job's new attempt (the earlier attempts show the comment)
        ended = job.state not in ("RUNNING", "PENDING") or (job.attempt > 0 and bool(job.labels))
        assert (row["run_id"], row["state"], row["cluster"], row["scheduler"], row["name"]) == (
            job.run if ended else str(job.job_id), job.state, "p5-west", "slurm", job.name), job
        assert (row["submit_time"], row["start_time"], row["end_time"]) == (
            at(job.submit), at(job.end if never_started else job.start), at(job.end)), job
        assert (row["gpus"], row["nodes"]) == ((0.0, None) if never_started else (job.gpus, sorted(job.nodes))), job
        # team, project and the comment's labels, the way the site carries them
        assert (row["account"], row["partition"], row["user"]) == (job.account, job.partition, job.user)
        labels = row["labels"] or {}
        assert labels.get("wckey") == (job.wckey or None)
        assert {k: v for k, v in labels.items() if k not in ("wckey", "comment")} == (dict(job.labels) if ended else {})


def test_the_workload_tells_the_clusters_stories(org, read_back):
    _, rows = read_back
    by_run: dict[str, list[dict]] = defaultdict(list)
    for row in sorted(rows.values(), key=lambda r: r["submit_time"]):
        by_run[row["run_id"]].append(row)
    # a long pretrain run over the whole window, restarted many times, still running at its end
    # (that attempt's comment not stored yet: its name says the run)
    pretrain = sorted((r for r in rows.values() if r["name"] == "llama-405b-r1"), key=lambda r: r["submit_time"])
    assert {r["run_id"] for r in pretrain[:-1]} == {"llama-405b-r1"} and len(pretrain) >= 4
    assert pretrain[-1]["state"] == "RUNNING" and pretrain[-1]["end_time"] is None
    assert pretrain[0]["start_time"] < T0 + timedelta(hours=8)
    # requeued: the same job again, its restarts counted, a spare node in the failed one's place
    requeued = [r for r in pretrain if r["restarts"] > 0]
    assert requeued
    for row in requeued:
        before = rows[(row["job_id"], row["restarts"] - 1)]
        assert before["state"] == "REQUEUED" and before["end_time"] <= row["submit_time"] <= row["start_time"]
        assert len(set(before["nodes"]) ^ set(row["nodes"])) in (0, 2)
    # failed and resubmitted: a new job id under the same run label
    resubmitted = {records[0]["labels"].get("job_type") for records in by_run.values()
                   for failed, after in zip(records, records[1:])
                   if failed["state"] in ("FAILED", "OUT_OF_MEMORY") and after["job_id"] != failed["job_id"]
                   and after["name"] == failed["name"] and after["submit_time"] >= failed["end_time"]}
    assert {"pretrain", "sft", "rl"} & resubmitted
    # cancelled debug sessions: no labels but the partition, their run their job id
    debug = [r for r in rows.values() if r["partition"] == "debug"]
    assert sum(r["state"] == "CANCELLED" for r in debug) >= 5
    assert all(r["run_id"] == r["job_id"] and "job_type" not in (r["labels"] or {}) for r in debug)
    # nightly evals: one run per night, six suites submitted at 20:00-20:10 UTC
    for day in range(DAYS):
        at_eight = T0 + timedelta(days=day, hours=20)
        suites = [r for r in rows.values() if r["partition"] == "eval"
                  and at_eight <= r["submit_time"] < at_eight + timedelta(minutes=11)]
        assert len(suites) == 6
        assert {r["run_id"] for r in suites if r["end_time"]} == {f"nightly-evals-{at_eight:%Y-%m-%d}"}
        assert {r["labels"]["job_type"] for r in suites if r["end_time"]} == {"eval"}
        # each names the pretraining run whose checkpoint it scores, which runs all window long
        assert {r["labels"]["parent_run"] for r in suites if r["end_time"]} == {EVALUATED_RUN}
        assert any(r["run_id"] == EVALUATED_RUN and r["start_time"] < at_eight for r in rows.values())


def test_nodes_are_never_overbooked_and_idle_a_fair_share(org):
    cluster = org.clusters[0]
    held = node_hour_gpu_seconds(cluster_jobs(org, cluster), list(cluster.nodes), org.hours)
    assert held.max() <= 8 * HOUR
    idle = 1 - held.sum() / (8 * HOUR * held.size)
    assert 0.1 < idle < 0.4, idle
    assert (held == 0).any(axis=1).sum() >= 3  # whole idle hours on several nodes


def test_sacct_files_have_the_shape_of_real_slurm(read_back):
    paths, _ = read_back
    captured = [json.loads((DATA / "slurm" / name).read_text()) for name in ("sacct.json", "sacct-running.json")]
    real = shape(captured[0]) | shape(captured[1])
    for path in paths:
        text = path.read_text()
        assert "openapi\\/dbv0.0.38" in text  # json-c escapes slashes
        data = json.loads(text)
        assert shape(data) <= real, sorted(shape(data) - real)
        assert all(set(job) == set(captured[0]["jobs"][0]) for job in data["jobs"])
    states = {job["state"]["current"] for p in paths for job in json.loads(p.read_text())["jobs"]}
    assert {"RUNNING", "COMPLETED", "FAILED", "CANCELLED", "REQUEUED", "TIMEOUT"} <= states


def test_same_seed_same_files_another_seed_other_jobs(org, read_back, tmp_path):
    paths, _ = read_back
    again = write_sacct(org, org.clusters[0], tmp_path / "again")
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in paths]
    other = build_organisation(SEED + 1, START, DAYS)
    add_slurm_cluster(other)
    assert cluster_jobs(other, other.clusters[0]) != cluster_jobs(org, org.clusters[0])


@pytest.mark.slow  # writes the cluster's bill
def test_nodes_carry_only_the_cluster_and_node_tags(org, tmp_path):
    cluster = org.clusters[0]
    bill = write_billing(org, tmp_path / "bill")
    files = [str(f) for f in bill.files]
    con = duckdb.connect()
    rows = con.execute("""
        SELECT line_item_resource_id, line_item_usage_type, map_keys(resource_tags), resource_tags['user_slurm_node'],
               count(*)
        FROM read_parquet(?) WHERE line_item_resource_id IN (SELECT unnest(?))
        GROUP BY ALL""", [files, list(cluster.nodes.values())]).fetchall()
    node_of = {instance: node for node, instance in cluster.nodes.items()}
    boxes = [r for r in rows if r[1] == "USW2-BoxUsage:p5.48xlarge"]
    assert len(boxes) == len(cluster.nodes)
    for instance, _, keys, node, count in boxes:
        assert sorted(keys) == ["user_cluster", "user_slurm_node"] and node == node_of[instance]
        assert count == org.hours  # always on: what no job holds is idle
    assert all(sorted(r[2]) == [] for r in rows if r not in boxes)  # their inter-AZ traffic: untagged
    volumes = con.execute("SELECT DISTINCT map_keys(resource_tags) FROM read_parquet(?) WHERE "
                          "resource_tags['user_cluster'] = 'p5-west' AND line_item_usage_type LIKE '%EBS%'",
                          [files]).fetchall()
    assert volumes == [(["user_cluster"],)]
    inventory = write_inventory(org, tmp_path / "inventory")
    mappings = json.loads(inventory.tags.read_text())["ResourceTagMappingList"]
    tags = {m["ResourceARN"].rsplit("/", 1)[1]: m["Tags"] for m in mappings if ":instance/" in m["ResourceARN"]}
    for node, instance in cluster.nodes.items():
        assert tags[instance] == [{"Key": "cluster", "Value": "p5-west"}, {"Key": "slurm-node", "Value": node}]
    assert {"name": "ml-org-slurm", "kind": "slurm-jobs", "path": str(inventory.slurm)} in inventory.sources()


@pytest.mark.slow  # writes and ingests the inventory
def test_dcgm_shows_the_cluster_busy_while_jobs_hold_its_gpus(org, tmp_path):
    cluster = org.clusters[0]
    held = node_hour_gpu_seconds(cluster_jobs(org, cluster), list(cluster.nodes), org.hours)
    dcgm = pq.read_table(write_inventory(org, tmp_path / "inventory").gpu)
    gpu = duckdb.connect().execute(
        "SELECT resource_id, epoch(hour)::BIGINT, avg(util_pct) FROM dcgm GROUP BY ALL").fetchall()
    t0 = int(T0.replace(tzinfo=timezone.utc).timestamp())
    mean = {(r, (h - t0) // HOUR): u for r, h, u in gpu}
    for row, (node, instance) in enumerate(cluster.nodes.items()):
        for hour in range(org.hours):
            share = held[row, hour] / (8 * HOUR)
            if share == 0:
                assert mean[instance, hour] < 2
            elif share == 1:
                assert mean[instance, hour] > 15
