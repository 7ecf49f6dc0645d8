"""k8s-pods: the pods that requested GPUs, from kube-state-metrics (v2: `uid` on every pod
series; v1 has it on kube_pod_info alone: re-created pods of one name are then told apart by
creation time and gaps) through
Prometheus `query_range` over the last `lookback_hours` → `jobs`, one row per pod; how series
become rows: connectors/k8s_pod_records.py.

Series read (each limited to pods with a GPU or MIG request, `namespaces` if set; a series that
several kube-state-metrics replicas report counts once):
kube_pod_container_resource_requests and kube_pod_init_container_resource_requests
(resource nvidia_com_gpu, nvidia_com_mig_*, nvidia_com_gpu_shared, amd_com_gpu, the Neuron devices
aws_amazon_com_neuron and _neurondevice, habana_ai_gaudi and the `shared_gpus` resources, or their
Kubernetes names, nvidia.com/gpu;
the pods asking only for another such vendor's resource are said, not read),
kube_pod_init_container_info (restart_policy Always: a sidecar, whose requests add to the containers'),
kube_pod_info (node, owner, priority class; its
scrape times say when a pod was last listed), kube_pod_labels, kube_pod_created,
kube_pod_start_time, kube_pod_completion_time, kube_pod_status_phase, kube_pod_status_reason,
kube_pod_container_status_terminated_reason (OOMKilled),
kube_pod_container_status_restarts_total and kube_node_info (provider_id → EC2 instance id),
kube_node_labels of MIG 'single' nodes (connectors/k8s_pod_records.py).
Optionally DCGM exporter series (`dcgm_metrics`, in order of preference) labelled with the
pod (`exported_pod`/`exported_namespace` when Prometheus kept the exporter's own `pod`, else
`pod_name`/`pod_namespace` of dcgm-exporter --use-old-namespace, else `pod`/`namespace`): each
pod's mean GPU use per hour, ratios as percent, and the MIG profile (GPU_I_PROFILE) of its device.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta, timezone
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

import duckdb
from pydantic import Field, field_validator, model_validator

from connectors.aws_sigv4 import Signer, Sigv4, check_sigv4, prometheus_access
from connectors.gpu_metrics import RATIO_METRICS, GpuMetricName
from connectors.inventory_base import FileOrApiConnector, SnapshotPart
from connectors.jobs_base import HttpSource, jobs_relation
from connectors.k8s_pod_records import SHARED_GPU, WHOLE_GPUS, PodTable, resource_label
from connectors.prometheus_api import Series, pieces, query_range
from service.core.config_base import HttpUrl
from service.core.deadline import Deadline
from service.core.errors import SourceError
from service.core.registry import Feeds
from service.core.timewindow import minute_text

log = logging.getLogger(__name__)

GPU_RESOURCES = (*WHOLE_GPUS, "nvidia_com_mig_.+", SHARED_GPU)
# An accelerator vendor's resources: a renamed shared GPU keeps the device plugin's domain
# (nvidia.com/a100-mps); a NeuronCore (aws.amazon.com/neuroncore) is a share of a Neuron device
ACCELERATOR_RESOURCES = "(nvidia_com|amd_com|habana_ai)_.+|aws_amazon_com_neuron.+"
LABEL_NAME = r"^[a-zA-Z_][a-zA-Z0-9_]*$"
RESOURCE_NAME = r"^[a-zA-Z0-9][-a-zA-Z0-9_./]*$"  # a Kubernetes extended resource, or its kube-state-metrics label
NAMESPACE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # a DNS label, so it goes into a PromQL regex as it is
# The GPU's pod on a DCGM exporter series, first found first: renamed by a scrape without honor_labels
# (the exporter's own pod is `pod`), as dcgm-exporter --use-old-namespace writes it, as it writes it by default
POD_LABELS = (("exported_namespace", "exported_pod"), ("pod_namespace", "pod_name"), ("namespace", "pod"))
# the kube-state-metrics queries every run asks (its deadline's default gives each timeout_seconds)
POD_QUERIES = 17


def spelled(label: str) -> str:
    """A resource as kube-state-metrics labels it (`nvidia_com_mig_1g_10gb`), as a PromQL regex
    that also matches it spelled as Kubernetes names it (`nvidia.com/mig-1g.10gb`), as an
    exporter or relabelling that keeps the name may have written it."""
    return label.replace("_", "[-._/]")


class K8sPodsSource(HttpSource):
    """Pods that requested GPUs, from kube-state-metrics (and DCGM exporter) series in Prometheus."""

    kind: Literal["k8s-pods"]
    prometheus_url: HttpUrl
    sigv4: Sigv4 | None = Field(default=None, description="sign queries for Amazon Managed Service for Prometheus")
    cluster_label: str | None = Field(default=None, pattern=LABEL_NAME,
                                      description="the series label naming the cluster (one Prometheus, many clusters)")
    namespaces: tuple[Annotated[str, Field(pattern=NAMESPACE, max_length=63)], ...] = Field(
        default=(), max_length=1000, description="only these namespaces; default: all")
    step_seconds: int = Field(default=60, ge=1, le=3600, description="query_range step: how closely phases are seen")
    dcgm_metrics: tuple[GpuMetricName, ...] = Field(
        default=("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"),
        description="DCGM series with pod labels for per-pod GPU use, in order of preference; [] reads none")
    shared_gpus: dict[str, Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=dict, max_length=50,
        description="a GPU resource shared by time-slicing or MPS → the device plugin's replicas per GPU: "
                    "each one requested counts as 1/replicas of a GPU, e.g. {nvidia.com/gpu.shared: 4}")

    @model_validator(mode="after")
    def _signable(self) -> K8sPodsSource:
        check_sigv4(self.sigv4, self.prometheus_url)
        return self

    @field_validator("shared_gpus")
    @classmethod
    def _resource_names(cls, shared: dict[str, int]) -> dict[str, int]:
        for name in shared:  # each goes into a PromQL regex, as kube-state-metrics labels it
            if not re.fullmatch(RESOURCE_NAME, name) or len(name) > 253:
                raise ValueError(f"{name!r} is not a Kubernetes resource name such as nvidia.com/gpu.shared")
        return shared

    def question(self) -> dict[str, object]:
        """The settings that decide which pods a read returns (a window snapshot's fingerprint,
        service/core/job_windows.py); not those that shape a pod's row or how often it is seen."""
        return {"prometheus_url": self.prometheus_url.rstrip("/"), "cluster_label": self.cluster_label,
                "namespaces": sorted(set(self.namespaces)), "gpu_resources": sorted(self.gpu_shares())}

    def requests(self) -> int:
        """A run's queries (K8sPodsConnector.snapshot): POD_QUERIES at step_seconds, one more for `namespaces`,
        one for a `cluster_label` no series carries, and each DCGM metric's and the MIG profiles' hourly; each
        in pieces of prometheus_api.MAX_POINTS steps."""
        span = timedelta(hours=self.lookback_hours)
        pod_queries = POD_QUERIES + bool(self.namespaces) + bool(self.cluster_label)
        hourly = len(self.dcgm_metrics) + 1 if self.dcgm_metrics else 0
        return pod_queries * pieces(span, self.step_seconds) + hourly * pieces(span, 3600)

    def gpu_shares(self) -> dict[str, float]:
        """`shared_gpus` as kube-state-metrics labels the resources → a GPU's share per request."""
        return {resource_label(name): 1 / replicas for name, replicas in self.shared_gpus.items()}


