"""gpu-metrics: GPU utilisation per instance, GPU and hour → `gpu_utilization`.

Three origins (exactly one per source):
- `prometheus_url`: the HTTP API's `query_range` over DCGM exporter series, hourly:
  `avg by (<instance_label>, <gpu_label>, GPU_I_PROFILE, GPU_I_ID) (avg_over_time(<metric>[1h]))`
  evaluated at each hour's end gives that hour's mean. Metrics are tried in the configured order
  (DCGM_FI_PROF_SM_ACTIVE, DCGM_FI_PROF_GR_ENGINE_ACTIVE, then DCGM_FI_DEV_GPU_UTIL); each
  instance keeps the first metric that has data for it, recorded in `metric`. Ratios (0-1)
  become percentages; a MIG GPU, reported per GPU instance (GPU_I_PROFILE), is the sum of its
  instances' use each at its share of the GPU. The instance id comes from `instance_label`
  (e.g. a relabelled `instance_id` carrying the EC2 instance id, as in the bill's ResourceId); asked through
  connectors/prometheus_api.py as k8s-pods asks (an answer with warnings, partial, fails;
  each query tried up to `max_attempts` times, as CloudWatch's calls are, all of them, each metric's
  and each piece's, within `deadline_seconds` (300 s, or timeout_seconds per metric when more, at most 3600): a
  Prometheus that does not answer held the source max_attempts x timeout_seconds per metric, 7.5
  minutes by default, and serve's jobs with it);
- `cloudwatch: true`: CloudWatch `GetMetricData` (Average, hourly) over the CloudWatch
  agent's `nvidia_smi_utilization_gpu` (namespace CWAgent) for every metric with an
  `InstanceId` dimension, per region; the `index` dimension is the GPU. All the regions' calls,
  their attempts and backoffs, within the same `deadline_seconds` (aws_client.ends_by; by default
  timeout_seconds for two calls in each region when that is more than 300 s), each
  attempt's connect and reads within timeout_seconds: an endpoint not answering held the source
  max_attempts x botocore's 60 s connect and 60 s read per call, for every region;
- `path`: CSV/Parquet files with the table's columns.
Every hour also gets an instance aggregate row (`gpu` NULL): the mean over its GPUs.
The window is `lookback_hours` back from the last full hour, widened to whole UTC days:
each day of data replaces the partition `day=YYYY-MM-DD`.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

import duckdb
from pydantic import Field, model_validator

from connectors.aws_client import aws_error, default_region, held_client
from connectors.aws_sigv4 import Sigv4, check_sigv4, prometheus_access
from connectors.inventory_base import (FileOrApiConnector, SnapshotPart, local_files, read_table_file,
                                       rows_relation)
from connectors.jobs_base import mig_fraction
from connectors.prometheus_api import query_range
from service.core.source_deadline import RequestLimits
from service.core.config import InventorySource
from service.core.config_base import HttpUrl, exactly_one
from service.core.errors import SourceError
from service.core.registry import Feeds
from service.core.units import naive_utc

# DCGM fields reported as a 0-1 ratio; the others are already percentages.
RATIO_METRICS = frozenset({"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"})
CLOUDWATCH_QUERIES_PER_CALL = 500  # GetMetricData's limit


def window(now: datetime, lookback_hours: int) -> tuple[datetime, datetime]:
    """[start, end) in naive UTC: end is the last full hour, start midnight of the first day."""
    now = now.astimezone(timezone.utc).replace(tzinfo=None)
    end = now.replace(minute=0, second=0, microsecond=0)
    start = (end - timedelta(hours=lookback_hours)).replace(hour=0)
    return start, end


# dcgm-exporter reports a MIG GPU per GPU instance only (monitorAllGPUInstances), each with its profile
MIG_LABELS = ("GPU_I_PROFILE", "GPU_I_ID")


def gpu_use(parts: list[tuple[str, float]]) -> float:
    """A GPU's use % from its series: a MIG GPU's instances (`3g.40gb`, use % of the instance) each
    at its share of the GPU, slices not created counting as unused; else their mean."""
    fractions = [mig_fraction(profile) if profile else None for profile, _ in parts]
    if all(fractions):
        return sum(use * fraction for (_, use), fraction in zip(parts, fractions))  # type: ignore[operator]
    return sum(use for _, use in parts) / len(parts)


def _gpu_index(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# what a `path` source does not read: the Prometheus and CloudWatch window, series and labels
PATH_UNREAD = frozenset({"lookback_hours", "instance_label", "gpu_label", "metrics", "cloudwatch_namespace",
                         "cloudwatch_metric"})
GpuMetricName = Literal["DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"]


class GpuMetricsSource(InventorySource, RequestLimits):
    """GPU utilisation per instance, GPU and hour → gpu_utilization. Exactly one of
    `prometheus_url` (DCGM exporter series), `cloudwatch: true` (CloudWatch agent) or `path`."""

    prometheus_url: HttpUrl | None = None  # as slurm-jobs and k8s-pods
    sigv4: Sigv4 | None = Field(default=None, description="sign queries for Amazon Managed Service for Prometheus")
    instance_label: str = Field(default="instance_id", pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")
    gpu_label: str = Field(default="gpu", pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")
    metrics: tuple[GpuMetricName, ...] = Field(
        default=("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"),
        min_length=1, description="DCGM series in order of preference; the first with data is used per instance")
    cloudwatch: bool = False
    cloudwatch_namespace: str = "CWAgent"
    cloudwatch_metric: str = "nvidia_smi_utilization_gpu"
    lookback_hours: int = Field(default=48, ge=1, le=24 * 31)

    def requests(self) -> int:
        """The default deadline's count (timeout_seconds and deadline_seconds: RequestLimits): one Prometheus
        query for each metric; CloudWatch's list_metrics and get_metric_data calls, a page each, for each region."""
        return 2 * max(1, len(self.regions)) if self.cloudwatch else len(self.metrics)

    def unread_settings(self) -> frozenset[str]:
        """A `path` source reads every row of its files: the API's window, series and labels are not read."""
        return PATH_UNREAD if self.path else frozenset()

    @model_validator(mode="after")
    def _one_origin(self) -> GpuMetricsSource:
        exactly_one(self, {"prometheus_url": "prometheus_url", "cloudwatch": "cloudwatch: true", "path": "path"})
        check_sigv4(self.sigv4, self.prometheus_url)
        return self


