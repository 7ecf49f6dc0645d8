"""k8s-pods against a real Prometheus holding backfilled kube-state-metrics and DCGM exporter
series (as tests/test_inventory_gpu.py does for gpu-metrics): one row per GPU pod with its
GPUs (MIG slices as fractions), node and EC2 instance, times, state, labels, run and hourly
GPU use; pods without GPUs left out."""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_support import answering_prometheus, backfilled_prometheus, free_port

from service.cli.main import cli
from service.core.config import parse_config
from service.core.errors import ConfigError
from service.core.lake import Lake
from service.ingest.inventory import run_inventory

# Three days back: old enough to lie in backfilled blocks. kube-state-metrics is scraped
# every minute at :15 from H0 (01:00) to 06:59:15; the snapshot runs at 07:00.
DAY0 = (datetime.now(timezone.utc) - timedelta(days=3)).replace(hour=0, minute=0, second=0, microsecond=0)
H0 = DAY0 + timedelta(hours=1)
SCRAPES = 360
NOW = DAY0 + timedelta(hours=7)


def at(minute: int, second: int = 15) -> datetime:
    return (H0 + timedelta(minutes=minute, seconds=second)).replace(tzinfo=None)


# name, namespace, uid, node, scrapes listed (first, last), phases (phase, from scrape), gpu requests
# {container: (resource, count)}, init requests, labels, owner (kind, name), priority class, start scrape,
# completion (scrape, seconds before it), status reason (reason, from scrape), oom from scrape, restarts
PODS = [
    dict(pod="llama-70b-worker-0", ns="train", uid="u-w0", node="ip-10-0-1-1", listed=(0, 359),
         phases=[("Pending", 0), ("Running", 2), ("Succeeded", 180)], requests={"trainer": ("nvidia_com_gpu", 8),
         "sidecar": ("cpu", 1)}, labels={"run": "llama-70b-r1", "team": "pretrain", "app_kubernetes_io_name": "trainer"},
         owner=("Job", "llama-70b"), priority="train-high", start=2, completion=180),
    dict(pod="llama-70b-worker-1", ns="train", uid="u-w1", node="ip-10-0-1-2", listed=(0, 359),
         phases=[("Pending", 0), ("Running", 2), ("Failed", 120)], requests={"trainer": ("nvidia_com_gpu", 8)},
         labels={"run": "llama-70b-r1"}, owner=("Job", "llama-70b"), start=2, completion=120, oom=120, restarts=2),
    dict(pod="eval-mig", ns="eval", uid="u-em", node="ip-10-0-1-3", listed=(10, 359), phases=[("Running", 10)],
         requests={"a": ("nvidia_com_mig_1g_10gb", 2), "b": ("nvidia_com_mig_3g_40gb", 1)}, start=10),
    dict(pod="notebook", ns="debug", uid="u-nb", node="ip-10-0-1-1", listed=(5, 90), phases=[("Running", 5)],
         requests={"jupyter": ("nvidia_com_gpu", 1)}, owner=("<none>", "<none>"), start=5),  # deleted at 90
    dict(pod="frontend", ns="web", uid="u-fe", node="ip-10-0-1-1", listed=(0, 359), phases=[("Running", 0)],
         requests={"nginx": ("cpu", 2)}, start=0),  # no GPU: not a job here
    dict(pod="pending-big", ns="train", uid="u-pb", node="", listed=(0, 359), phases=[("Pending", 0)],
         requests={"trainer": ("nvidia_com_gpu", 16)}),
    dict(pod="trainer-0", ns="train", uid="u-t0a", node="ip-10-0-1-2", listed=(130, 210),
         phases=[("Running", 130), ("Failed", 200)], requests={"trainer": ("nvidia_com_gpu", 4)},
         owner=("StatefulSet", "trainer"), start=130, reason=("Evicted", 200)),
    dict(pod="trainer-0", ns="train", uid="u-t0b", node="ip-10-0-1-2", listed=(211, 359), phases=[("Pending", 211), ("Running", 212)],
         requests={"trainer": ("nvidia_com_gpu", 4)}, init={"warmup": ("nvidia_com_gpu", 8)},
         owner=("StatefulSet", "trainer"), start=212),
]
NODES = {"ip-10-0-1-1": "aws:///us-east-1a/i-0aaa1111bbbb2222c", "ip-10-0-1-2": "aws:///us-east-1a/i-0ddd3333eeee4444f",
         "ip-10-0-1-3": ""}


def labels(**values: str) -> str:
    return ",".join(f'{k}="{v}"' for k, v in values.items())


