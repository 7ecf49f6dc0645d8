"""Shared GPU clusters on Spark: `engine: spark` with `attribution.clusters` answers as DuckDB
does to the last decimal (jobs placed by instance ids, node tag (within their cluster, on a
replaced node's instances each for its hours) and cluster pool, an over-booked hour, MIG
slices, a daily line spread hourly, a running job, a job seen in two snapshots, inventory tags,
shared splits, EKS split rows, on demand and under a Savings Plan and a reservation), from the
raw lines and from the rollups DuckDB stored, and `--check` ties out alike."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from decimal import Decimal

import pytest
import yaml
from click.testing import CliRunner
from spark_support import require_pyspark
from test_clusters_eks import EXPORT as EKS_EXPORT
from test_clusters_eks_cur2 import docs_example_rows, write_export

from connectors.jobs_base import job_row
from service.attribution.api import attribute, materialise
from service.attribution.reconciliation import reconcile
from service.attribution.clusters import cluster_usage
from service.attribution.compute import RollupSession
from service.attribution.spark.session import SparkRollupSession
from service.cli.main import cli
from service.core.config import EngineConfig, parse_config
from service.core.lake import Lake
from service.core.timewindow import Window
from service.ingest.billing import ingest
from tests.attribution_helpers import add_jobs, declared_sources, line, make_lake

pytestmark = pytest.mark.slow  # a Spark JVM per module, seconds per query

SPARK = EngineConfig(kind="spark", master="local[2]")
EVERYTHING = Window(datetime(2026, 10, 1, tzinfo=timezone.utc), datetime(2027, 1, 1, tzinfo=timezone.utc))
# Cuts the clusters' hours (and so their job and idle parts) at both edges.
CUT = Window(datetime(2026, 11, 2, 10, 20, tzinfo=timezone.utc), datetime(2026, 11, 30, 23, 40, tzinfo=timezone.utc))
ATTRIBUTION = {
    "dimensions": {
        "team": {"tags": ["team", "owner-team"]},
        "project": {"tags": ["project", "account"]},
        "job_type": {"rules": [{"match": {"job_name": "^eval"}, "value": "eval"},
                               {"match": {"qos": "debug"}, "value": "debug"}]},
    },
    "shared": [{"match": {"charge_category": "Tax"}, "split": "proportional", "by": "team"},
               {"match": {"service": "AWSSupportBusiness"}, "split": "even", "by": "team"}],
    "clusters": {"cluster_tag": "cluster", "node_tag": "slurm-node"},
}
QUERIES = [
    dict(window=EVERYTHING, by=("run",)),
    dict(window=EVERYTHING, by=("team", "job_type"), granularity="day"),
    dict(window=CUT, by=("cluster", "job_state"), explain=True),
    dict(window=CUT, by=("project", "user"), cost="effective", granularity="week"),
    dict(window=EVERYTHING, by=("team",), where={"cluster": ("p5", "gpu-cluster", "llm-eks")}, cost="list", top=2,
         granularity="month"),
]


@pytest.fixture(scope="module", autouse=True)
def spark_available():
    require_pyspark()


def gpu(instance: str, start: str, cost: str = "80", *, end: str | None = None, instance_type: str = "p5.48xlarge",
        **tags: str) -> dict:
    return line(start, cost, end=end, resource=instance, instance_type=instance_type, list_cost=f"{cost}.5",
                tags={"team": "platform", **tags})


def job(record: str, gpus: float, start: str, end: str | None, **fields) -> dict:
    return job_row(record_id=f"p5/{record}", job_id=record, cluster=fields.pop("cluster", "p5"),
                   state=fields.pop("state", "COMPLETED"), start_time=datetime.fromisoformat(start),
                   end_time=datetime.fromisoformat(end) if end else None, gpus=float(gpus), **fields)


def handmade(root) -> tuple[Lake, dict]:
    """Every way a job meets an instance, two billing periods, inventory tags, shared lines."""
    hour = "2026-11-02T10:00:00"
    lines = [
        gpu("i-a", hour), gpu("i-b", hour),  # one job across two instances by instance id
        gpu("i-n", hour, **{"slurm-node": "p5-001"}),  # two jobs sharing an hour through the node tag
        gpu("i-p1", hour, cluster="p5"), gpu("i-p2", hour, cluster="p5"),  # the cluster pool
        gpu("i-login", hour, "1", instance_type="m5.large", cluster="p5"),  # no GPUs: not capacity
        gpu("i-o", hour),  # over-booked
        # two clusters that both have a g-001: a job named on it reaches its own cluster's only
        gpu("i-gw", hour, **{"slurm-node": "g-001", "cluster": "west"}),
        gpu("i-ge", hour, **{"slurm-node": "g-001", "cluster": "east"}),
        gpu("i-m", hour, "70", instance_type="p4d.24xlarge", **{"slurm-node": "a100-01"}),  # MIG slices
        # r-001 replaced while a job ran on it: the job on each instance for that instance's hours
        gpu("i-r-old", "2026-11-02T00:00:00", "520", end="2026-11-02T06:30:00", **{"slurm-node": "r-001"}),
        gpu("i-r-new", "2026-11-02T06:00:00", "480", end="2026-11-02T12:00:00", **{"slurm-node": "r-001"},
            cluster="west"),
        gpu("i-d", "2026-11-03T00:00:00", "1920", end="2026-11-04T00:00:00"),  # a daily line, spread hourly
        gpu("i-r", "2026-11-30T23:00:00"), gpu("i-r", "2026-12-01T00:00:00"),  # a running job across the month end
        line(hour, "80", resource="i-inv", instance_type="p5.48xlarge"),  # its team from the inventory tags
        line(hour, "5", resource="vol-1", tags={"team": "nlp"}),
        line(hour, "7", resource="vol-2", tags={"team": "vision"}),
        line(hour, "3", category="Tax"), line("2026-12-01T00:00:00", "2", category="Tax"),
        line(hour, "9", service="AWSSupportBusiness"),
        line("2026-12-01T00:00:00", "11", resource="vol-3", tags={"team": "nlp"}),
    ]
    lake = make_lake(root, lines)
    jobs = [
        job("span", 16, hour, "2026-11-02T10:30:00", instance_ids=["i-a", "i-b"], team="research"),
        job("n1", 4, hour, "2026-11-02T11:00:00", nodes=["p5-001"], labels={"team": "nlp"}, name="eval-mmlu"),
        job("n2", 2, "2026-11-02T10:15:00", "2026-11-02T10:45:00", nodes=["P5-001"], account="llama", qos="debug",
            user="ada", state="FAILED"),
        job("o1", 8, hour, "2026-11-02T11:00:00", instance_ids=["i-o"]),
        job("o2", 4, hour, "2026-11-02T10:30:00", instance_ids=["i-o"], state="CANCELLED"),
        job("gw", 8, hour, "2026-11-02T11:00:00", nodes=["g-001"], cluster="west"),
        job("ge", 4, hour, "2026-11-02T10:30:00", nodes=["g-001"], cluster="east"),
        job("rep", 8, "2026-11-02T02:00:00", "2026-11-02T10:00:00", nodes=["r-001"], cluster="west"),
        job("m3", 3 / 7, hour, "2026-11-02T11:00:00", nodes=["a100-01"]),
        job("m1", 1 / 7, hour, "2026-11-02T11:00:00", nodes=["a100-01"]),
        job("day", 8, "2026-11-03T10:00:00", "2026-11-03T12:00:00", instance_ids=["i-d"], run_id="pretrain-1"),
        job("inv", 2, hour, "2026-11-02T10:30:00", instance_ids=["i-inv"]),
    ]
    def pool(epoch: int) -> dict:  # no instance ids, no nodes: the p5 pool; a Slurm attempt whose record id
        # took the submit epoch in the host's zone before 2026-12-03, in UTC since: one job in both snapshots
        return job_row(record_id=f"p5/77@{epoch}", job_id="pool", scheduler="slurm", cluster="p5", state="COMPLETED",
                       submit_time=datetime.fromisoformat(hour), start_time=datetime.fromisoformat(hour),
                       end_time=datetime(2026, 11, 2, 11), gpus=4.0)

    add_jobs(lake, [*jobs, pool(1793593800), job("run", 4, "2026-11-30T23:30:00", None, instance_ids=["i-r"],
                                                 state="RUNNING")], snapshot="2026-11-30")
    add_jobs(lake, [*jobs, pool(1793613600), job("run", 4, "2026-11-30T23:30:00", "2026-12-01T00:30:00",
                                                 instance_ids=["i-r"], state="FAILED")],
             snapshot="2026-12-02")  # the newest snapshot wins
    con = lake.connect()
    lake.commit_snapshot(con, con.sql(
        "SELECT * FROM (VALUES ('arn:aws:ec2:us-east-1:111111111111:instance/i-inv', 'us-east-1', 'team', 'infra'), "
        "('arn:aws:ec2:us-east-1:111111111111:instance/i-zzz', 'us-east-1', 'team', 'other')) "
        "AS t(resource_id, region, key, value)"), table="resource_tags", source="tags", key="snapshot_date",
        value="2026-12-02")
    con.close()
    return lake, {"lake": str(lake.root), "sources": declared_sources(lake, inventory=True), "attribution": ATTRIBUTION}


def eks(root) -> tuple[Lake, dict]:
    """The CUR 2.0 export with EKS split rows (tests/data/cur2-eks-split)."""
    data = {"lake": str(root / "lake"), "sources": [{"name": "cur2", "kind": "aws-cur2", "location": str(EKS_EXPORT)}]}
    ingest(parse_config(data))
    return Lake(root / "lake"), {**data, "attribution": {"clusters": {"cluster_tag": "cluster"}}}


def eks_committed(root) -> tuple[Lake, dict]:
    """AWS's EKS worked example under a Savings Plan hour and a reservation hour (tests/test_clusters_eks_cur2.py)."""
    data = {"lake": str(root / "lake"), "sources": [
        {"name": "cur2", "kind": "aws-cur2", "location": str(write_export(root, "parquet", lines=docs_example_rows()))}]}
    ingest(parse_config(data))
    return Lake(root / "lake"), {**data, "attribution": {"clusters": {"cluster_tag": "cluster"}}}


