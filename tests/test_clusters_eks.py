"""EKS split cost allocation data in CUR 2.0 (tests/data/cur2-eks-split, hand-made from AWS's
documented columns and worked example): the parent instance's dollars move onto its pods by
their split cost, the unused part onto the pods' cluster's idle; the bill's total stays."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from service.attribution import RunsQuery, attribute, cluster_usage, reconcile, runs
from service.core.config import parse_config
from service.core.lake import Lake
from service.core.timewindow import Window
from service.ingest.billing import ingest
from tests.conftest import DATA

EXPORT = DATA / "cur2-eks-split"
NOVEMBER = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
HOUR = Window(datetime(2026, 11, 2, 10, tzinfo=timezone.utc), datetime(2026, 11, 2, 11, tzinfo=timezone.utc))
D = Decimal


@pytest.fixture(scope="module")
def lake_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("eks")
    ingest(configured(root, clusters=None))
    return root


def configured(root, clusters: dict | None = {"cluster_tag": "cluster"}):  # noqa: B006 (read only)
    data = {"lake": str(root / "lake"), "sources": [{"name": "cur2", "kind": "aws-cur2", "location": str(EXPORT)}]}
    if clusters is not None:
        data["attribution"] = {"clusters": clusters}
    return parse_config(data)


def totals(lake, cfg, dims, window=NOVEMBER, cost="billed") -> dict:
    out: dict = {}
    for row in attribute(lake, cfg, window, by=tuple(dims), cost=cost).rows:
        key = tuple(row.values[d] for d in dims)
        out[key] = out.get(key, D(0)) + row.cost
    return {k: v for k, v in out.items() if v}


def test_the_split_columns_reach_the_lake_and_the_bill_is_unchanged(lake_dir):
    lake = Lake(lake_dir / "lake")
    con = lake.query()
    rows = con.execute("SELECT x_split_parent_resource_id, sum(x_split_cost), sum(x_split_unused_cost), "
                       "sum(BilledCost), count(*) FROM costs GROUP BY ALL ORDER BY ALL").fetchall()
    con.close()
    assert rows == [("i-0eks000000000001", D("9.73"), D("0.27"), D(0), 8), (None, None, None, D("23.5"), 3)]
    [entry] = lake.ledger()  # what `status` shows: the bill as delivered
    assert [(t.currency, t.rows, t.billed_cost, t.effective_cost) for t in entry.totals] == [
        ("USD", 11, D("23.5"), D("23.5"))]


def test_pods_take_their_split_cost_and_the_unused_cost_is_the_clusters_idle(lake_dir):
    lake, cfg = Lake(lake_dir / "lake"), configured(lake_dir)
    # the first hour: AWS's example, pods 1.85 + 2.35 (namespace1) and 3.18 + 2.35 (namespace2),
    # unused 0.27; the second hour (no pods) of this GPU instance of cluster gpu-cluster is idle
    assert totals(lake, cfg, ["team", "run", "job_type", "cluster"], HOUR) == {
        ("nlp", "namespace1-trainer", "pretrain", "gpu-cluster"): D("4.20"),
        ("eval", "namespace2-trainer", "eval", "gpu-cluster"): D("5.53"),
        ("platform", "idle", "idle", "gpu-cluster"): D("0.27"),
        ("data", "unallocated", "unallocated", "unallocated"): D("0.145833333333"),  # 3.50 / 24 of a daily line
    }
    assert totals(lake, cfg, ["job_type"]) == {("pretrain",): D("4.20"), ("eval",): D("5.53"),
                                               ("idle",): D("10.27"), ("unallocated",): D("3.5")}
    usage = cluster_usage(lake, cfg, NOVEMBER)
    assert sorted((j.job, j.cost) for j in usage.jobs) == [
        ("namespace1/pod1", D("1.85")), ("namespace1/pod3", D("2.35")), ("namespace2/pod2", D("3.18")),
        ("namespace2/pod4", D("2.35"))]
    assert [(c.cluster, c.cost, c.idle) for c in usage.clusters] == [("gpu-cluster", D(20), D("10.27"))]
    assert all(r.ok for r in reconcile(lake, cfg))


def test_the_bills_total_is_the_same_with_or_without_the_split(lake_dir):
    lake = Lake(lake_dir / "lake")
    for cfg in (configured(lake_dir), configured(lake_dir, clusters={"eks_split": False}), configured(lake_dir, None)):
        for cost in ("billed", "effective", "list"):
            assert attribute(lake, cfg, NOVEMBER, by=("team",), cost=cost).totals[0][1] == D("23.5")
        assert all(r.ok for r in reconcile(lake, cfg))
    # without the split (or without clusters), the instance's hour stays with its owner
    assert totals(lake, configured(lake_dir, clusters={"eks_split": False}), ["team"], HOUR) == {
        ("platform",): D(10), ("data",): D("0.145833333333")}
    # without a cluster tag, the hour with no pods stays with the owner too
    assert totals(lake, configured(lake_dir, clusters={}), ["team", "job_type"]) == {
        ("nlp", "pretrain"): D("4.20"), ("eval", "eval"): D("5.53"), ("platform", "idle"): D("0.27"),
        ("platform", "unallocated"): D(10), ("data", "unallocated"): D("3.5")}


def test_runs_of_pods_count_their_pods_and_the_instances_idle_share(lake_dir):
    # the instance's November: $20, of which $10.27 idle (its hour without pods and the pods'
    # unused cost): 0.5135 for both runs; pods have no job record, so no GPU-hours or state
    query = RunsQuery.parse(since="2026-11-01", until="2026-12-01")
    result = runs(Lake(lake_dir / "lake"), configured(lake_dir), query)
    assert [(r.run, r.jobs, r.cost, r.gpu_hours, r.state, r.idle_share) for r in result.rows] == [
        ("namespace2-trainer", 2, D("5.53"), None, None, D("0.5135")),
        ("namespace1-trainer", 2, D("4.20"), None, None, D("0.5135"))]


def test_a_pod_labelled_on_part_of_the_month_is_one_run_named_by_its_label(tmp_path):
    """AWS writes a pod's Kubernetes labels on its split rows only once their cost allocation
    tags are active (README "Shared GPU clusters"): a label added or activated mid-month is on
    the pod's later rows only. The pod is one run all month, named by the label wherever its rows
    in the window's billing period carry it, whatever the window (the label `llm-r1` sorts before
    the workload `trainer`: a per-row choice took the larger string, and a window of the labelled
    hour alone named the same pod `llm-r1`). Figures: p5 hour $80, the pod's split cost 6 of
    10 → $48 an hour, the unused 4 → $32 idle."""
    from tests.attribution_helpers import line
    from tests.test_clusters_allocation import by, gpu_line, setup

    arn = "arn:aws:eks:us-east-1:123456789012:pod/gpu-cluster/train/trainer-0/u-1"

    def pod_row(start: str, **labels: str) -> dict:
        return line(start, "0", resource=arn, service="Amazon Elastic Kubernetes Service", split_parent="i-e",
                    split_cost="6", split_unused="4",
                    tags={"aws:eks:cluster-name": "gpu-cluster", "aws:eks:workload-name": "trainer", **labels})

    hours = ("2026-11-02T10:00:00", "2026-11-02T11:00:00")
    lines = [*(gpu_line("i-e", start=h, cluster="gpu-cluster") for h in hours),
             pod_row(hours[0]), pod_row(hours[1], run="llm-r1")]
    lake, cfg = setup(tmp_path, lines, [], {"cluster_tag": "cluster"}, dimensions={"run": {"tags": ["run"]}})
    day = Window(datetime(2026, 11, 2, tzinfo=timezone.utc), datetime(2026, 11, 3, tzinfo=timezone.utc))
    assert by(lake, cfg, ["run"], day) == {"llm-r1": D(96), "idle": D(64)}
    for hour in (10, 11):
        start = datetime(2026, 11, 2, hour, tzinfo=timezone.utc)
        assert by(lake, cfg, ["run"], Window(start, start + timedelta(hours=1))) == {"llm-r1": D(48), "idle": D(32)}, hour
    assert all(r.ok for r in reconcile(lake, cfg))


def test_an_ecs_task_row_reads_as_its_task_in_its_cluster(tmp_path):
    """Split cost allocation data covers ECS tasks on EC2 too: line_item_resource_id is the task's
    ARN (`arn:aws:ecs:<region>:<account>:task/<cluster>/<task id>`), the parent its instance. The
    pod logic read the ARN's parts as a pod's (cluster/namespace/pod) and named the task's run and
    job `<task id>/`. Figures as above: $48 an hour to the task, $32 idle."""
    from tests.attribution_helpers import line
    from tests.test_clusters_allocation import by, gpu_line, setup

    task = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    row = line("2026-11-02T10:00:00", "0", resource=f"arn:aws:ecs:us-east-1:123456789012:task/gpu-cluster/{task}",
               service="Amazon Elastic Container Service", split_parent="i-e", split_cost="6", split_unused="4",
               tags={"aws:ecs:clusterName": "gpu-cluster"})
    lake, cfg = setup(tmp_path, [gpu_line("i-e", start="2026-11-02T10:00:00", cluster="gpu-cluster"), row], [],
                      {"cluster_tag": "cluster"}, dimensions={"run": {"tags": ["run"]}})
    assert by(lake, cfg, ["run", "cluster"], HOUR) == {(task, "gpu-cluster"): D(48), ("idle", "gpu-cluster"): D(32)}
    assert [(j.job, j.cost) for j in cluster_usage(lake, cfg, HOUR).jobs] == [(task, D(48))]
    assert all(r.ok for r in reconcile(lake, cfg))
