"""k8s-pods on GPUs shared by time-slicing or MPS (NVIDIA device plugin `sharing:` with
`renameByDefault`, so pods request `nvidia.com/gpu.shared`, which kube-state-metrics labels
`nvidia_com_gpu_shared`; or a renamed resource): each request counts 1/replicas of a GPU when
`shared_gpus` says the replicas, a whole GPU (said once) when it does not. Against a real
Prometheus with backfilled kube-state-metrics series, as tests/test_k8s_pods.py."""

from __future__ import annotations

import re

import pytest
from prometheus_support import backfilled_prometheus

from service.core.config import parse_config
from service.core.errors import ConfigError
from tests.test_k8s_pods import at, jobs, openmetrics, snapshot

SHARED_PODS = [
    dict(pod="infer-a", ns="serve", uid="u-ia", node="ip-10-0-1-1", listed=(0, 359), phases=[("Running", 0)],
         requests={"server": ("nvidia_com_gpu_shared", 1)}, start=0),
    dict(pod="infer-b", ns="serve", uid="u-ib", node="ip-10-0-1-1", listed=(0, 359), phases=[("Running", 0)],
         requests={"server": ("nvidia_com_gpu_shared", 2)}, start=0),
    # a sharing config that renames the resource (nvidia.com/a100-mps), as an MPS pool's
    dict(pod="mps-worker", ns="serve", uid="u-mw", node="ip-10-0-1-2", listed=(0, 359), phases=[("Running", 0)],
         requests={"worker": ("nvidia_com_a100_mps", 3)}, start=0),
    dict(pod="train-0", ns="train", uid="u-t0", node="ip-10-0-1-2", listed=(0, 359), phases=[("Running", 0)],
         requests={"trainer": ("nvidia_com_gpu", 4)}, start=0),
]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus"), openmetrics(SHARED_PODS)) as url:
        yield url


@pytest.mark.binary
def test_shared_gpu_requests_count_as_their_share_of_a_gpu(tmp_path, prometheus):
    outcome = snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8, dcgm_metrics=[],
                       shared_gpus={"nvidia.com/gpu.shared": 4, "nvidia.com/a100-mps": 10})
    assert outcome.error is None, outcome.error
    assert jobs(tmp_path, "job_id, gpus, nodes, start_time") == [
        ("serve/infer-a", 0.25, ["ip-10-0-1-1"], at(0, 0)), ("serve/infer-b", 0.5, ["ip-10-0-1-1"], at(0, 0)),
        ("serve/mps-worker", pytest.approx(0.3), ["ip-10-0-1-2"], at(0, 0)),
        ("train/train-0", 4.0, ["ip-10-0-1-2"], at(0, 0))]


@pytest.mark.binary
def test_shared_gpus_without_their_replicas_count_whole_and_say_the_key(tmp_path, prometheus, caplog):
    """Before, a pod requesting nvidia_com_gpu_shared was no GPU pod at all: its node's cost went
    to idle. A renamed resource nobody configured is still not read (it could be anything)."""
    assert snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8, dcgm_metrics=[]).error is None
    assert jobs(tmp_path, "job_id, gpus") == [("serve/infer-a", 1.0), ("serve/infer-b", 2.0), ("train/train-0", 4.0)]
    assert ("2 pod(s) requested nvidia_com_gpu_shared (GPUs shared by time-slicing or MPS), each counted as a whole "
            "GPU; the first, serve/infer-a: set shared_gpus: {nvidia.com/gpu.shared: <replicas per GPU>}") in caplog.text


@pytest.mark.binary
def test_a_renamed_shared_gpu_not_in_shared_gpus_is_said_naming_it_and_the_key(tmp_path, prometheus, caplog):
    """A pod asking only for a resource the device plugin's config renamed (nvidia.com/a100-mps)
    holds no GPU spendlake reads: before, its node's cost went to idle without a word."""
    assert snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8, dcgm_metrics=[],
                    shared_gpus={"nvidia.com/gpu.shared": 4}).error is None
    assert [job for (job,) in jobs(tmp_path, "job_id")] == ["serve/infer-a", "serve/infer-b", "train/train-0"]
    said = [r.getMessage() for r in caplog.records if "no GPU resource spendlake reads" in r.getMessage()]
    assert said == ["k8s (inventory[0]): pods requested nvidia_com_a100_mps (1 pod(s)) and no GPU resource spendlake reads "
                    "(the first, serve/mps-worker): they are counted as holding no GPU, so their nodes' cost goes to "
                    "idle; if it is a GPU shared by time-slicing or MPS under a name the device plugin's config gave "
                    "it (or a NeuronCore, a share of a Neuron device), set inventory[0].shared_gpus: "
                    "{nvidia_com_a100_mps: <replicas per GPU>}"]


@pytest.mark.binary
def test_a_configured_renamed_shared_gpu_is_not_said(tmp_path, prometheus, caplog):
    assert snapshot(tmp_path, prometheus_url=prometheus, lookback_hours=8, dcgm_metrics=[],
                    shared_gpus={"nvidia.com/gpu.shared": 4, "nvidia.com/a100-mps": 10}).error is None
    assert "no GPU resource spendlake reads" not in caplog.text