def openmetrics(pods: list[dict] = PODS, replaced: dict[str, tuple[int, str]] | None = None) -> str:
    """`replaced`: node → (scrape, provider id): from that scrape on, a new instance has the
    node's name (EKS names a node by its private IP); the old one went 10 scrapes before."""
    families: dict[str, list[str]] = {}

    def sample(name: str, series: str, value: float, scrape: int) -> None:
        families.setdefault(name, []).append(f"{name}{{{series}}} {value} {at(scrape).replace(tzinfo=timezone.utc).timestamp():.0f}")

    for pod in pods:
        key = dict(namespace=pod["ns"], pod=pod["pod"], uid=pod["uid"])
        first, last = pod["listed"]
        kind, owner = pod.get("owner", ("ReplicaSet", "rs"))
        for k in range(first, last + 1):
            sample("kube_pod_info", labels(**key, node=pod["node"], created_by_kind=kind, created_by_name=owner,
                                           priority_class=pod.get("priority", ""), host_ip="10.0.1.9"), 1, k)
            sample("kube_pod_labels", labels(**key, **{f"label_{n}": v for n, v in pod.get("labels", {}).items()}), 1, k)
            sample("kube_pod_created", labels(**key), at(first, 0).replace(tzinfo=timezone.utc).timestamp(), k)
            if pod.get("start") is not None and k >= pod["start"]:
                sample("kube_pod_start_time", labels(**key), at(pod["start"], 0).replace(tzinfo=timezone.utc).timestamp(), k)
            if pod.get("completion") is not None and k >= pod["completion"]:
                done = at(pod["completion"], 0) - timedelta(seconds=20)
                sample("kube_pod_completion_time", labels(**key), done.replace(tzinfo=timezone.utc).timestamp(), k)
            current = [phase for phase, since in pod["phases"] if since <= k][-1]
            for phase in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
                sample("kube_pod_status_phase", labels(**key, phase=phase), int(phase == current), k)
            if pod.get("reason") and k >= pod["reason"][1]:
                sample("kube_pod_status_reason", labels(**key, reason=pod["reason"][0]), 1, k)
            for container, (resource, count) in pod["requests"].items():
                unit = "core" if resource == "cpu" else "integer"
                sample("kube_pod_container_resource_requests", labels(**key, container=container, node=pod["node"],
                                                                      resource=resource, unit=unit), count, k)
                sample("kube_pod_container_status_restarts_total", labels(**key, container=container),
                       pod.get("restarts", 0), k)
                if pod.get("oom") is not None and k >= pod["oom"]:
                    sample("kube_pod_container_status_terminated_reason",
                           labels(**key, container=container, reason="OOMKilled"), 1, k)
            for container, (resource, count) in pod.get("init", {}).items():
                sample("kube_pod_init_container_resource_requests",
                       labels(**key, container=container, node=pod["node"], resource=resource, unit="integer"), count, k)
                sample("kube_pod_init_container_info", labels(**key, container=container, image="img", restart_policy=(
                    "Always" if container in pod.get("sidecars", ()) else "")), 1, k)
    for k in range(SCRAPES):
        for node, provider in NODES.items():
            since, instead = (replaced or {}).get(node, (SCRAPES, provider))
            if since - 10 <= k < since:
                continue
            sample("kube_node_info", labels(node=node, provider_id=instead if k >= since else provider,
                                            kernel_version="6.1"), 1, k)
        # DCGM, through a ServiceMonitor: the exporter's own pod/namespace, the GPU's pod as exported_*
        exporter = dict(namespace="gpu-operator", pod="dcgm-exporter-x7k2p", Hostname="ip-10-0-1-1")
        if 2 <= k < 180:
            sample("DCGM_FI_PROF_SM_ACTIVE", labels(gpu="0", **exporter, exported_namespace="train",
                                                    exported_pod="llama-70b-worker-0"), 0.5 if k < 60 else 0.9, k)
            sample("DCGM_FI_PROF_SM_ACTIVE", labels(gpu="1", **exporter, exported_namespace="train",
                                                    exported_pod="llama-70b-worker-0"), 0.7, k)
        sample("DCGM_FI_PROF_SM_ACTIVE", labels(gpu="2", **exporter), 0.0, k)  # a GPU no pod holds
        if k >= 10:  # scraped with honor_labels: pod/namespace are the GPU's pod
            sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels(gpu="0", GPU_I_ID="1", namespace="eval", pod="eval-mig"), 0.25, k)
    lines = []
    for name, samples in families.items():
        lines += [f"# TYPE {name} gauge", *samples]
    return "\n".join(lines) + "\n# EOF\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus"), openmetrics()) as url:
        yield url


def snapshot(tmp_path: Path, **source):
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "k8s", "kind": "k8s-pods", "cluster": "eks-p5", **source}]})
    [outcome] = run_inventory(config, now=NOW)
    return outcome


def jobs(tmp_path: Path, columns: str) -> list[tuple]:
    con = Lake(tmp_path / "lake").query()
    try:
        return con.execute(f"SELECT {columns} FROM jobs ORDER BY record_id").fetchall()
    finally:
        con.close()


@pytest.mark.binary
def test_gpu_pods_become_jobs(tmp_path, prometheus):
    outcome = snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8)
    assert outcome.error is None, outcome.error
    day = NOW.date().isoformat()
    assert outcome.rows == {f"jobs snapshot_date={day}": 7}
    rows = jobs(tmp_path, "record_id, job_id, run_id, state, submit_time, start_time, end_time, gpus, nodes, "
                          "instance_ids, restarts, qos")
    w0, w1 = ["i-0aaa1111bbbb2222c"], ["i-0ddd3333eeee4444f"]
    assert rows == [
        ("eks-p5/u-em", "eval/eval-mig", "eval/rs", "RUNNING", at(10, 0), at(10, 0), None,
         pytest.approx(5 / 7), ["ip-10-0-1-3"], None, 0, None),  # 2 × 1g.10gb + 3g.40gb; a node without an EC2 id
        ("eks-p5/u-nb", "debug/notebook", "debug/notebook", "CANCELLED", at(5, 0), at(5, 0), at(90), 1.0,
         ["ip-10-0-1-1"], w0, 0, None),  # deleted while running: ends at the last scrape that listed it
        ("eks-p5/u-pb", "train/pending-big", "train/rs", "PENDING", at(0, 0), None, None, 16.0, None, None, 0, None),
        ("eks-p5/u-t0a", "train/trainer-0", "train/trainer", "PREEMPTED", at(130, 0), at(130, 0), at(200), 4.0,
         ["ip-10-0-1-2"], w1, 0, None),  # evicted: Failed first seen at scrape 200, then deleted
        ("eks-p5/u-t0b", "train/trainer-0", "train/trainer", "RUNNING", at(211, 0), at(212, 0), None, 8.0,
         ["ip-10-0-1-2"], w1, 0, None),  # the init container's 8 GPUs outweigh the containers' 4
        ("eks-p5/u-w0", "train/llama-70b-worker-0", "llama-70b-r1", "COMPLETED", at(0, 0), at(2, 0),
         at(180, 0) - timedelta(seconds=20), 8.0, ["ip-10-0-1-1"], w0, 0, "train-high"),
        ("eks-p5/u-w1", "train/llama-70b-worker-1", "llama-70b-r1", "OUT_OF_MEMORY", at(0, 0), at(2, 0),
         at(120, 0) - timedelta(seconds=20), 8.0, ["ip-10-0-1-2"], w1, 2, None),
    ]
    # a window source: its snapshot's record keeps when it was taken and from when it read
    record = json.loads((tmp_path / f"lake/_ledger/snapshots/jobs/source=k8s/snapshot_date={day}.json").read_text())
    assert (record["taken_at"], record["window_start"]) == (NOW.isoformat(), (NOW - timedelta(hours=8)).isoformat())


