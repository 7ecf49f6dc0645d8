"""k8s-pods where the NVIDIA device plugin's MIG strategy is 'single': each MIG slice is
advertised as `nvidia.com/gpu`, so a pod requesting one GPU holds a slice. Counted as the
slice's share where the data says so: the pod's DCGM series carry GPU_I_PROFILE, or its node's
kube_node_labels carry nvidia.com/mig.strategy=single and a gpu.product naming the profile (GPU
feature discovery's labels, `A100-SXM4-40GB-MIG-1g.5gb`); a 'single' node whose product names
none is said, naming it. Against a real Prometheus, as tests/test_k8s_pods.py."""

from __future__ import annotations

import logging

import pytest
from prometheus_support import backfilled_prometheus

from tests.test_k8s_pods import at, jobs, labels, openmetrics, snapshot

PODS = [
    # node ip-10-0-1-3 is 'single' with 1g.5gb slices: 2 of them
    dict(pod="nb-a", ns="dev", uid="u-a", node="ip-10-0-1-3", listed=(0, 359), phases=[("Running", 0)],
         requests={"jupyter": ("nvidia_com_gpu", 2)}, start=0),
    # no node labels kept for ip-10-0-1-2; the pod's DCGM series say 3g.40gb
    dict(pod="nb-b", ns="dev", uid="u-b", node="ip-10-0-1-2", listed=(0, 359), phases=[("Running", 0)],
         requests={"jupyter": ("nvidia_com_gpu", 1)}, start=0),
    # ip-10-0-1-1: whole GPUs
    dict(pod="train-0", ns="train", uid="u-t", node="ip-10-0-1-1", listed=(0, 359), phases=[("Running", 0)],
         requests={"trainer": ("nvidia_com_gpu", 4)}, start=0),
]


def single(text: str, product: str = "A100-SXM4-40GB-MIG-1g.5gb") -> str:
    """kube_node_labels of the nodes (ip-10-0-1-3 'single', ip-10-0-1-1 not labelled by GFD), and
    dcgm-exporter's series of nb-b's MIG device (GPU_I_PROFILE, GPU_I_ID), every scrape."""
    stamps = [line.rsplit(" ", 1)[1] for line in text.splitlines() if line.startswith("kube_node_info{")
              and 'node="ip-10-0-1-1"' in line]
    node_labels = [f'kube_node_labels{{{labels(node="ip-10-0-1-3", label_nvidia_com_mig_strategy="single")},'
                   f'label_nvidia_com_gpu_product="{product}"}} 1 {stamp}' for stamp in stamps]
    node_labels += [f'kube_node_labels{{{labels(node="ip-10-0-1-1")}}} 1 {stamp}' for stamp in stamps]
    device = labels(gpu="0", GPU_I_ID="2", GPU_I_PROFILE="3g.40gb", namespace="dev", pod="nb-b")
    dcgm = [f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{device}}} 0.5 {stamp}" for stamp in stamps]
    body = text.removesuffix("# EOF\n")
    return (body + "# TYPE kube_node_labels gauge\n" + "\n".join(node_labels) + "\n# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE "
            "gauge\n" + "\n".join(dcgm) + "\n# EOF\n")