@pytest.fixture(scope="module")
def handmade_lake(tmp_path_factory):
    return handmade(tmp_path_factory.mktemp("handmade"))


@pytest.fixture(scope="module")
def eks_lake(tmp_path_factory):
    return eks(tmp_path_factory.mktemp("eks"))


@pytest.fixture(scope="module")
def eks_committed_lake(tmp_path_factory):
    return eks_committed(tmp_path_factory.mktemp("eks-committed"))


@pytest.fixture(params=["handmade_lake", "eks_lake", "eks_committed_lake"])
def cluster_lake(request):
    """(lake, config data), without stored rollups of the config: each period is rolled up on Spark."""
    return request.getfixturevalue(request.param)


def both(lake, config, window, **query):
    duck = attribute(lake, config, window, **query)
    spark = attribute(lake, config, window, engine=SPARK, **query)
    return duck, spark


def assert_same_answers(lake, config):
    for query in QUERIES:
        query = dict(query)
        duck, spark = both(lake, config, query.pop("window"), **query)
        assert duck.rows
        assert spark.to_json() == duck.to_json(), query
        assert spark.overbooked == duck.overbooked
    checks = reconcile(lake, config, engine=SPARK)
    assert checks == reconcile(lake, config) and checks and all(c.ok for c in checks)