@pytest.mark.binary
def test_labels_namespace_and_hourly_gpu_use(tmp_path, prometheus):
    assert snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8).error is None
    rows = {r[0]: r[1:] for r in jobs(tmp_path, "record_id, scheduler, cluster, namespace, name, labels, "
                                                "gpu_util_hourly")}
    hour = H0.replace(tzinfo=None)
    assert rows["eks-p5/u-w0"] == (
        "kubernetes", "eks-p5", "train", "llama-70b-worker-0",
        {"run": "llama-70b-r1", "team": "pretrain", "app_kubernetes_io_name": "trainer"},
        # SM active of its two GPUs, from the exporter's exported_pod: (50 + 70) / 2, then (90 + 70) / 2
        {hour: pytest.approx(60.0), hour + timedelta(hours=1): pytest.approx(80.0),
         hour + timedelta(hours=2): pytest.approx(80.0)})
    # eval-mig has no SM active series: its graphics engine activity (pod/namespace labels), as percent
    assert rows["eks-p5/u-em"][5] == {hour + timedelta(hours=h): pytest.approx(25.0) for h in range(6)}
    assert rows["eks-p5/u-nb"][4:] == (None, None)


@pytest.mark.binary
def test_dcgm_exporters_old_pod_label_names_give_the_same_gpu_use(tmp_path):
    """dcgm-exporter --use-old-namespace (DCGM_EXPORTER_USE_OLD_NAMESPACE) names the GPU's pod
    `pod_name`/`pod_namespace`; scraped through a ServiceMonitor, `pod` is the exporter's own, so
    every pod's use read as the exporter's (gpu_util_hourly NULL), without a word."""
    text = openmetrics().replace("exported_namespace=", "pod_namespace=").replace("exported_pod=", "pod_name=")
    text = text.replace('GPU_I_ID="1",namespace="eval",pod="eval-mig"',
                        'GPU_I_ID="1",pod_namespace="eval",pod_name="eval-mig"')
    assert "exported_pod" not in text and 'pod_name="eval-mig"' in text
    with backfilled_prometheus(tmp_path, text) as url:
        assert snapshot(tmp_path, prometheus_url=url, lookback_hours=8).error is None
    use = dict(jobs(tmp_path, "record_id, gpu_util_hourly"))
    hour = H0.replace(tzinfo=None)
    # as with exported_pod: worker-0's two GPUs (50 + 70) / 2, then (90 + 70) / 2; eval-mig's engine 25%
    assert use["eks-p5/u-w0"] == {hour: pytest.approx(60.0), hour + timedelta(hours=1): pytest.approx(80.0),
                                  hour + timedelta(hours=2): pytest.approx(80.0)}
    assert use["eks-p5/u-em"] == {hour + timedelta(hours=h): pytest.approx(25.0) for h in range(6)}


@pytest.mark.binary
def test_a_node_name_a_later_instance_took_keeps_each_pod_on_its_own_instance(tmp_path):
    """ip-10-0-1-2's instance went at scrape 240 and a new one came up under the same name (its
    private IP) at 250: the pods that ran before are on the old instance, the pod after on the
    new one (every pod of the node was put on whichever instance the answer listed last)."""
    after = dict(pod="after-0", ns="train", uid="u-af", node="ip-10-0-1-2", listed=(255, 359), phases=[("Running", 255)],
                 requests={"trainer": ("nvidia_com_gpu", 8)}, start=255)
    pods = [pod for pod in PODS if pod["uid"] != "u-t0b"] + [after]
    with backfilled_prometheus(tmp_path, openmetrics(pods, {"ip-10-0-1-2": (250, "aws:///us-east-1a/i-0bbb5555cccc6666d")})) as url:
        assert snapshot(tmp_path, prometheus_url=url, lookback_hours=8).error is None
    assert [row for row in jobs(tmp_path, "record_id, nodes, instance_ids") if row[1] == ["ip-10-0-1-2"]] == [
        ("eks-p5/u-af", ["ip-10-0-1-2"], ["i-0bbb5555cccc6666d"]),
        ("eks-p5/u-t0a", ["ip-10-0-1-2"], ["i-0ddd3333eeee4444f"]),
        ("eks-p5/u-w1", ["ip-10-0-1-2"], ["i-0ddd3333eeee4444f"])]


@pytest.mark.binary
def test_gpu_resources_spelled_as_kubernetes_names_them_are_read_alike(tmp_path, prometheus):
    """kube-state-metrics labels nvidia.com/gpu `nvidia_com_gpu`; series that keep the Kubernetes
    name (`nvidia.com/gpu`, a MIG slice `nvidia.com/mig-1g.10gb`, or half of it) give the same rows
    (their pods were left out as asking for no GPU)."""
    assert snapshot(tmp_path / "labels", prometheus_url=prometheus, lookback_hours=8).error is None
    text = (openmetrics().replace('resource="nvidia_com_gpu"', 'resource="nvidia.com/gpu"')
            .replace('resource="nvidia_com_mig_1g_10gb"', 'resource="nvidia.com/mig-1g.10gb"')
            .replace('resource="nvidia_com_mig_3g_40gb"', 'resource="nvidia_com_mig-3g.40gb"'))
    assert 'resource="nvidia_com' not in text.replace("nvidia_com_mig-3g", "")
    with backfilled_prometheus(tmp_path, text) as url:
        assert snapshot(tmp_path / "names", prometheus_url=url, lookback_hours=8).error is None
    columns = "record_id, state, start_time, end_time, gpus, nodes, instance_ids"
    assert jobs(tmp_path / "names", columns) == jobs(tmp_path / "labels", columns)
    assert len(jobs(tmp_path / "names", columns)) == 7