class GpuMetricsConnector(FileOrApiConnector[GpuMetricsSource]):
    kind = "gpu-metrics"
    feeds = Feeds.series("gpu_utilization")

    def snapshot(self, con: duckdb.DuckDBPyConnection, scratch: Path, now: datetime) -> list[SnapshotPart]:
        start, end = window(now, self.config.lookback_hours)
        if self.config.path:
            files = local_files(self.config.path, f"{self.config_path}.path")
            relation = read_table_file(con, files[0], "gpu_utilization")
            for path in files[1:]:
                relation = relation.union(read_table_file(con, path, "gpu_utilization"))
        elif self.config.prometheus_url:
            relation = rows_relation(con, "gpu_utilization", self._prometheus_rows(start, end))
        else:
            relation = rows_relation(con, "gpu_utilization", self._cloudwatch_rows(start, end))
        return per_day(con, relation)

    # ---- Prometheus ---------------------------------------------------------------------------

    def _prometheus_rows(self, start: datetime, end: datetime) -> list[dict[str, Any]]:
        c = self.config
        rows: list[dict[str, Any]] = []
        covered: set[str] = set()  # instances that already have a more preferred metric
        access = prometheus_access(c.sigv4, c.prometheus_url, self.config_path)
        deadline = c.start_deadline(self.config_path)
        for metric in c.metrics:
            query = (f"avg by ({c.instance_label}, {c.gpu_label}, {', '.join(MIG_LABELS)}) "
                     f"(avg_over_time({metric}[1h]))")
            result = query_range(c.prometheus_url, query, start + timedelta(hours=1), end, 3600,
                                 timeout=c.timeout_seconds, attempts=c.max_attempts, access=access,
                                 hint=f"check {self.config_path}.prometheus_url and the query",
                                 config_path=self.config_path, deadline=deadline)
            scale = 100.0 if metric in RATIO_METRICS else 1.0
            found: set[str] = set()
            unlabelled = 0
            # (instance, gpu, hour) → (MIG profile or "", use %) of each GPU instance, or of the GPU
            parts: dict[tuple[str, int | None, datetime], list[tuple[str, float]]] = {}
            for series in result:
                instance = series.get("metric", {}).get(c.instance_label)
                if not instance:
                    unlabelled += 1
                    continue
                if instance in covered:
                    continue
                found.add(instance)
                gpu = _gpu_index(series["metric"].get(c.gpu_label))
                profile = series["metric"].get(MIG_LABELS[0], "")
                for timestamp, value in series.get("values", []):
                    util = float(value)
                    if math.isnan(util):
                        continue
                    hour = datetime.fromtimestamp(float(timestamp), tz=timezone.utc).replace(tzinfo=None)
                    parts.setdefault((instance, gpu, hour - timedelta(hours=1)), []).append((profile, util * scale))
            rows += [{"resource_id": instance, "gpu": gpu, "hour": hour, "util_pct": gpu_use(shares), "metric": metric}
                     for (instance, gpu, hour), shares in parts.items()]
            if unlabelled and not found and not covered:
                raise SourceError(f"{metric} series carry no {c.instance_label!r} label", where=c.prometheus_url,
                                  hint=f"set {self.config_path}.instance_label to the label holding the EC2 "
                                       "instance id (relabel the DCGM exporter's targets to add one)")
            covered |= found
        return rows

    # ---- CloudWatch ---------------------------------------------------------------------------

    def _cloudwatch_rows(self, start: datetime, end: datetime) -> list[dict[str, Any]]:
        from botocore.exceptions import BotoCoreError, ClientError

        c = self.config
        rows: list[dict[str, Any]] = []
        deadline = c.start_deadline(self.config_path)  # all regions' calls
        for region in c.regions or (default_region(c.profile, self.config_path),):
            where = f"region {region}, namespace {c.cloudwatch_namespace}"
            client = held_client("cloudwatch", c, config_path=self.config_path, region=region, deadline=deadline,
                                 where=where, smaller=f"read a shorter window ({self.config_path}.lookback_hours) or "
                                                     f"fewer regions ({self.config_path}.regions)")
            action = "cloudwatch:ListMetrics"
            try:
                metrics = [m for page in client.get_paginator("list_metrics").paginate(
                               Namespace=c.cloudwatch_namespace, MetricName=c.cloudwatch_metric)
                           for m in page.get("Metrics", [])]
                dims = [{d["Name"]: d["Value"] for d in m.get("Dimensions", [])} for m in metrics]
                wanted = [(m, d) for m, d in zip(metrics, dims) if d.get("InstanceId")]
                action = "cloudwatch:GetMetricData"
                for first in range(0, len(wanted), CLOUDWATCH_QUERIES_PER_CALL):
                    batch = wanted[first:first + CLOUDWATCH_QUERIES_PER_CALL]
                    queries = [{"Id": f"m{n}", "ReturnData": True,
                                "MetricStat": {"Metric": metric, "Period": 3600, "Stat": "Average"}}
                               for n, (metric, _) in enumerate(batch)]
                    pages = client.get_paginator("get_metric_data").paginate(
                        MetricDataQueries=queries, StartTime=start.replace(tzinfo=timezone.utc),
                        EndTime=end.replace(tzinfo=timezone.utc))
                    for page in pages:
                        for result in page.get("MetricDataResults", []):
                            dimensions = batch[int(result["Id"][1:])][1]
                            for timestamp, value in zip(result.get("Timestamps", []), result.get("Values", [])):
                                rows.append({"resource_id": dimensions["InstanceId"],
                                             "gpu": _gpu_index(dimensions.get("index")),
                                             "hour": naive_utc(timestamp), "util_pct": float(value),
                                             "metric": c.cloudwatch_metric})
            except (ClientError, BotoCoreError) as exc:
                raise aws_error(exc, action, where, self.config_path) from None
        return rows