def test_the_same_cluster_allocation_from_the_raw_lines(cluster_lake):
    lake, data = cluster_lake
    config = parse_config(data)
    assert SparkRollupSession(lake, config.attribution, SPARK).files == []  # every period rolled up on Spark
    duck = attribute(lake, config, EVERYTHING, by=("run",), explain=True)
    placed = {c.how.split(":")[0] for row in duck.rows for c in row.explain}
    assert {"job", "idle"} <= placed  # the jobs and idle parts are there to compare
    assert_same_answers(lake, config)


def test_the_hand_computed_parts_on_spark(handmade_lake):
    lake, data = handmade_lake
    config = parse_config(data)
    runs = {row.values["run"]: row.cost for row in attribute(lake, config, EVERYTHING, by=("run",), engine=SPARK).rows}
    # as tests/test_clusters_allocation.py works them out: 16 GPUs on two instances for 30 min
    # ($80), 4 of 8 GPUs an hour ($40), 2 for 30 min ($10), over-booked 8·60 + 4·30 of 480 ($64, $16)
    assert (runs["span"], runs["n1"], runs["n2"], runs["o1"], runs["o2"]) == (80, 40, 10, 64, 16)
    # g-001 of west is gw's alone ($80); east's g-001 holds ge's 4 GPUs for 30 min ($20)
    assert (runs["gw"], runs["ge"]) == (80, 20)
    # r-001's old instance 02:00-06:00, its new one 06:00-10:00 (tests/test_job_sources_sharing_nodes.py)
    assert runs["rep"] == 640
    # the pool's Slurm job once, though its two snapshots hold two ids (as two jobs: 78.206896551718)
    duck = {row.values["run"]: row.cost for row in attribute(lake, config, EVERYTHING, by=("run",)).rows}
    assert runs["pool"] == duck["pool"] == Decimal("39.103448275859")
    assert attribute(lake, config, EVERYTHING, by=("run",), engine=SPARK).overbooked == 1
    on_spark = parse_config({**data, "engine": {"kind": "spark", "master": "local[2]"}})
    assert cluster_usage(lake, on_spark, EVERYTHING) == cluster_usage(lake, config, EVERYTHING)