ACCELERATOR_PODS = [
    dict(pod="trn-0", ns="train", uid="u-trn", node="ip-10-0-2-1", listed=(0, 359), phases=[("Running", 0)],
         requests={"trainer": ("aws_amazon_com_neuron", 16)}, start=0),
    dict(pod="trn-cores", ns="train", uid="u-tc", node="ip-10-0-2-2", listed=(0, 359), phases=[("Running", 0)],
         requests={"trainer": ("aws_amazon_com_neuroncore", 4)}, start=0),
    dict(pod="inf-dev", ns="serve", uid="u-id", node="ip-10-0-2-2", listed=(0, 359), phases=[("Running", 0)],
         requests={"server": ("aws_amazon_com_neurondevice", 2)}, start=0),
    dict(pod="rocm-0", ns="train", uid="u-amd", node="ip-10-0-2-3", listed=(0, 359), phases=[("Running", 0)],
         requests={"trainer": ("amd_com_gpu", 1)}, start=0),
    dict(pod="gaudi-0", ns="train", uid="u-hl", node="ip-10-0-2-3", listed=(0, 359), phases=[("Running", 0)],
         requests={"trainer": ("habana_ai_gaudi", 8)}, start=0),
]


@pytest.mark.binary
def test_other_vendors_accelerators_are_held_and_neuroncores_said(tmp_path, caplog):
    """EKS on Trainium or Inferentia (the Neuron device plugin's aws.amazon.com/neuron and
    neurondevice), AMD and Gaudi: each device is one of the instance's accelerators, as the GPU
    table counts them (their pods were left out, their nodes' cost all idle, without a word). A
    NeuronCore is a share of a device whose size the instance decides (trn1 2, trn2 4 at LNC=2): said,
    and read as shared_gpus says."""
    with backfilled_prometheus(tmp_path, openmetrics(ACCELERATOR_PODS)) as url:
        assert snapshot(tmp_path / "default", prometheus_url=url, lookback_hours=8, dcgm_metrics=[]).error is None
        assert snapshot(tmp_path / "cores", prometheus_url=url, lookback_hours=8, dcgm_metrics=[],
                        shared_gpus={"aws.amazon.com/neuroncore": 2}).error is None
    assert sorted(jobs(tmp_path / "default", "job_id, gpus")) == [
        ("serve/inf-dev", 2.0), ("train/gaudi-0", 8.0), ("train/rocm-0", 1.0), ("train/trn-0", 16.0)]
    said = [r.getMessage() for r in caplog.records if "no GPU resource spendlake reads" in r.getMessage()]
    assert len(said) == 1 and "aws_amazon_com_neuroncore (1 pod(s))" in said[0]
    assert "set inventory[0].shared_gpus: {aws_amazon_com_neuroncore: <replicas per GPU>}" in said[0]
    assert ("train/trn-cores", 2.0) in jobs(tmp_path / "cores", "job_id, gpus")


@pytest.mark.parametrize("shared, says", [
    ({"nvidia.com/gpu.shared": 0}, "inventory[0].shared_gpus.nvidia.com/gpu.shared: must be at least 1, not 0"),
    # a name that is no Kubernetes resource, which would go into a PromQL regex
    ({'nvidia.com/gpu"}|x': 4}, "inventory[0].shared_gpus: 'nvidia.com/gpu\"}|x' is not a Kubernetes resource name"),
])
def test_bad_shared_gpus_are_config_errors_with_the_dotted_path(shared, says):
    with pytest.raises(ConfigError) as caught:
        parse_config({"lake": "/tmp/lake", "inventory": [{"name": "k8s", "kind": "k8s-pods", "cluster": "c",
                                                          "prometheus_url": "http://p:9090", "shared_gpus": shared}]})
    assert says in str(caught.value), str(caught.value)


def scraped_without_honor_labels(text: str) -> str:
    """kube-state-metrics' series as Prometheus stores them when its scrape job lacks
    honor_labels: the target's own pod and namespace win, the series' become exported_*."""
    return re.sub(r'^(kube_pod_\w+)\{namespace="([^"]*)",pod="([^"]*)"',
                  r'\1{exported_namespace="\2",exported_pod="\3",namespace="monitoring",pod="kube-state-metrics-7d9f"',
                  text, flags=re.MULTILINE)


@pytest.mark.binary
def test_kube_state_metrics_scraped_without_honor_labels_fails_saying_so(tmp_path):
    """Read as they are, every pod would be the kube-state-metrics pod in namespace monitoring
    (without a uid, one pod): its cost would land on the wrong namespace, or on one job."""
    text = scraped_without_honor_labels(openmetrics(SHARED_PODS))
    assert 'kube_pod_info{exported_namespace="serve",exported_pod="infer-a",namespace="monitoring"' in text
    (tmp_path / "prometheus").mkdir()
    with backfilled_prometheus(tmp_path / "prometheus", text) as url:
        outcome = snapshot(tmp_path, prometheus_url=url, lookback_hours=8, dcgm_metrics=[])
    assert outcome.error is not None and outcome.rows == {}
    assert "kube-state-metrics series carry exported_pod and exported_namespace" in str(outcome.error)
    assert "scrape kube-state-metrics with honor_labels: true" in str(outcome.error)