# One UTC day's rows from its readings ($1 <= hour < $2): hourly rows per GPU, plus for each
# instance-hour without one an aggregate row (gpu NULL) with the mean over its GPUs. Means are
# summed in a fixed order, so the same input gives the same bits whatever DuckDB's threads do. An
# hour of one reading (a file hourly already, the usual one) is its own mean in any order: only
# hours of several readings pay for the ordered mean, which sorts each group.
DAY_ROWS = """
WITH readings AS (SELECT * FROM {readings} WHERE hour >= $1 AND hour < $2),
counted AS MATERIALIZED (
    SELECT resource_id, gpu, date_trunc('hour', hour) AS hour, count(*) AS n, avg(util_pct) AS util_pct, metric
    FROM readings GROUP BY ALL),
hourly AS MATERIALIZED (
    SELECT resource_id, gpu, hour, util_pct, metric FROM counted WHERE n = 1
    UNION ALL
    SELECT resource_id, gpu, date_trunc('hour', hour) AS hour, avg(util_pct ORDER BY hour, util_pct) AS util_pct, metric
    FROM readings r SEMI JOIN (SELECT * FROM counted WHERE n > 1) c
      ON c.resource_id = r.resource_id AND c.gpu IS NOT DISTINCT FROM r.gpu AND c.hour = date_trunc('hour', r.hour)
        AND c.metric IS NOT DISTINCT FROM r.metric
    GROUP BY ALL)
SELECT * FROM hourly
UNION ALL
SELECT h.resource_id, CAST(NULL AS INTEGER), h.hour, avg(h.util_pct ORDER BY h.gpu), h.metric
FROM hourly h ANTI JOIN (SELECT * FROM hourly WHERE gpu IS NULL) a
  ON a.resource_id = h.resource_id AND a.hour = h.hour AND a.metric IS NOT DISTINCT FROM h.metric
WHERE h.gpu IS NOT NULL
GROUP BY h.resource_id, h.hour, h.metric"""