def test_spark_reads_the_cluster_rollups_duckdb_stored(cluster_lake, tmp_path):
    lake, data = cluster_lake
    config = parse_config(data)
    materialise(lake, config)
    try:
        duck_files = RollupSession(lake, config.attribution).files
        spark = SparkRollupSession(lake, config.attribution, SPARK)
        # the job snapshots are part of the version: Spark finds DuckDB's files, none is rolled up again
        assert len(spark.files) == len(spark.partitions) == len(duck_files) >= 1
        assert sorted(f.rsplit("/", 1)[1] for f in spark.files) == sorted(f.name for f in duck_files)
        assert_same_answers(lake, config)
        path = tmp_path / "spendlake.yaml"
        path.write_text(yaml.safe_dump({**data, "engine": {"kind": "spark", "master": "local[2]"}}))
        on_spark = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--check", "--format", "json"])
        on_duck = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--engine", "duckdb", "--check",
                                           "--format", "json"])
        assert on_spark.exit_code == 0 and on_duck.exit_code == 0, on_spark.output + on_duck.output
        assert json.loads(on_spark.output) == json.loads(on_duck.output)
    finally:
        shutil.rmtree(lake.root / "attribution_rollup")


def test_a_job_a_later_window_left_out_ended_when_last_seen_on_spark(tmp_path):
    # tests/test_ended_jobs.py works it out: A $40, B $80, idle $280 (running on, A took $346.67)
    from tests.test_ended_jobs import B, ENDED, lake_seen_running, next_snapshot

    lake, config = lake_seen_running(tmp_path)
    next_snapshot(lake, [B])
    on_spark = attribute(lake, config, EVERYTHING, by=("run",), engine=SPARK)
    assert {row.values["run"]: row.cost for row in on_spark.rows if row.cost} == ENDED
    assert on_spark.to_json() == attribute(lake, config, EVERYTHING, by=("run",)).to_json()


def test_a_snapshot_of_files_after_a_window_ends_the_job_when_last_seen_on_spark(tmp_path):
    # tests/test_ended_jobs.py: slurm-jobs switched to sacct files not holding A ends it (A $40)
    from tests.attribution_helpers import add_jobs
    from tests.test_ended_jobs import B, ENDED, lake_seen_running

    lake, config = lake_seen_running(tmp_path)
    add_jobs(lake, [B], snapshot="2026-11-05")
    on_spark = attribute(lake, config, EVERYTHING, by=("run",), engine=SPARK)
    assert {row.values["run"]: row.cost for row in on_spark.rows if row.cost} == ENDED