@pytest.mark.binary
def test_pods_without_labels_say_the_kube_state_metrics_allowlist_once(tmp_path, prometheus, caplog):
    """kube-state-metrics v2 gives kube_pod_labels only the labels --metric-labels-allowlist names,
    none by default: every pod's team and run fell to the default without a word. Said as a
    warning on every (hourly) run, it buried the warnings an operator who takes team from
    namespace rules could act on: now a warning once, INFO while it lasts, a warning again
    after the pods had labels."""
    text = "\n".join(re.sub(r',label_[^=]+="[^"]*"', "", line) if line.startswith("kube_pod_labels") else line
                     for line in openmetrics().splitlines()) + "\n"

    def said() -> list[tuple[int, str]]:
        told = [(r.levelno, r.getMessage()) for r in caplog.records if "--metric-labels-allowlist" in r.getMessage()]
        caplog.clear()
        return told

    caplog.set_level(logging.INFO)
    with backfilled_prometheus(tmp_path, text) as url:
        assert snapshot(tmp_path, prometheus_url=url, lookback_hours=8).error is None
        [(level, first)] = said()
        assert level == logging.WARNING
        assert first.startswith("inventory source k8s: none of the 7 GPU pod(s) has a label in kube_pod_labels")
        assert "start it with --metric-labels-allowlist=pods=[team,project,run]" in first
        assert snapshot(tmp_path, prometheus_url=url, lookback_hours=8).error is None
        [(level, again)] = said()
        assert level == logging.INFO and "said as a warning at 20" in again
        assert snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8).error is None
        assert said() == []
        assert snapshot(tmp_path, prometheus_url=url, lookback_hours=8).error is None
        assert [level for level, _ in said()] == [logging.WARNING]


@pytest.mark.binary
def test_only_the_configured_namespaces_and_no_dcgm(tmp_path, prometheus):
    assert snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8, namespaces=["eval", "debug"],
                    dcgm_metrics=[]).error is None
    assert jobs(tmp_path, "job_id, gpu_util_hourly") == [("eval/eval-mig", None), ("debug/notebook", None)]


@pytest.mark.binary
def test_a_window_without_gpu_pods_stores_zero_rows(tmp_path, prometheus, caplog):
    outcome = snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8, namespaces=["web"])
    assert outcome.error is None and list(outcome.rows.values()) == [0]
    assert not [r for r in caplog.records if "held no pod" in r.getMessage()]  # web's pods ask for no GPU


@pytest.mark.binary
def test_a_configured_namespace_no_pod_is_in_is_warned_naming_the_key(tmp_path, prometheus, caplog):
    outcome = snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8, namespaces=["trian", "eval"])
    assert outcome.error is None and list(outcome.rows.values()) == [1]  # eval-mig, read as before
    [said] = [r.getMessage() for r in caplog.records if "held no pod" in r.getMessage()]
    assert said.startswith("k8s (inventory[0]): namespaces trian held no pod from ")
    assert said.endswith("the namespaces seen: debug, eval, train, web; check inventory[0].namespaces for a typo")


@pytest.mark.binary
def test_a_cluster_label_no_series_carries_is_warned_naming_the_key_and_the_labels_carried(tmp_path, prometheus, caplog):
    """A cluster_label no kube_pod_info series carries (here k8s_cluster: the series carry no
    cluster label at all) put every pod in `cluster` without a word; the pods are read as before."""
    outcome = snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8, cluster_label="k8s_cluster")
    assert outcome.error is None and list(outcome.rows.values()) == [7]
    assert {cluster for (cluster,) in jobs(tmp_path, "DISTINCT cluster")} == {"eks-p5"}
    [said] = [r.getMessage() for r in caplog.records if "cluster_label" in r.getMessage()]
    assert said.startswith("k8s (inventory[0]): cluster_label k8s_cluster is on no kube_pod_info series from ")
    assert said.endswith("UTC, so every pod is read as of cluster eks-p5 (inventory[0].cluster); the labels its series "
                         "carry: created_by_kind, created_by_name, host_ip, namespace, node, pod, priority_class, uid; "
                         "check inventory[0].cluster_label")



@pytest.mark.binary
def test_a_failing_query_for_the_labels_carried_does_not_fail_a_source_whose_pods_were_read(tmp_path, prometheus,
                                                                                             caplog, monkeypatch):
    """review49 #8: the labels-carried query only words the warning; its SourceError failed the
    source (exit 3) though every pod had been read."""
    from connectors.k8s_pods import K8sPodsConnector
    from service.core.errors import SourceError

    asked = K8sPodsConnector._query

    def failing_topk(self, query, *args):
        if query.startswith("topk("):
            raise SourceError("HTTP 503 after 1 attempt(s)", where=f"{prometheus}/api/v1/query_range")
        return asked(self, query, *args)

    monkeypatch.setattr(K8sPodsConnector, "_query", failing_topk)
    outcome = snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8, cluster_label="k8s_cluster")
    assert outcome.error is None and list(outcome.rows.values()) == [7]
    [said] = [r.getMessage() for r in caplog.records if "cluster_label" in r.getMessage()]
    assert said.endswith("the labels its series carry: not read (HTTP 503 after 1 attempt(s)); "
                         "check inventory[0].cluster_label"), said