class K8sPodsConnector(FileOrApiConnector[K8sPodsSource]):
    kind = "k8s-pods"
    feeds = Feeds.snapshot("jobs")

    def local_paths(self) -> list[Path]:
        return []

    def inputs(self) -> None:
        return None  # Prometheus' answers

    def snapshot(self, con: duckdb.DuckDBPyConnection, scratch: Path, now: datetime) -> list[SnapshotPart]:
        c = self.config
        end = now.astimezone(timezone.utc).replace(microsecond=0)
        start = end - timedelta(hours=c.lookback_hours)
        deadline = c.start_deadline(self.config_path)  # over all of the run's queries
        table = PodTable(c.cluster_label, c.cluster, c.gpu_shares())
        resources = "|".join(spelled(label) for label in dict.fromkeys((*GPU_RESOURCES, *c.gpu_shares())))
        names = ", ".join(["namespace", "pod", *([c.cluster_label] if c.cluster_label else [])])
        by = f"{names}, uid"
        where = f', namespace=~"{"|".join(c.namespaces)}"' if c.namespaces else ""
        requests = (f'__name__=~"kube_pod_container_resource_requests|kube_pod_init_container_resource_requests", '
                    f'resource=~"{resources}"{where}')  # the matchers of the GPU requests
        gpu_pods = f"group by ({by}) ({{{requests}}})"

        def of_gpu_pods(selector: str) -> str:  # by name: kube-state-metrics v1 puts a uid on kube_pod_info alone
            return f"({selector}) and on ({names}) {gpu_pods}"

        def ask(query: str) -> list[Series]:
            return self._query(query, start, end, c.step_seconds, deadline)

        # when kube-state-metrics last reported any pod: a pod listed before that and not since was deleted
        cluster_by = f" by ({c.cluster_label})" if c.cluster_label else ""
        reported = ask(f"max{cluster_by} (timestamp(kube_pod_info))")
        table.add_reported(reported)
        if not table.reported:
            raise SourceError(f"no kube-state-metrics series (kube_pod_info) from {minute_text(start)} to "
                              f"{minute_text(end)} UTC", where=c.prometheus_url,
                              hint="check that this Prometheus scrapes kube-state-metrics, or widen lookback_hours")
        if c.cluster_label and not any(series["metric"].get(c.cluster_label) for series in reported):
            self._warn_unlabelled(reported, start, end, deadline)
        if any(series["metric"].get("exported_pod") for series in ask('group by (exported_pod) '
                                                                      '(kube_pod_info{exported_pod!=""})')):
            raise SourceError("kube-state-metrics series carry exported_pod and exported_namespace: Prometheus scraped "
                              "it without honor_labels, so their pod and namespace name the kube-state-metrics pod, "
                              "not the pods it reports", where=c.prometheus_url,
                              hint="scrape kube-state-metrics with honor_labels: true (a ServiceMonitor's honorLabels: "
                                   "true), then run inventory again once lookback_hours of series have that shape")
        if c.namespaces:
            self._warn_unseen(ask("group by (namespace) (kube_pod_info)"), start, end)
        table.add_without_uid(ask(f'group{cluster_by} ({{{requests}, uid=""}})'))
        # the listings and creation times first: they cut the names without uid into lives
        inner = where.removeprefix(", ")
        listed = ask(of_gpu_pods(f"max by ({by}, node, created_by_kind, created_by_name, priority_class) "
                                 f"(timestamp(kube_pod_info{{{inner}}}))"))
        times = {which: ask(of_gpu_pods(f"max by ({by}) ({metric}{{{inner}}})")) for metric, which in (
            ("kube_pod_created", "created"), ("kube_pod_start_time", "started"),
            ("kube_pod_completion_time", "completed"))}
        table.add_lives(listed, times["created"], times["started"])
        # max by container first: two kube-state-metrics replicas (HA, a rollout) report each pod twice.
        # A sidecar (an init container that restarts Always) runs beside the containers: its request adds to theirs
        init = f'kube_pod_init_container_resource_requests{{resource=~"{resources}"{where}}}'
        sidecar = f'on ({by}, container) kube_pod_init_container_info{{restart_policy="Always"{where}}}'
        table.add_requests(ask(f'sum by ({by}, resource) (max by ({by}, container, resource) '
                               f'(kube_pod_container_resource_requests{{resource=~"{resources}"{where}}}) '
                               f'or max by ({by}, container, resource) ({init} and {sidecar}))'))
        table.add_requests(ask(f'max by ({by}, resource) ({init} unless {sidecar})'), init=True)
        self._warn_unread(ask(f'group by ({by}, resource) ({{__name__=~"kube_pod_container_resource_requests|'
                              f'kube_pod_init_container_resource_requests", '
                              f'resource=~"{spelled(ACCELERATOR_RESOURCES)}", resource!~"{resources}"{where}}}) '
                              f'unless on ({names}) {gpu_pods}'))
        if not table.pods:
            return [SnapshotPart("jobs", jobs_relation(con, []))]
        table.add_info(listed)
        table.add_labels(ask(of_gpu_pods(f"kube_pod_labels{{{inner}}}")))
        for which, result in times.items():
            table.add_times(result, which)
        # timestamp() of a selector is the scrape's time; of a comparison, the step's: filter with `and`
        phase = f"kube_pod_status_phase{{{inner}}}"
        table.add_phases(ask(of_gpu_pods(f"max by ({by}, phase) (timestamp({phase}) and on ({by}, phase) "
                                         f"({phase} == 1))")))
        table.add_reasons(ask(of_gpu_pods(f"max by ({by}, reason) (kube_pod_status_reason{{{inner}}} == 1)")))
        table.add_oom(ask(of_gpu_pods(f'max by ({by}) (kube_pod_container_status_terminated_reason'
                                      f'{{reason="OOMKilled"{where}}} == 1)')))
        table.add_restarts(ask(of_gpu_pods(f"sum by ({by}) (max by ({by}, container) "
                                           f"(kube_pod_container_status_restarts_total{{{inner}}}))")))
        node_by = ", ".join(["node", "provider_id", *([c.cluster_label] if c.cluster_label else [])])
        table.add_nodes(ask(f"max by ({node_by}) (kube_node_info)"))
        # every node's MIG labels, not only 'single' ones: a node taken out of MIG mid-window is told
        labelled = ", ".join(["node", "label_nvidia_com_mig_strategy", "label_nvidia_com_gpu_product",
                              *([c.cluster_label] if c.cluster_label else [])])
        table.add_mig_nodes(ask(f"max by ({labelled}) (timestamp(kube_node_labels))"))
        if c.dcgm_metrics:
            table.add_gpu_use(self._gpu_use(start, end, deadline))
            table.add_mig_profiles(self._mig_profiles(start, end, deadline))
        return [SnapshotPart("jobs", jobs_relation(con, table.rows(c.run_labels)))]

    def _warn_unseen(self, listed: list[Series], start: datetime, end: datetime) -> None:
        """Configured namespaces that held no pod at all in the window: a typo there stores no
        pod of it (and ends the running ones an earlier run read) without a word."""
        seen = {series["metric"].get("namespace", "") for series in listed}
        if unseen := sorted(set(self.config.namespaces) - seen):
            log.warning("%s (%s): namespaces %s held no pod from %s to %s UTC (kube_pod_info), so none of theirs is "
                        "read; the namespaces seen: %s; check %s.namespaces for a typo", self.config.name,
                        self.config_path, ", ".join(unseen), minute_text(start), minute_text(end),
                        ", ".join(sorted(seen - {""})[:20]) or "none", self.config_path)

    def _warn_unlabelled(self, reported: list[Series], start: datetime, end: datetime, deadline: Deadline) -> None:
        """`cluster_label` on no kube_pod_info series of the window (a typo, a label the scrape
        does not add): every pod falls back to `cluster` without a word, several clusters' pods
        then one cluster's. One line naming the key and the labels a series carries (kube_pod_info
        as of kube-state-metrics' last scrape: one series)."""
        c = self.config
        last = datetime.fromtimestamp(max(value for series in reported for _, value in series["values"]), timezone.utc)
        try:  # only to word the warning: the pods were read, so a failing query does not fail the source
            carried = ", ".join(sorted({label for series in self._query("topk(1, kube_pod_info)", last, last,
                                                                         c.step_seconds, deadline)
                                        for label in series["metric"] if label != "__name__"})[:40]) or "none"
        except SourceError as exc:
            carried = f"not read ({exc.message})"
        fallback = f"cluster {c.cluster} ({self.config_path}.cluster)" if c.cluster else "no cluster"
        log.warning("%s (%s): cluster_label %s is on no kube_pod_info series from %s to %s UTC, so every pod is read "
                    "as of %s; the labels its series carry: %s; check %s.cluster_label", c.name, self.config_path,
                    c.cluster_label, minute_text(start), minute_text(end), fallback, carried, self.config_path)

    def _warn_unread(self, unread: list[Series]) -> None:
        """Pods asking for an accelerator's resource spendlake does not read (a GPU shared under a
        name the device plugin's config gave it, a NeuronCore) and for no GPU it reads: they would
        hold no GPU, and their nodes' cost go to idle, without a word. One line, naming each
        resource and the key to set."""
        pods: dict[str, set[tuple[str, str]]] = {}
        for series in unread:
            labels = series["metric"]
            pods.setdefault(labels.get("resource", ""), set()).add((labels.get("namespace", ""), labels.get("pod", "")))
        if pods:
            first = min(min(named) for named in pods.values())
            log.warning("%s (%s): pods requested %s and no GPU resource spendlake reads (the first, %s/%s): they "
                        "are counted as holding no GPU, so their nodes' cost goes to idle; if it is a GPU shared by "
                        "time-slicing or MPS under a name the device plugin's config gave it (or a NeuronCore, a share of a Neuron "
                        "device), set %s.shared_gpus: {%s: <replicas per GPU>}", self.config.name, self.config_path,
                        ", ".join(f"{name} ({len(named)} pod(s))" for name, named in sorted(pods.items())),
                        *first, self.config_path, min(pods))

    def _gpu_use(self, start: datetime, end: datetime,
                 deadline: Deadline) -> dict[tuple[str, str, str], dict[datetime, float]]:
        """(cluster, namespace, pod) → hour → mean use %, from the first DCGM metric that has the pod.
        `avg_over_time(...[1h])` at each hour's end is that hour's mean."""
        c = self.config
        first_end = start.replace(minute=0, second=0) + timedelta(hours=1)
        last_end = end.replace(minute=0, second=0)
        if last_end < first_end:
            return {}
        by = ", ".join([*(label for pair in POD_LABELS for label in pair),
                        *([c.cluster_label] if c.cluster_label else [])])
        use: dict[tuple[str, str, str], dict[datetime, float]] = {}
        for metric in c.dcgm_metrics:
            scale = 100.0 if metric in RATIO_METRICS else 1.0
            found: dict[tuple[str, str, str], dict[datetime, float]] = {}
            for series in self._query(f"avg by ({by}) (avg_over_time({metric}[1h]))", first_end, last_end, 3600,
                                      deadline):
                cluster, namespace, pod = self._gpu_pod(series["metric"])
                if not pod or (c.namespaces and namespace not in c.namespaces) or (cluster, namespace, pod) in use:
                    continue
                hours = found.setdefault((cluster, namespace, pod), {})
                for timestamp, value in series["values"]:
                    hour = datetime.fromtimestamp(timestamp, tz=timezone.utc).replace(tzinfo=None) - timedelta(hours=1)
                    hours[hour] = value * scale
            use.update(found)
        return use

    def _mig_profiles(self, start: datetime, end: datetime, deadline: Deadline) -> dict[tuple[str, str, str], str]:
        """(cluster, namespace, pod) → the GPU_I_PROFILE (`1g.10gb`) on its DCGM series: the pod
        runs on a MIG device, whatever resource name it requested."""
        c = self.config
        by = ", ".join([*(label for pair in POD_LABELS for label in pair), "GPU_I_PROFILE",
                        *([c.cluster_label] if c.cluster_label else [])])
        selector = f'{{__name__=~"{"|".join(c.dcgm_metrics)}", GPU_I_PROFILE!=""}}'
        profiles: dict[tuple[str, str, str], str] = {}
        first = min(start + timedelta(hours=1), end)
        for series in self._query(f"group by ({by}) (last_over_time({selector}[1h]))", first, end, 3600, deadline):
            cluster, namespace, pod = self._gpu_pod(series["metric"])
            if pod:
                profiles[(cluster, namespace, pod)] = series["metric"]["GPU_I_PROFILE"]
        return profiles

    def _gpu_pod(self, labels: dict[str, str]) -> tuple[str, str, str | None]:
        """(cluster, namespace, pod) of a DCGM exporter series (POD_LABELS); pod None: no pod holds the GPU."""
        c = self.config
        namespace, pod = next(((labels.get(ns, ""), labels[name]) for ns, name in POD_LABELS if labels.get(name)),
                              ("", None))
        return (labels.get(c.cluster_label) if c.cluster_label else None) or c.cluster or "", namespace, pod

    def _query(self, query: str, start: datetime, end: datetime, step: int, deadline: Deadline) -> list[Series]:
        c = self.config
        return query_range(c.prometheus_url, query, start, end, step, timeout=c.timeout_seconds,
                           attempts=c.max_attempts, hint=f"check {self.config_path}.prometheus_url and that "
                                                         "kube-state-metrics is scraped", access=self._access,
                           config_path=self.config_path, deadline=deadline)

    @cached_property
    def _access(self) -> tuple[Signer | None, str]:
        return prometheus_access(self.config.sigv4, self.config.prometheus_url, self.config_path)
