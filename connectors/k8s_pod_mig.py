"""MIG slices among k8s-pods' GPU requests (connectors/k8s_pod_records.py's PodTable): where the
NVIDIA device plugin's 'single' strategy advertises each MIG slice as `nvidia.com/gpu`, a pod's
`nvidia_com_gpu` request counts as its slice's share when the data says so: the pod's DCGM
series carry `GPU_I_PROFILE`, else its node's `kube_node_labels` carry
`nvidia.com/mig.strategy=single` and a `nvidia.com/gpu.product` naming the profile, the one in
force when the pod started; a 'single' node whose product names none is said, naming it.
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Iterable
from typing import Protocol

from connectors.jobs_base import mig_fraction
from connectors.prometheus_api import Series

log = logging.getLogger("connectors.k8s_pod_records")  # its lines read as the pod table's, as before

NVIDIA_GPU = "nvidia_com_gpu"  # the device plugin's whole GPU, or under 'single' a MIG slice


class Pod(Protocol):
    """What of connectors/k8s_pod_records.py's Pod the MIG part reads."""

    key: tuple[str, str, str, str, int]
    node: str | None
    started: float | None
    created: float | None
    requests: dict[str, float]
    init_requests: dict[str, float]


class MigSlices:
    """PodTable's MIG part: the nodes' 'single' labels over time and the pods' DCGM profiles.
    Needs `shares` (resource → a GPU's share) and `_cluster` of the table it is part of."""

    shares: dict[str, float]

    def __init__(self) -> None:
        # (cluster, node) of MIG strategy single → its gpu.product over time: (from when, product; None
        # while not 'single'), in order
        self.mig_nodes: dict[tuple[str, str], list[tuple[float, str | None]]] = {}
        self.mig_profiles: dict[tuple[str, str, str], str] = {}  # (cluster, namespace, pod) → its DCGM GPU_I_PROFILE

    def add_mig_nodes(self, result: Iterable[Series]) -> None:
        """kube_node_labels of the nodes with their nvidia.com/mig.strategy and nvidia.com/gpu.product
        (kube-state-metrics writes them only when its --metric-labels-allowlist names them), over
        time: a node re-partitioned in the window, or taken out of MIG, prices each pod by the
        labels in force when it started. Kept: the nodes 'single' at some time."""
        seen: dict[tuple[str, str], list[tuple[float, str | None]]] = {}
        for series in result:  # values: timestamp() of each scrape of the labels
            labels = series["metric"]
            if labels.get("node"):
                single = labels.get("label_nvidia_com_mig_strategy") == "single"
                product = labels.get("label_nvidia_com_gpu_product", "") if single else None
                seen.setdefault((self._cluster(labels), labels["node"]), []).extend(
                    (float(at), product) for _, at in series["values"])
        for node, samples in seen.items():
            if any(product is not None for _, product in samples):
                samples.sort(key=lambda sample: sample[0])
                self.mig_nodes[node] = [(at, product) for i, (at, product) in enumerate(samples)
                                        if i == 0 or product != samples[i - 1][1]]

    def _node_product(self, pod: Pod) -> str | None:
        """The gpu.product of `pod`'s node when the pod started, if the node was 'single' then
        (before the labels' first scrape: as first scraped); None: no 'single' node then."""
        changes = self.mig_nodes.get((pod.key[0], pod.node or ""))
        if not changes:
            return None
        now = bisect_right(changes, pod.started or pod.created or 0.0, key=lambda change: change[0])
        return changes[max(now - 1, 0)][1]

    def add_mig_profiles(self, profiles: dict[tuple[str, str, str], str]) -> None:
        """(cluster, namespace, pod) → the GPU_I_PROFILE of the MIG device its DCGM series report."""
        self.mig_profiles.update(profiles)

    def _mig_fraction(self, pod: Pod) -> float | None:
        """The share of a GPU each `nvidia_com_gpu` request of `pod` holds where the device plugin's
        'single' strategy advertises MIG slices as GPUs (module docstring); None for a whole GPU, or
        when `shared_gpus` names nvidia.com/gpu (time-slicing without a rename: the operator's word wins)."""
        if NVIDIA_GPU in self.shares:
            return None
        profile = self.mig_profiles.get(pod.key[:3]) or self._node_product(pod)
        return (mig_fraction(profile) or None) if profile else None

    def _shares(self, pod: Pod) -> dict[str, float]:
        """`shares`, with a `nvidia_com_gpu` request its MIG slice's share (`_mig_fraction`)."""
        fraction = self._mig_fraction(pod)
        return {**self.shares, NVIDIA_GPU: fraction} if fraction else self.shares

    def _say_mig(self, pods: list[Pod]) -> None:
        """The pods counted as MIG slices (at INFO), and the 'single' nodes whose product names no
        profile (a warning naming them: their pods' slices count as whole GPUs)."""
        requested = [pod for pod in pods if pod.requests.get(NVIDIA_GPU) or pod.init_requests.get(NVIDIA_GPU)]
        sliced = [pod for pod in requested if self._mig_fraction(pod)]
        if sliced:
            log.info("%d pod(s) requested nvidia.com/gpu on MIG devices (the device plugin's 'single' strategy), each "
                     "counted as its slice's share of a GPU; the first, %s/%s", len(sliced), *sliced[0].key[1:3])
        products = {(pod.key[0], pod.node or ""): self._node_product(pod) for pod in requested
                    if not self._mig_fraction(pod) and self._node_product(pod) is not None}
        unknown = sorted(products)
        if unknown and NVIDIA_GPU not in self.shares:
            log.warning("node(s) %s are labelled nvidia.com/mig.strategy=single (each nvidia.com/gpu a MIG slice) but "
                        "their nvidia.com/gpu.product (%s) names no MIG profile, nor do their pods' DCGM series "
                        "(GPU_I_PROFILE): their pods' nvidia.com/gpu requests count as whole GPUs; keep GPU feature "
                        "discovery's labels, or scrape dcgm-exporter on those nodes", ", ".join(
                            "/".join(filter(None, key)) for key in unknown),
                        products[unknown[0]] or "none")
