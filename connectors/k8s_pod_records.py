"""kube-state-metrics series → rows of `jobs`, one per pod (pure; connectors/k8s_pods.py asks
Prometheus). A pod is (cluster, namespace, pod, uid): a pod re-created under the same name (a
StatefulSet's) is a new record. Where a cluster's GPU request series carry no `uid`
(kube-state-metrics v1, which puts it on kube_pod_info alone, or relabelling that drops it) every
series of the cluster is read by name, without its uid, and a name's series are cut into lives,
each a record: a new life begins where the name's creation time changes (`kube_pod_created`,
else `kube_pod_start_time`), or where it is listed again after UNLISTED_SECONDS unlisted while
kube-state-metrics went on reporting (deleted, as below), or where the uid its kube_pod_info
carries (v1) changes; each sample belongs to the life its evaluation time falls in. A life's
record is still `<cluster>/<uid>` when its kube_pod_info carries one (the record a pod has read
with its uid, so a window that turns to by-name, or back, keeps each pod's record); only a pod
with no uid anywhere is `<cluster>/<namespace>/<pod>@<start>`.

- gpus: its containers' `nvidia_com_gpu` requests, a MIG resource (`nvidia_com_mig_3g_40gb`)
  as its share of a GPU, a shared one (time-slicing or MPS: `nvidia_com_gpu_shared`, or a
  renamed resource in `shared_gpus`) as the share configured (1/replicas; without one, a whole
  GPU, said once; a renamed one not configured is not read: connectors/k8s_pods.py says so);
  per resource, an init container asking for more than the containers together sets the pod's
  figure (the pod holds the larger of the two, as the scheduler reserves); a sidecar (an init
  container restarting Always) counts with the containers;
- start: `kube_pod_start_time`; end: `kube_pod_completion_time`, else the first scrape that
  saw the pod Succeeded or Failed, else, for a pod that vanished for UNLISTED_SECONDS while
  kube-state-metrics went on reporting (deleted), the last scrape that listed it; NULL while it runs.
  A pod Succeeded or Failed from the first scrape that listed it in the window, without a
  completion time (its containers never ran: failed admission), ended at a time the window does
  not hold, perhaps days before: it ends at its start, holding no GPU time, said once (as
  jobs_base.ended_at_start ends a scheduler file's finished job without an end);
- state: Succeeded → COMPLETED; Failed → OUT_OF_MEMORY (a container OOMKilled), PREEMPTED
  (status reason Evicted), NODE_FAIL (NodeLost, Shutdown), else FAILED; Running/Pending →
  RUNNING/PENDING, or CANCELLED once deleted; Unknown → UNKNOWN;
- MIG 'single' strategy (connectors/k8s_pod_mig.py): the device plugin advertises each MIG slice as
  `nvidia.com/gpu`, so a `nvidia_com_gpu` request counts as its slice's share when the data
  says so: the pod's DCGM series carry `GPU_I_PROFILE` (dcgm-exporter labels a MIG device's series so), else its node's
  `kube_node_labels` carry `nvidia.com/mig.strategy=single` and a `nvidia.com/gpu.product`
  naming the profile (`A100-SXM4-40GB-MIG-1g.5gb`: GPU feature discovery's labels), the one in
  force when the pod started (a node re-partitioned mid-window); a single node whose product
  names none is said, naming it, its pods counted whole;
- node from `kube_pod_info`, its EC2 instance id from `kube_node_info`'s provider_id
  (`aws:///us-east-1a/i-0abc…`) of the instance that had the node's name while the pod ran;
  labels from `kube_pod_labels` without the `label_` prefix (names as kube-state-metrics writes
  them: `app_kubernetes_io_name`); qos = priority class;
- run: the first of `run_labels` among the labels, else the owner (`created_by_name`: a Job
  and its retries, a PyTorchJob's workers are one run), else the pod.
"""

from __future__ import annotations

import logging
import math
import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from connectors.jobs_base import from_epoch, job_row, labelled_run, mig_fraction
from connectors.k8s_pod_mig import MigSlices
from connectors.prometheus_api import Series