@pytest.mark.binary
def test_a_cluster_label_some_series_carry_is_not_warned(tmp_path, caplog):
    """Series of one cluster carrying the label, another's not (relabelled in one scrape config
    only): those without it are `cluster`'s, as configured, and nothing is said."""
    text = openmetrics(PODS[:1]).replace('kube_pod_info{namespace=', 'kube_pod_info{k8s_cluster="east",namespace=')
    with backfilled_prometheus(tmp_path, text) as url:
        outcome = snapshot(tmp_path, prometheus_url=url, lookback_hours=8, cluster_label="k8s_cluster", dcgm_metrics=[])
    assert outcome.error is None
    assert not [r for r in caplog.records if "cluster_label" in r.getMessage()]


def inventory_cli(tmp_path: Path, url: str):
    (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "k8s", "kind": "k8s-pods", "prometheus_url": url, "max_attempts": 1, "timeout_seconds": 5}]}))
    return CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory"])


def test_42_an_unreachable_prometheus_exits_3_naming_it(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    result = inventory_cli(tmp_path, url)
    assert result.exit_code == 3 and f"{url}/api/v1/query_range: cannot reach it after 1 attempt(s)" in result.output
    assert "check inventory[0].prometheus_url" in result.output


@pytest.mark.binary
def test_42_a_prometheus_without_kube_state_metrics_exits_3_naming_it(tmp_path):
    series = "\n".join(f"up{{job=\"node\"}} 1 {(NOW - timedelta(hours=2, minutes=m)).timestamp():.0f}"
                       for m in range(60, 0, -1))
    with backfilled_prometheus(tmp_path, f"# TYPE up gauge\n{series}\n# EOF\n") as url:
        result = inventory_cli(tmp_path, url)
    assert result.exit_code == 3, result.output
    assert f"{url}: no kube-state-metrics series (kube_pod_info) from" in result.output
    assert "check that this Prometheus scrapes kube-state-metrics" in result.output
    assert not list((tmp_path / "lake").glob("jobs/*/*/*.parquet"))


@pytest.mark.slow
@pytest.mark.binary
def test_a_long_window_is_asked_for_in_pieces_and_gives_the_same_rows(tmp_path, prometheus):
    """Ten days at one-minute steps is 14,400 points a series: more than Prometheus answers at once."""
    assert snapshot(tmp_path / "short", prometheus_url=prometheus, lookback_hours=8).error is None
    assert snapshot(tmp_path / "long", prometheus_url=prometheus, lookback_hours=240).error is None
    columns = "record_id, state, start_time, end_time, gpus, gpu_util_hourly"
    assert jobs(tmp_path / "long", columns) == jobs(tmp_path / "short", columns)


@pytest.mark.parametrize("source, says", [
    ({}, "inventory[0].prometheus_url: is required but missing"),
    ({"prometheus_url": "http://p:9090", "path": "/x"}, "inventory[0].path: kind k8s-pods takes no such key"),
    ({"prometheus_url": "http://p:9090", "namespaces": ['a"|.*']}, "inventory[0].namespaces[0]: must be a Kubernetes namespace"),
    ({"prometheus_url": "http://p:9090", "cluster_label": "cluster-name"}, "inventory[0].cluster_label: must be a label name"),
    ({"prometheus_url": "http://p:9090", "dcgm_metrics": ["DCGM_FI_DEV_FB_USED"]}, "inventory[0].dcgm_metrics[0]: must be one of DCGM_FI_PROF_SM_ACTIVE, "),
])
def test_bad_config_is_exit_2_with_the_dotted_path(source, says):
    with pytest.raises(ConfigError) as error:
        parse_config({"inventory": [{"name": "k8s", "kind": "k8s-pods", **source}]})
    assert says in str(error.value)


def test_one_prometheus_over_many_clusters_keeps_them_apart():
    """cluster_label: the same pod name and uid in two clusters are two records, and a pod is
    deleted only when its own cluster's kube-state-metrics went on reporting without it."""
    from connectors.k8s_pod_records import PodTable

    def series(cluster: str, values: list[float], **labels: str) -> dict:
        return {"metric": {"k8s_cluster": cluster, "namespace": "train", "pod": "w-0", "uid": "u1", **labels},
                "values": [(100 + n, v) for n, v in enumerate(values)]}

    table = PodTable("k8s_cluster", "fallback")
    table.add_requests([series("east", [1], resource="nvidia_com_gpu"),  # one GPU requested
                        series("west", [1], resource="nvidia_com_mig_1g_10gb")])
    table.add_info([series("east", [100, 160], node="n1"), series("west", [100, 160], node="n9")])
    table.add_phases([series("east", [100, 160], phase="Running"), series("west", [100, 160], phase="Running")])
    table.add_reported([{"metric": {"k8s_cluster": "east"}, "values": [(760, 760)]},
                        {"metric": {"k8s_cluster": "west"}, "values": [(160, 160)]}])
    rows = sorted(table.rows(("run",)), key=lambda r: r["record_id"])
    assert [(r["record_id"], r["cluster"], r["state"], r["gpus"], r["nodes"]) for r in rows] == [
        ("east/u1", "east", "CANCELLED", 1.0, ["n1"]), ("west/u1", "west", "RUNNING", 1 / 7, ["n9"])]



def test_an_init_container_sets_the_pods_request_per_resource():
    """Kubernetes reserves, per resource, the larger of the containers' sum and the largest init
    container's request: an init container's MIG slice is held beside the containers' GPUs (the
    larger total of the two sides was taken: 2 GPUs, not 2 + 3/7)."""
    from connectors.k8s_pod_records import PodTable

    def series(values: list[float], **labels: str) -> dict:
        return {"metric": {"namespace": "train", "pod": "w-0", "uid": "u1", **labels},
                "values": [(100 + 60 * n, v) for n, v in enumerate(values)]}

    table = PodTable(None, "p5")
    table.add_requests([series([2], resource="nvidia_com_gpu")])
    table.add_requests([series([1], resource="nvidia_com_mig_3g_40gb"), series([1], resource="nvidia_com_gpu")],
                       init=True)
    table.add_phases([series([100], phase="Running")])
    [row] = table.rows(())
    assert row["gpus"] == pytest.approx(2 + 3 / 7)



def test_a_pod_finished_before_the_window_without_a_completion_time_ends_at_its_start(caplog):
    """A pod Failed (or Succeeded) from the first scrape that listed it in the window, with no
    kube_pod_completion_time (its containers never ran: a GPU pod failed by UnexpectedAdmissionError
    stays listed until deleted), ended at a time the window does not hold, perhaps days before: it
    ends at its start, holding no GPU time, said once, as jobs_base.ended_at_start ends a scheduler
    file's finished job without an end, where it ended at the window's first scrape (its 8 GPUs held
    from 1,000 s to 10,000 s). A pod seen Running, then Failed, in the window still ends at the first
    Failed scrape; one with a completion time at that time."""
    from connectors.jobs_base import from_epoch
    from connectors.k8s_pod_records import PodTable

    def series(pod: str, values: list[float], **labels: str) -> dict:
        return {"metric": {"namespace": "train", "pod": pod, "uid": f"u-{pod}", **labels},
                "values": [(10_000 + 60 * n, v) for n, v in enumerate(values)]}

    table = PodTable(None, "p5")
    table.add_requests([series(pod, [8], resource="nvidia_com_gpu") for pod in ("admit", "evicted", "done")])
    table.add_times([series("admit", [1_000] * 3), series("evicted", [9_000] * 3), series("done", [9_000] * 3)],
                    "started")
    table.add_times([series("done", [9_500] * 3)], "completed")
    table.add_phases([series("admit", [10_000, 10_060, 10_120], phase="Failed"),
                      series("evicted", [10_000], phase="Running"),
                      series("evicted", [10_060, 10_120], phase="Failed"),
                      series("done", [10_000, 10_060, 10_120], phase="Succeeded")])
    with caplog.at_level(logging.WARNING):
        rows = {row["job_id"]: row for row in table.rows(())}
    assert {job: (row["state"], row["start_time"], row["end_time"]) for job, row in rows.items()} == {
        "train/admit": ("FAILED", from_epoch(1_000), from_epoch(1_000)),
        "train/evicted": ("FAILED", from_epoch(9_000), from_epoch(10_060)),
        "train/done": ("COMPLETED", from_epoch(9_000), from_epoch(9_500))}
    [said] = [r.getMessage() for r in caplog.records if "completion" in r.getMessage()]
    assert said.startswith("1 pod(s) were Succeeded or Failed from the first scrape that listed them"), said
    assert "train/admit (FAILED)" in said and "counted as ending at its start" in said


@pytest.mark.binary
def test_a_sidecars_gpus_add_to_the_containers(tmp_path):
    """A sidecar, an init container with restartPolicy Always (kube-state-metrics' restart_policy
    label), runs beside the containers: the scheduler reserves its GPUs on top of theirs, 4 + 2,
    more than the 5 of the init container before them (the sidecar was read as an init container:
    5 GPUs)."""
    rollout = dict(pod="rl-0", ns="train", uid="u-rl", node="ip-10-0-1-1", listed=(0, 359), phases=[("Running", 0)],
                   requests={"trainer": ("nvidia_com_gpu", 4)}, sidecars={"rollout"}, start=0,
                   init={"warmup": ("nvidia_com_gpu", 5), "rollout": ("nvidia_com_gpu", 2)})
    with backfilled_prometheus(tmp_path, openmetrics([rollout])) as url:
        assert snapshot(tmp_path, prometheus_url=url, lookback_hours=8, dcgm_metrics=[]).error is None
    assert jobs(tmp_path, "job_id, gpus") == [("train/rl-0", 6.0)]


def two_replicas(text: str) -> str:
    """Every kube-state-metrics sample as a Prometheus scraping two replicas (HA, or the old and
    new pod of a rollout) stores it: twice, told apart by `instance`."""
    lines = []
    for line in text.splitlines():
        if line.startswith("kube_"):
            name, rest = line.split("{", 1)
            lines += [f'{name}{{instance="10.0.0.{n}:8080",job="kube-state-metrics",{rest}' for n in (1, 2)]
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


@pytest.mark.binary
def test_two_kube_state_metrics_replicas_count_each_pod_once(tmp_path, prometheus):
    """A pod's requests and restarts are summed over its containers, not over the replicas
    that report them: 8 GPUs stay 8, 2 restarts stay 2."""
    assert snapshot(tmp_path / "one", prometheus_url=prometheus, lookback_hours=8).error is None
    with backfilled_prometheus(tmp_path, two_replicas(openmetrics())) as url:
        outcome = snapshot(tmp_path / "two", prometheus_url=url, lookback_hours=8)
    assert outcome.error is None, outcome.error
    columns = "record_id, run_id, state, submit_time, start_time, end_time, gpus, nodes, instance_ids, restarts, labels"
    assert jobs(tmp_path / "two", columns) == jobs(tmp_path / "one", columns)

@pytest.mark.binary
def test_a_prometheus_with_a_low_max_samples_is_asked_in_smaller_pieces(tmp_path, prometheus):
    """--query.max-samples=2000: the 8 hours at one-minute steps of the phases (5 series a pod)
    is over it; the halves of halves are not, and give the rows the whole range gives."""
    assert snapshot(tmp_path / "whole", prometheus_url=prometheus, lookback_hours=8).error is None
    with backfilled_prometheus(tmp_path, openmetrics(), ["--query.max-samples=2000"]) as url:
        outcome = snapshot(tmp_path / "pieces", prometheus_url=url, lookback_hours=8)
    assert outcome.error is None, outcome.error
    columns = "record_id, state, submit_time, start_time, end_time, gpus, nodes, instance_ids, labels, gpu_util_hourly"
    assert jobs(tmp_path / "pieces", columns) == jobs(tmp_path / "whole", columns)


@pytest.mark.binary
def test_a_query_over_max_samples_even_for_one_step_fails_saying_so(tmp_path):
    with backfilled_prometheus(tmp_path, openmetrics(), ["--query.max-samples=1"]) as url:
        outcome = snapshot(tmp_path, prometheus_url=url, lookback_hours=8)
    assert "too many samples" in str(outcome.error) and "raise Prometheus's --query.max-samples" in str(outcome.error)
    assert not list((tmp_path / "lake").glob("jobs/*/*/*.parquet"))


@pytest.mark.parametrize("warning, code", [("No StoreAPIs matched for this query", 3),
                                           ("PromQL info: metric might not be a counter", 0)])
def test_an_answer_with_warnings_is_partial_and_exits_3(tmp_path, warning, code):
    """Thanos (a store down) and Prometheus (a remote-read endpoint down) answer `success` with
    `warnings` and without that store's series: pods left out would put their cost on idle.
    Prometheus 2.5x's notes on a query (`PromQL info:`) among them are no such thing."""
    asked: list[dict] = []
    series = {"metric": {}, "values": [[NOW.timestamp() - 60, str(NOW.timestamp() - 60)]]}
    answer = {"status": "success", "data": {"resultType": "matrix", "result": [series]}, "warnings": [warning]}
    with answering_prometheus(answer, asked) as url:
        result = inventory_cli(tmp_path, url)
    assert result.exit_code == code, result.output
    assert asked[0]["partial_response"] == ["false"]
    if code:
        assert f"the answer may be partial: {warning}" in result.output
        assert not list((tmp_path / "lake").glob("jobs/*/*/*.parquet"))


LOKI = {"status": "success", "data": {"resultType": "streams", "result": [
    {"stream": {"app": "trainer"}, "values": [["1764547200000000000", "step 100 loss 2.31"]]}]}}


@pytest.mark.parametrize("answer, says", [
    (LOKI, "the answer is not a Prometheus range query's matrix: {'resultType': 'streams', 'result': [{'stream'"),
    ({"status": "success", "data": {"resultType": "matrix", "result": LOKI["data"]["result"]}},
     "a series of the answer is not labels with [time, value] pairs: {'stream': {'app': 'trainer'}"),
    ({"status": "success", "data": {"resultType": "vector", "result": []}},
     "the answer is not a Prometheus range query's matrix: {'resultType': 'vector', 'result': []}"),
    ({"status": "success", "data": None}, "the answer is not a Prometheus range query's matrix: None"),
])
def test_an_answer_that_is_no_range_querys_matrix_exits_3_saying_so(tmp_path, answer, says):
    """prometheus_url pointed at a Loki (or a proxy's own API) answered JSON of another shape: a
    ValueError or TypeError traceback, or (a vector) "no kube-state-metrics series"."""
    with answering_prometheus(answer, []) as url:
        result = inventory_cli(tmp_path, url)
    assert result.exit_code == 3, result.output
    assert f"{url}/api/v1/query_range: {says}" in result.output
    assert "check inventory[0].prometheus_url" in result.output


def test_the_pods_of_a_kube_state_metrics_shard_scraped_earlier_are_not_deleted():
    """Sharded kube-state-metrics: each shard is its own target, scraped at its own moment of the
    interval; the pods of the shard scraped 40 s before the other run on (they were read as
    deleted at their last scrape). A pod unlisted for more than 5 minutes was deleted."""
    from connectors.k8s_pod_records import PodTable

    def series(pod: str, times: list[float], **labels: str) -> dict:
        return {"metric": {"namespace": "train", "pod": pod, "uid": pod, **labels}, "values": [(t, t) for t in times]}

    table = PodTable(None, "p5")
    scrapes = {"a-0": [1000 + 60 * k for k in range(10)], "b-0": [1040 + 60 * k for k in range(10)],
               "gone": [1000 + 60 * k for k in range(4)]}  # shard A, shard B; a pod unlisted for the last 400 s
    table.add_requests([series(pod, times[-1:], resource="nvidia_com_gpu") for pod, times in scrapes.items()])
    table.add_info([series(pod, times, node="n1") for pod, times in scrapes.items()])
    table.add_phases([series(pod, times, phase="Running") for pod, times in scrapes.items()])
    table.add_reported([{"metric": {}, "values": [(1580, 1580)]}])
    assert sorted((r["name"], r["state"], r["end_time"]) for r in table.rows(())) == [
        ("a-0", "RUNNING", None), ("b-0", "RUNNING", None), ("gone", "CANCELLED", datetime(1970, 1, 1, 0, 19, 40))]


# A StatefulSet pod deleted at scrape 60 and re-created at 75 (its node's GPUs free for 14 minutes)
PS_0 = [dict(pod="ps-0", ns="train", uid="u-ps1", node="ip-10-0-1-1", listed=(20, 60), phases=[("Running", 20)],
             requests={"server": ("nvidia_com_gpu", 2)}, owner=("StatefulSet", "ps"), start=20),
        dict(pod="ps-0", ns="train", uid="u-ps2", node="ip-10-0-1-1", listed=(75, 359), phases=[("Running", 75)],
             requests={"server": ("nvidia_com_gpu", 2)}, owner=("StatefulSet", "ps"), start=75)]


@pytest.mark.binary
@pytest.mark.parametrize("keeps_uid", ["", "kube_pod_info{"])
def test_without_uid_a_re_created_pod_is_a_new_record(tmp_path, keeps_uid):
    """Relabelling that drops `uid` everywhere, or kube-state-metrics v1, which labels kube_pod_info
    alone with it (docs/pod-metrics.md of release-1.9; its info then matched none of the pod's
    requests: every pod lost its node, instance and owner, and a deleted one held its GPUs on):
    trainer-0 re-created at once (its creation time changes at scrape 211) and ps-0 re-created
    after 14 minutes unlisted are two records each, as with uids, never one pod holding GPUs
    across the gap; records are <cluster>/<uid> where kube_pod_info has the uid (v1), so a pod keeps
    its record when the window turns to by name, else <cluster>/<namespace>/<pod>@<start>; the rest
    of every row is what the uids give."""
    text = openmetrics(PODS + PS_0)
    (tmp_path / "uid").mkdir()
    (tmp_path / "nouid").mkdir()
    with backfilled_prometheus(tmp_path / "uid", text) as url:
        assert snapshot(tmp_path / "uid", prometheus_url=url, lookback_hours=8).error is None
    without = "\n".join(re.sub(r',uid="[^"]*"', "", line) if line.startswith("kube_") and not
                         (keeps_uid and line.startswith(keeps_uid)) else line for line in text.splitlines()) + "\n"
    assert ('kube_pod_info{namespace="train",pod="ps-0",uid="u-ps1"' in without) == bool(keeps_uid)
    assert 'kube_pod_created{namespace="train",pod="ps-0"}' in without
    with backfilled_prometheus(tmp_path / "nouid", without) as url:
        outcome = snapshot(tmp_path / "nouid", prometheus_url=url, lookback_hours=8)
    assert outcome.error is None, outcome.error
    columns = "record_id, job_id, run_id, state, submit_time, start_time, end_time, gpus, nodes, instance_ids, labels"
    named = {r[0]: r for r in jobs(tmp_path / "uid", columns)}
    epoch = {uid: int((row[5] or row[4]).replace(tzinfo=timezone.utc).timestamp()) for uid, row in named.items()}
    expected = sorted((uid if keeps_uid else f"eks-p5/{row[1]}@{epoch[uid]}", *row[1:]) for uid, row in named.items())
    assert sorted(jobs(tmp_path / "nouid", columns)) == expected
    ps_0 = [(r[3], r[5], r[6]) for r in expected if r[1] == "train/ps-0"]
    assert ps_0 == [("CANCELLED", at(20, 0), at(60)), ("RUNNING", at(75, 0), None)]


def test_without_uid_a_gap_is_a_new_life_only_while_kube_state_metrics_reported():
    """The same name listed again after more than 5 minutes is a new pod only if
    kube-state-metrics went on reporting meanwhile (it was deleted); when kube-state-metrics
    itself was not scraped, it is the same pod. No creation times here: the gap alone decides."""
    from connectors.k8s_pod_records import PodTable

    def series(times: list[float], **labels: str) -> dict:
        return {"metric": {"namespace": "train", "pod": "w-0", **labels}, "values": [(t, t) for t in times]}

    listed = [1000 + 60 * k for k in range(5)] + [1900 + 60 * k for k in range(5)]  # unlisted 1240-1900
    for reported, lives in (([*listed, 1300, 1600], 2), (listed, 1)):
        table = PodTable(None, "p5")
        table.add_reported([{"metric": {}, "values": [(t, t) for t in reported]}])
        table.add_lives([series(listed, node="n1")], [], [])
        table.add_requests([series(listed, resource="nvidia_com_gpu")])
        table.add_info([series(listed, node="n1")])
        table.add_phases([series(listed, phase="Running")])
        rows = sorted(table.rows(()), key=lambda r: r["record_id"])
        assert len(rows) == lives, reported
        if lives == 2:
            assert [(r["record_id"], r["state"], r["end_time"]) for r in rows] == [
                ("p5/train/w-0@0", "CANCELLED", datetime(1970, 1, 1, 0, 20, 40)), ("p5/train/w-0@0#1", "RUNNING", None)]


def test_what_a_read_asked_is_the_settings_that_choose_the_pods():
    """A window snapshot's fingerprint (service/core/job_windows.py) changes with the settings
    that choose which pods are read, not with those that shape a row or how closely it is seen:
    a pod absent from a read that asked otherwise is taken to have ended when last seen."""
    base = {"name": "k8s", "kind": "k8s-pods", "prometheus_url": "http://prom:9090", "namespaces": ["train", "eval"],
            "shared_gpus": {"nvidia.com/gpu.shared": 4}}

    def asked(**changed):
        [source] = parse_config({"lake": "/tmp/unused", "inventory": [{**base, **changed}]}).inventory
        return source.question()

    same = [asked(namespaces=["eval", "train", "eval"]), asked(prometheus_url="http://prom:9090/"),
            asked(step_seconds=30, lookback_hours=8, dcgm_metrics=[], cluster="p5", run_labels=["job"]),
            asked(shared_gpus={"nvidia.com/gpu.shared": 8})]
    assert all(question == asked() for question in same)
    other = [asked(namespaces=["train"]), asked(namespaces=[]), asked(cluster_label="cluster"),
             asked(prometheus_url="http://other:9090"), asked(shared_gpus={})]
    assert all(question != asked() for question in other)


@pytest.mark.binary
def test_the_deadlines_default_counts_the_queries_a_run_asks(tmp_path, prometheus, monkeypatch):
    """deadline_seconds' default gives each of a run's requests its timeout_seconds (as gpu-metrics' gives each
    metric's): K8sPodsSource.requests is the queries one run asks, counted here at the client."""
    from connectors import prometheus_api

    asked = prometheus_api.get_json
    urls: list[str] = []
    monkeypatch.setattr(prometheus_api, "get_json", lambda url, **kw: urls.append(url) or asked(url, **kw))
    outcome = snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8)
    assert outcome.error is None and list(outcome.rows.values()) == [7], outcome
    source = parse_config({"inventory": [{"name": "k8s", "kind": "k8s-pods", "prometheus_url": prometheus,
                                          "lookback_hours": 8}]}).inventory[0]
    assert len(urls) == source.requests() == 17 + 3 + 1  # the pods', each DCGM metric's, the MIG profiles'