def test_a_newer_record_without_the_end_an_older_one_holds_does_not_run_the_job_on_on_spark(tmp_path):
    # tests/test_ended_jobs.py: a daily re-read sacct dump holding A running, A ended at 11:00
    from tests.attribution_helpers import add_jobs
    from tests.test_clusters_allocation import job, setup
    from tests.test_ended_jobs import A, B, LINES
    from service.core.job_windows import window_fields

    lake, config = setup(tmp_path, LINES, [])
    done = job("A", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="a")
    add_jobs(lake, [done, B], snapshot="2026-11-03", facts=window_fields(datetime(2026, 11, 3, 8, tzinfo=timezone.utc), 48))
    add_jobs(lake, [A], source="slurm-dump", snapshot="2026-11-05")
    on_spark = attribute(lake, config, EVERYTHING, by=("run",), engine=SPARK)
    assert {row.values["run"]: row.cost for row in on_spark.rows if row.cost} == {"a": 80, "b": 80, "idle": 240}


def test_a_later_window_asking_otherwise_ends_the_job_when_last_seen_on_spark(tmp_path):
    # tests/test_ended_jobs.py: a snapshot asking otherwise, its window reaching back, ends A
    # when last seen (running on, it took $346.67)
    from tests.test_ended_jobs import ENDED, lake_asked_otherwise

    lake, config = lake_asked_otherwise(tmp_path, hours=24 * 3)
    on_spark = attribute(lake, config, EVERYTHING, by=("run",), engine=SPARK)
    assert {row.values["run"]: row.cost for row in on_spark.rows if row.cost} == ENDED
    assert on_spark.to_json() == attribute(lake, config, EVERYTHING, by=("run",)).to_json()


def test_a_pod_running_across_a_rename_of_its_sources_cluster_is_charged_once_on_spark(tmp_path):
    # tests/test_k8s_pods_uid_change.py: one pod (its uid) under either name, $40, idle $40
    from tests.test_k8s_pods_uid_change import HOUR, ONCE, RENAMED, renamed_lake

    for number, shape in enumerate(RENAMED):
        lake, config = renamed_lake(tmp_path / str(number), shape)
        on_spark = attribute(lake, config, HOUR, by=("run", "cluster"), engine=SPARK)
        assert {(row.values["run"], row.values["cluster"]): row.cost for row in on_spark.rows if row.cost} == ONCE
        assert on_spark.to_json() == attribute(lake, config, HOUR, by=("run", "cluster")).to_json()


def test_spark_reads_each_job_snapshot_record_once_a_query(tmp_path, monkeypatch):
    """Spark read every job snapshot's record four times a query (the check, the digest and the
    times of the rollups' version, the job_snapshots rows), a remote read each on S3; the
    record its check read now serves the others."""
    from service.attribution.spark.lake import SparkLake
    from tests.test_ended_jobs import B, ENDED, lake_seen_running, next_snapshot

    lake, config = lake_seen_running(tmp_path)
    next_snapshot(lake, [B])
    read, reads = SparkLake._record, []
    monkeypatch.setattr(SparkLake, "_record", lambda self, path: reads.append(path.getName()) or read(self, path))
    on_spark = attribute(lake, config, EVERYTHING, by=("run",), engine=SPARK)
    assert {row.values["run"]: row.cost for row in on_spark.rows if row.cost} == ENDED
    assert sorted(name for name in reads if name.startswith("snapshot_date=")) == [
        "snapshot_date=2026-11-02.json", "snapshot_date=2026-11-05.json"]


def test_two_pods_of_one_name_and_creation_in_two_clusters_of_one_source_stay_two_on_spark(tmp_path):
    # tests/test_k8s_pods_uid_change.py: c2's pod read by name beside c1's read by uid
    from tests.test_k8s_pods_uid_change import HOUR, TWO, two_clusters_lake

    lake, config = two_clusters_lake(tmp_path)
    on_spark = attribute(lake, config, HOUR, by=("run", "cluster"), engine=SPARK)
    assert {(row.values["run"], row.values["cluster"]): row.cost for row in on_spark.rows if row.cost} == TWO
    assert on_spark.to_json() == attribute(lake, config, HOUR, by=("run", "cluster")).to_json()