log = logging.getLogger(__name__)

TERMINAL = {"Succeeded", "Failed"}
SHARED_GPU = "nvidia_com_gpu_shared"  # the NVIDIA device plugin's time-sliced or MPS GPU (renameByDefault)
# Each one of the instance's accelerators, as the GPU table counts them: NVIDIA's and AMD's GPUs, a
# Trainium or Inferentia device (the Neuron device plugin's aws.amazon.com/neuron and neurondevice), a Gaudi
WHOLE_GPUS = ("nvidia_com_gpu", "amd_com_gpu", "aws_amazon_com_neuron", "aws_amazon_com_neurondevice",
              "habana_ai_gaudi")
FAILED_BECAUSE = {"Evicted": "PREEMPTED", "NodeLost": "NODE_FAIL", "Shutdown": "NODE_FAIL"}
_INSTANCE = re.compile(r"/(i-[0-9a-f]{8,17})$")
# A pod unlisted this long while kube-state-metrics reported others was deleted. Not 0: the
# shards of a sharded kube-state-metrics are scraped at different moments of an interval, so
# a shard's pods are always a little older than the newest scrape (Prometheus's staleness: 5m).
UNLISTED_SECONDS = 300

PodName = tuple[str, str, str, str]  # cluster, namespace, pod, uid ("" without the label)
PodKey = tuple[str, str, str, str, int]  # the name and its life (0 with a uid)


@dataclass
class Pod:
    key: PodKey
    requests: dict[str, float] = field(default_factory=dict)  # resource → containers' and sidecars' sum
    init_requests: dict[str, float] = field(default_factory=dict)  # resource → largest init container (no sidecar)
    uid: str | None = None  # read by name: the uid its kube_pod_info carries (kube-state-metrics v1)
    node: str | None = None
    owner: str | None = None
    priority_class: str | None = None
    last_seen: float | None = None  # the last scrape that listed the pod
    info_at: float = -1.0  # when `node`/`owner` were seen
    labels: dict[str, str] = field(default_factory=dict)
    created: float | None = None
    started: float | None = None
    completed: float | None = None
    phases: dict[str, tuple[float, float]] = field(default_factory=dict)  # phase → first, last scrape
    reasons: set[str] = field(default_factory=set)
    oom: bool = False
    restarts: int | None = None
    gpu_util_hourly: dict[datetime, float] = field(default_factory=dict)

    def gpus(self, shares: dict[str, float]) -> float:
        """GPUs held: `shares` (resource → a GPU's share per request) first, MIG slices as theirs.
        Per resource, as the scheduler reserves it: the larger of the containers' sum (sidecars
        included) and the largest init container's request (the sidecars started before it, which
        kube-state-metrics does not order, left out)."""
        def share(resource: str) -> float:
            return shares.get(resource) or (1.0 if resource in (*WHOLE_GPUS, SHARED_GPU)
                                            else mig_fraction(resource) or 0.0)
        return sum(max(self.requests.get(resource, 0.0), self.init_requests.get(resource, 0.0)) * share(resource)
                   for resource in {*self.requests, *self.init_requests})