def per_day(con: duckdb.DuckDBPyConnection, relation: duckdb.DuckDBPyRelation) -> list[SnapshotPart]:
    """One part per UTC day that has data (a day without data keeps what the lake holds): its
    GPUs' hourly means and their instance aggregates (DAY_ROWS). The readings are sorted by day
    once and each day's rows computed from its own, a range the scan skips the other days' row
    groups for, into one table in order of day, each day's part a range of it again. Grouped a
    day at a time, the hourly means of a 90-day file are 90 small hash tables where all its 4.32M
    readings were one (1.8 CPU s), and the rows were sorted by hour once more (2.3)."""
    readings, rows = (f"gpu_{uuid.uuid4().hex}" for _ in range(2))
    relation.filter("resource_id IS NOT NULL AND hour IS NOT NULL AND util_pct IS NOT NULL") \
        .order("CAST(hour AS DATE)").create(readings)
    days = [day for (day,) in con.execute(f"SELECT DISTINCT CAST(hour AS DATE) FROM {readings} ORDER BY 1").fetchall()]
    con.execute(f"CREATE TABLE {rows} AS SELECT * FROM {readings} LIMIT 0")
    for day in days:
        con.execute(f"INSERT INTO {rows} {DAY_ROWS.format(readings=readings)}", [day, day + timedelta(days=1)])
    con.execute(f"DROP TABLE {readings}")
    return [SnapshotPart("gpu_utilization",
                         con.sql(f"SELECT * FROM {rows} WHERE hour >= ? AND hour < ?",
                                 params=[day, day + timedelta(days=1)]),
                         partition=day.isoformat())
            for day in days]