@pytest.mark.binary
def test_a_gpu_request_on_a_mig_single_node_counts_as_its_slice(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    with backfilled_prometheus(tmp_path, single(openmetrics(PODS))) as url:
        assert snapshot(tmp_path, prometheus_url=url, lookback_hours=8).error is None
    assert jobs(tmp_path, "job_id, gpus, start_time") == [
        ("dev/nb-a", pytest.approx(2 / 7), at(0, 0)),  # each nvidia.com/gpu a 1g.5gb slice (each counted whole: 2)
        ("dev/nb-b", pytest.approx(3 / 7), at(0, 0)),  # its DCGM series' 3g.40gb (counted whole: 1)
        ("train/train-0", 4.0, at(0, 0))]
    assert "2 pod(s) requested nvidia.com/gpu on MIG devices (the device plugin's 'single' strategy)" in caplog.text


@pytest.mark.binary
def test_a_mig_single_node_whose_product_names_no_profile_is_said_naming_it(tmp_path, caplog):
    with backfilled_prometheus(tmp_path, single(openmetrics(PODS[:1]), product="A100-SXM4-40GB")) as url:
        assert snapshot(tmp_path, prometheus_url=url, lookback_hours=8, dcgm_metrics=[]).error is None
    assert jobs(tmp_path, "job_id, gpus") == [("dev/nb-a", 2.0)]
    assert ("node(s) eks-p5/ip-10-0-1-3 are labelled nvidia.com/mig.strategy=single (each nvidia.com/gpu a MIG "
            "slice) but their nvidia.com/gpu.product (A100-SXM4-40GB) names no MIG profile") in caplog.text


@pytest.mark.binary
def test_shared_gpus_naming_nvidia_gpu_wins_over_the_mig_labels(tmp_path):
    with backfilled_prometheus(tmp_path, single(openmetrics(PODS[:1]))) as url:
        assert snapshot(tmp_path, prometheus_url=url, lookback_hours=8, dcgm_metrics=[],
                        shared_gpus={"nvidia.com/gpu": 4}).error is None
    assert jobs(tmp_path, "job_id, gpus") == [("dev/nb-a", 0.5)]


@pytest.mark.binary
def test_a_node_re_partitioned_mid_window_prices_each_pod_by_the_product_it_started_under(tmp_path):
    # ip-10-0-1-3 has 1g.5gb slices until scrape 180, then 3g.20gb: nb-a (2 GPUs, scrapes 0-170)
    # holds two 1g.5gb slices (2/7), nb-c (1 GPU, from scrape 190) one 3g.20gb slice (3/7); the
    # node's last product alone made nb-a 6/7
    pods = [dict(PODS[0], listed=(0, 170), phases=[("Running", 0), ("Succeeded", 170)], completion=170),
            dict(pod="nb-c", ns="dev", uid="u-c", node="ip-10-0-1-3", listed=(190, 359), phases=[("Running", 190)],
                 requests={"jupyter": ("nvidia_com_gpu", 1)}, start=190)]
    text = openmetrics(pods)
    stamps = [line.rsplit(" ", 1)[1] for line in text.splitlines() if line.startswith("kube_node_info{")
              and 'node="ip-10-0-1-3"' in line]
    node_labels = [f'kube_node_labels{{{labels(node="ip-10-0-1-3", label_nvidia_com_mig_strategy="single")},'
                   f'label_nvidia_com_gpu_product="A100-SXM4-40GB-MIG-{"1g.5gb" if k < 180 else "3g.20gb"}"}} 1 {stamp}'
                   for k, stamp in enumerate(stamps)]
    text = text.removesuffix("# EOF\n") + "# TYPE kube_node_labels gauge\n" + "\n".join(node_labels) + "\n# EOF\n"
    with backfilled_prometheus(tmp_path, text) as url:
        assert snapshot(tmp_path, prometheus_url=url, lookback_hours=8, dcgm_metrics=[]).error is None
    assert jobs(tmp_path, "job_id, gpus, start_time") == [
        ("dev/nb-a", pytest.approx(2 / 7), at(0, 0)), ("dev/nb-c", pytest.approx(3 / 7), at(190, 0))]


@pytest.mark.binary
def test_a_node_that_leaves_mig_single_mid_window_prices_later_pods_by_whole_gpus(tmp_path):
    # ip-10-0-1-3 has 1g.5gb slices until scrape 180, then MIG is turned off (its labels no longer
    # say strategy single, its product a whole A100): nb-a (2 GPUs, scrapes 0-170) holds two slices
    # (2/7), nb-c (1 GPU, from scrape 190) a whole GPU. (Before: nb-c took the last 'single'
    # product read, 1g.5gb, 1/7 of the GPU it held.)
    pods = [dict(PODS[0], listed=(0, 170), phases=[("Running", 0), ("Succeeded", 170)], completion=170),
            dict(pod="nb-c", ns="dev", uid="u-c", node="ip-10-0-1-3", listed=(190, 359), phases=[("Running", 190)],
                 requests={"jupyter": ("nvidia_com_gpu", 1)}, start=190)]
    text = openmetrics(pods)
    stamps = [line.rsplit(" ", 1)[1] for line in text.splitlines() if line.startswith("kube_node_info{")
              and 'node="ip-10-0-1-3"' in line]
    node_labels = [(f'kube_node_labels{{{labels(node="ip-10-0-1-3", label_nvidia_com_mig_strategy="single")},'
                    f'label_nvidia_com_gpu_product="A100-SXM4-40GB-MIG-1g.5gb"}} 1 {stamp}' if k < 180 else
                    f'kube_node_labels{{{labels(node="ip-10-0-1-3")},label_nvidia_com_gpu_product="A100-SXM4-40GB"}} '
                    f'1 {stamp}') for k, stamp in enumerate(stamps)]
    text = text.removesuffix("# EOF\n") + "# TYPE kube_node_labels gauge\n" + "\n".join(node_labels) + "\n# EOF\n"
    with backfilled_prometheus(tmp_path, text) as url:
        assert snapshot(tmp_path, prometheus_url=url, lookback_hours=8, dcgm_metrics=[]).error is None
    assert jobs(tmp_path, "job_id, gpus, start_time") == [
        ("dev/nb-a", pytest.approx(2 / 7), at(0, 0)), ("dev/nb-c", 1.0, at(190, 0))]