def resource_label(name: str) -> str:
    """A Kubernetes resource name as kube-state-metrics labels it: `nvidia.com/gpu.shared` →
    `nvidia_com_gpu_shared` (every character but a letter, digit or `_` becomes `_`)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def last(series: Series) -> float | None:
    return series["values"][-1][1] if series["values"] else None


class PodTable(MigSlices):
    """Pods assembled from one query at a time; `cluster_label` None: every pod is `cluster`."""

    def __init__(self, cluster_label: str | None, cluster: str | None, shares: dict[str, float] | None = None):
        self.cluster_label, self.cluster, self.shares = cluster_label, cluster, shares or {}
        self.pods: dict[PodKey, Pod] = {}
        self.reported: dict[str, float] = {}  # cluster → last scrape of kube-state-metrics
        self.reports: dict[str, list[float]] = {}  # cluster → its scrapes of kube-state-metrics, in order
        self.lives: dict[PodName, list[float]] = {}  # a name without uid → when each life after the first began
        # (cluster, node) → (first, last listed, EC2 instance id) of each instance that had the node's name
        self.instances: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
        self.by_name: set[str] = set()  # the clusters whose pods are read without their uid
        MigSlices.__init__(self)

    def _cluster(self, labels: dict[str, str]) -> str:
        return (labels.get(self.cluster_label) if self.cluster_label else None) or self.cluster or ""

    def name(self, labels: dict[str, str]) -> PodName:
        cluster = self._cluster(labels)
        uid = "" if cluster in self.by_name else labels.get("uid", "")
        return cluster, labels.get("namespace", ""), labels.get("pod", ""), uid

    def add_without_uid(self, result: Iterable[Series]) -> None:
        """The clusters with GPU request series that carry no uid: kube-state-metrics v1 labels
        kube_pod_info alone with it, and read with its uid a pod's info matches none of its requests."""
        self.by_name |= {self._cluster(series["metric"]) for series in result if series["values"]}

    def _each(self, result: Iterable[Series], create: bool = False) -> Iterable[tuple[Pod, Series]]:
        """Each pod's part of each series: a name's samples split among its lives."""
        for series in result:
            name = self.name(series["metric"])
            starts = self.lives.get(name, [])
            parts: dict[int, list] = defaultdict(list)
            for sample in series["values"]:
                parts[bisect_right(starts, sample[0])].append(sample)
            for life, values in parts.items():
                key = (*name, life)
                if create:
                    self.pods.setdefault(key, Pod(key))
                if key in self.pods:
                    yield self.pods[key], {"metric": series["metric"], "values": values}

    def add_lives(self, listed: Iterable[Series], created: Iterable[Series], started: Iterable[Series]) -> None:
        """Cut the names without uid into lives (module docstring), before the other series are read.
        `listed`: timestamp(kube_pod_info) (values are scrape times); `created`, `started`: the times."""
        scrapes: dict[PodName, dict[float, float]] = defaultdict(dict)  # evaluation time → newest scrape
        uids: dict[PodName, dict[float, str]] = defaultdict(dict)  # evaluation time → kube_pod_info's uid
        for series in listed:
            name = self.name(series["metric"])
            if not name[3]:
                for at, scrape in series["values"]:
                    scrapes[name][at] = max(scrape, scrapes[name].get(at, scrape))
                    if series["metric"].get("uid"):
                        uids[name][at] = series["metric"]["uid"]
        births: dict[str, dict[PodName, dict[float, float]]] = {"created": {}, "started": {}}
        for which, result in (("created", created), ("started", started)):
            for series in result:
                name = self.name(series["metric"])
                if not name[3]:
                    births[which].setdefault(name, {}).update(series["values"])
        for name in {*scrapes, *births["created"], *births["started"]}:
            starts = set()
            listed_at = sorted(scrapes.get(name, {}).items())
            for (_, before), (at, scrape) in zip(listed_at, listed_at[1:]):
                if self._deleted_between(name[0], before, scrape):
                    starts.add(at)
            born = sorted((births["created"].get(name) or births["started"].get(name) or {}).items())
            given = sorted(uids.get(name, {}).items())
            for changes in (born, given):
                starts |= {at for (_, before), (at, value) in zip(changes, changes[1:]) if value != before}
            if starts:
                self.lives[name] = sorted(starts)

    def _deleted_between(self, cluster: str, listed: float, again: float) -> bool:
        """Whether kube-state-metrics reported without the pod for more than UNLISTED_SECONDS
        between two scrapes that listed it (not: kube-state-metrics itself was not scraped)."""
        if again - listed <= UNLISTED_SECONDS:
            return False
        reports = self.reports.get(cluster, [])
        first_after = bisect_right(reports, listed + UNLISTED_SECONDS)
        return first_after < len(reports) and reports[first_after] < again

    def add_requests(self, result: Iterable[Series], init: bool = False) -> None:
        for pod, series in self._each(result, create=True):
            target = pod.init_requests if init else pod.requests
            target[resource_label(series["metric"].get("resource", ""))] = last(series) or 0.0

    def add_info(self, result: Iterable[Series]) -> None:
        """Values are the scrape times (timestamp(kube_pod_info))."""
        for pod, series in self._each(result):
            seen = max(v for _, v in series["values"])
            labels = series["metric"]
            pod.last_seen = max(pod.last_seen or seen, seen)
            pod.uid = labels.get("uid") or pod.uid
            if labels.get("node") and seen >= pod.info_at:
                pod.node, pod.info_at = labels["node"], seen
                kind, owner = labels.get("created_by_kind", ""), labels.get("created_by_name", "")
                pod.owner = owner if owner and kind not in ("", "<none>") else None
                pod.priority_class = labels.get("priority_class") or None
            elif pod.node is None and labels.get("created_by_name"):
                pod.owner = labels["created_by_name"] if labels.get("created_by_kind") not in ("", "<none>") else None

    def add_reported(self, result: Iterable[Series]) -> None:
        for series in result:
            if series["values"]:
                cluster = self._cluster(series["metric"])
                self.reported[cluster] = max(self.reported.get(cluster, 0.0), max(v for _, v in series["values"]))
                self.reports[cluster] = sorted({*self.reports.get(cluster, []), *(v for _, v in series["values"])})

    def add_labels(self, result: Iterable[Series]) -> None:
        for pod, series in self._each(result):
            pod.labels = {name[6:]: value for name, value in series["metric"].items()
                          if name.startswith("label_") and value}

    def add_times(self, result: Iterable[Series], which: str) -> None:
        for pod, series in self._each(result):
            setattr(pod, which, last(series) or None)

    def add_phases(self, result: Iterable[Series]) -> None:
        """Values are the scrape times at which the phase held (timestamp(phase == 1))."""
        for pod, series in self._each(result):
            times = [v for _, v in series["values"]]
            phase = series["metric"].get("phase", "")
            held = pod.phases.get(phase)
            pod.phases[phase] = (min(times + ([held[0]] if held else [])), max(times + ([held[1]] if held else [])))

    def add_reasons(self, result: Iterable[Series]) -> None:
        for pod, series in self._each(result):
            pod.reasons.add(series["metric"].get("reason", ""))

    def add_oom(self, result: Iterable[Series]) -> None:
        for pod, _ in self._each(result):
            pod.oom = True

    def add_restarts(self, result: Iterable[Series]) -> None:
        for pod, series in self._each(result):
            pod.restarts = int(last(series) or 0)

    def add_nodes(self, result: Iterable[Series]) -> None:
        for series in result:
            labels = series["metric"]
            match = _INSTANCE.search(labels.get("provider_id", ""))
            if match and labels.get("node") and series["values"]:
                listed = [at for at, _ in series["values"]]
                self.instances.setdefault((self._cluster(labels), labels["node"]), []).append(
                    (min(listed), max(listed), match.group(1)))

    def _instance(self, pod: Pod, end: float | None) -> str | None:
        """The EC2 instance behind the pod's node while the pod was there: a node's name outlives
        its instance (EKS names nodes by private IP, which a later instance may get)."""
        named = self.instances.get((pod.key[0], pod.node or ""))
        if not named:
            return None
        since = pod.started or pod.created or 0.0
        until = end or pod.last_seen or math.inf
        return max(named, key=lambda held: (min(held[1], until) - max(held[0], since), held[1]))[2]

    def add_gpu_use(self, hourly: dict[tuple[str, str, str], dict[datetime, float]]) -> None:
        """Per (cluster, namespace, pod) hour → use %, kept for the hours the pod lived."""
        for pod in self.pods.values():
            hours = hourly.get(pod.key[:3], {})
            start = from_epoch(pod.started or pod.created)
            end = from_epoch(pod.completed)
            pod.gpu_util_hourly = {hour: pct for hour, pct in hours.items()
                                   if (start is None or hour >= start.replace(minute=0, second=0, microsecond=0))
                                   and (end is None or hour < end)}

    def rows(self, run_labels: Iterable[str]) -> list[dict[str, Any]]:
        shared = [pod for pod in self.pods.values() if SHARED_GPU not in self.shares
                  and (pod.requests.get(SHARED_GPU) or pod.init_requests.get(SHARED_GPU))]
        if shared:
            log.warning("%d pod(s) requested %s (GPUs shared by time-slicing or MPS), each counted as a whole GPU; "
                        "the first, %s/%s: set shared_gpus: {nvidia.com/gpu.shared: <replicas per GPU>} (the device "
                        "plugin's sharing config) to count each as its share", len(shared), SHARED_GPU,
                        *shared[0].key[1:3])
        self._say_mig(list(self.pods.values()))
        held = [pod for pod in self.pods.values() if pod.gpus(self._shares(pod)) > 0]
        rows = [self._row(pod, tuple(run_labels)) for pod in held]
        unknown = [row for pod, row in zip(held, rows) if self._end_unknown(pod)]
        if unknown:
            log.warning("%d pod(s) were Succeeded or Failed from the first scrape that listed them in the window and "
                        "have no kube_pod_completion_time (their containers never ran: failed admission, say): when "
                        "each ended is not known, so each is counted as ending at its start, holding no GPU time, not "
                        "up to the window's first scrape; the first, %s (%s)", len(unknown), unknown[0]["job_id"],
                        unknown[0]["state"])
        return rows

    def _row(self, pod: Pod, run_labels: tuple[str, ...]) -> dict[str, Any]:
        cluster, namespace, name, read_uid, life = pod.key
        uid = read_uid or pod.uid
        state, end = self._state_and_end(pod)
        instance = self._instance(pod, end)
        born = int(pod.started or pod.created or 0)
        record = f"{cluster}/{uid}" if uid else f"{cluster}/{namespace}/{name}@{born}"
        if life and not uid and not (pod.started or pod.created):  # lives told apart by a gap alone
            record += f"#{life}"
        return job_row(record_id=record, job_id=f"{namespace}/{name}", scheduler="kubernetes", cluster=cluster or None,
                       run_id=labelled_run(pod.labels, run_labels) or (f"{namespace}/{pod.owner}" if pod.owner else None),
                       state=state, submit_time=from_epoch(pod.created), start_time=from_epoch(pod.started),
                       end_time=from_epoch(end), gpus=pod.gpus(self._shares(pod)), nodes=[pod.node] if pod.node else None,
                       instance_ids=[instance] if instance else None, namespace=namespace, name=name,
                       qos=pod.priority_class, labels=pod.labels or None, restarts=pod.restarts,
                       gpu_util_hourly=pod.gpu_util_hourly or None)

    @staticmethod
    def _phase(pod: Pod) -> str | None:
        return max(pod.phases, key=lambda p: pod.phases[p][1]) if pod.phases else None

    def _end_unknown(self, pod: Pod) -> bool:
        """Succeeded or Failed from the first scrape that listed it, started, no completion time."""
        phase = self._phase(pod)
        return (phase in TERMINAL and not pod.completed and bool(pod.started)
                and not any(seen[0] < pod.phases[phase][0] for other, seen in pod.phases.items() if other != phase))

    def _state_and_end(self, pod: Pod) -> tuple[str, float | None]:
        phase = self._phase(pod)
        if phase in TERMINAL:
            end = pod.started if self._end_unknown(pod) else pod.completed or pod.phases[phase][0]
            if phase == "Succeeded":
                return "COMPLETED", end
            failed = next((FAILED_BECAUSE[r] for r in sorted(pod.reasons) if r in FAILED_BECAUSE), "FAILED")
            return ("OUT_OF_MEMORY" if pod.oom else failed), end
        reported = self.reported.get(pod.key[0])
        gone = pod.last_seen is not None and reported is not None and pod.last_seen < reported - UNLISTED_SECONDS
        if gone:  # deleted before it ended; kube-state-metrics went on reporting the others
            return ("UNKNOWN" if phase == "Unknown" else "CANCELLED"), pod.last_seen
        return {"Running": "RUNNING", "Pending": "PENDING"}.get(phase or "", "UNKNOWN"), None
