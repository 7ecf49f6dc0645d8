"""The jobs of a real Slurm cluster (tests/data/slurm/sacct.json, captured from Slurm 22.05: one
node gpu-node-01 with 8 GPUs) joined to a small bill: the node is a p5.48xlarge billed $28.80
for the hour 01:00-02:00 UTC on 2026-12-02, i.e. $0.001 a GPU-second, and carries the tag
slurm-node=gpu-node-01. Each job costs its GPUs x seconds x $0.001 (times as sacct recorded
them); the rest of the hour is idle."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from service.attribution import RunsQuery, attribute, cluster_usage, reconcile, runs
from service.core.config import parse_config
from service.core.lake import Lake
from service.core.timewindow import Window
from service.ingest.inventory import run_inventory
from tests.attribution_helpers import declared_sources, line, make_lake
from tests.conftest import DATA

HOUR = Window(datetime(2026, 12, 2, 1, tzinfo=timezone.utc), datetime(2026, 12, 2, 2, tzinfo=timezone.utc))
D = Decimal
ATTRIBUTION = {
    "clusters": {"node_tag": "slurm-node", "cluster_tag": "slurm-cluster"},
    "dimensions": {
        "team": {"tags": ["team", "account"]},  # the Slurm account
        "project": {"tags": ["project", "wckey"]},  # the WCKey
        "job_type": {"rules": [{"match": {"job_name": "^debug"}, "value": "debug"},
                               {"match": {"job_name": "^eval"}, "value": "eval"},
                               {"match": {"partition": "train"}, "value": "pretrain"}]},
    },
}


def setup(tmp_path):
    lake = make_lake(tmp_path, [line("2026-12-02T01:00:00", "28.80", resource="i-0slurm", instance_type="p5.48xlarge",
                                     tags={"slurm-node": "gpu-node-01", "slurm-cluster": "spendlake",
                                           "team": "platform"})])
    config = reading(lake, "sacct.json")
    [outcome] = run_inventory(config, now=datetime(2026, 12, 2, 6))
    assert outcome.error is None
    return Lake.of(config), config


def reading(lake, capture: str):
    """The config of the bill in `lake` with the slurm-jobs source reading `capture`."""
    return parse_config({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": ATTRIBUTION,
                         "inventory": [{"name": "slurm", "kind": "slurm-jobs", "path": str(DATA / "slurm" / capture)}]})


def totals(lake, config, dims) -> dict:
    out: dict = {}
    for row in attribute(lake, config, HOUR, by=tuple(dims)).rows:
        key = tuple(row.values[d] for d in dims) if len(dims) > 1 else row.values[dims[0]]
        out[key] = out.get(key, D(0)) + row.cost
    return out


def test_a_real_slurm_workload_on_a_billed_node(tmp_path):
    lake, config = setup(tmp_path)
    # job 1: 1 GPU x 87 s; job 2: 2 x 4 s; job 3: 1 x 2 s; job 4: 2 x 1 s; job 5: 1 x 1 s
    # (requeued), then 1 x 2 s; job 6: 1 x 2 s; the array (7, 9) and job 8 held no GPU.
    assert totals(lake, config, ["run"]) == {
        "1": D("0.087"), "llama-70b-r1": D("0.008"), "sft-v2": D("0.002"), "4": D("0.002"), "5": D("0.003"),
        "6": D("0.002"), "idle": D("28.696")}
    assert totals(lake, config, ["job_state"]) == {
        "TIMEOUT": D("0.087"), "COMPLETED": D("0.012"), "FAILED": D("0.002"), "CANCELLED": D("0.002"),
        "REQUEUED": D("0.001"), "idle": D("28.696")}
    # job_type from the comment's labels (jobs 2, 3), else the rules on name and partition
    assert totals(lake, config, ["team", "project", "job_type"]) == {
        ("pretrain", "llama-70b", "pretrain"): D("0.095"),
        ("posttrain", "sft-v2", "sft"): D("0.002"),
        ("pretrain", "unallocated", "debug"): D("0.002"),
        ("pretrain", "llama-8b", "pretrain"): D("0.003"),
        ("eval", "nightly-eval", "eval"): D("0.002"),
        ("platform", "unallocated", "idle"): D("28.696")}
    usage = cluster_usage(lake, config, HOUR)
    assert [(c.cluster, c.cost, c.idle) for c in usage.clusters] == [("spendlake", D("28.8"), D("28.696"))]
    assert usage.runs()[("5", "USD")][0] == D("0.003")
    assert all(r.ok for r in reconcile(lake, config))


@contextmanager
def host_zone(zone: str):
    """The process's local zone is `zone` (what `datetime.timestamp()` of a naive time reads)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = zone
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


@pytest.mark.parametrize("capture", ["sacct.json", "sacct-parsable2.txt"])
def test_an_attempt_in_a_snapshot_with_the_old_local_zone_ids_counts_once(tmp_path, capture):
    """A lake whose Slurm snapshots were written before 2026-12-03 on a host east of UTC: their
    record ids took the submit epoch in the host's zone (`int(submit.timestamp())` of the naive
    UTC time), today's take it in UTC. The same attempts in an old and a new snapshot count
    once: same GPU-hours, same cost, the rest idle, the bill tied out."""
    with host_zone("Asia/Kolkata"):  # UTC+05:30 all year
        lake, config = setup(tmp_path)
        expected = totals(lake, config, ["run"])
        [new] = (lake.root / "jobs" / "source=slurm").glob("snapshot_date=*/data.parquet")
        table = pq.read_table(new)
        old_ids = [f"{rid.rsplit('@', 1)[0]}@{int(submit.timestamp()) if submit else 0}"  # as the old code wrote them
                   for rid, submit in zip(table["record_id"].to_pylist(), table["submit_time"].to_pylist())]
        assert old_ids != table["record_id"].to_pylist()
        old = new.parent.parent / "snapshot_date=2026-12-01" / "data.parquet"
        old.parent.mkdir()
        pq.write_table(table.set_column(table.schema.get_field_index("record_id"), "record_id", pa.array(old_ids)),
                       old)
        config = reading(lake, capture)
        [outcome] = run_inventory(config, now=datetime(2026, 12, 3, 6))
        assert outcome.error is None
        assert totals(lake, config, ["run"]) == expected
        assert usage_runs(lake, config) == {"1": 87, "llama-70b-r1": 8, "sft-v2": 2, "4": 2, "5": 3, "6": 2}
        assert all(r.ok for r in reconcile(lake, config))


def usage_runs(lake, config) -> dict:
    """run → GPU-seconds, as `spendlake runs` counts them."""
    query = RunsQuery.parse(since="2026-12-02T01:00:00Z", until="2026-12-02T02:00:00Z")
    return {r.run: round(r.gpu_hours * 3600) for r in runs(lake, config, query).rows}
