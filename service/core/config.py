"""YAML configuration → typed, frozen objects. Unknown keys are rejected.

Lookup order: `--config PATH`, else `$SPENDLAKE_CONFIG`, else `./spendlake.yaml`; with
none of them, the defaults (a local lake and no sources). Every error carries a dotted
path such as `sources[2].location`.
"""

from __future__ import annotations

import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from service.core.config_attribution import AttributionConfig
from service.core.config_base import NestedValueError, Strict
from service.core.config_budgets import BudgetConfig
from service.core.config_jobs import JobsFileSource
from service.core.errors import ConfigError

DEFAULT_CONFIG_FILE = "spendlake.yaml"
DEFAULT_LAKE = "./spendlake-data/lake"

SourceKind = Literal["aws-cur", "aws-cur2", "focus", "gcp-billing", "azure-cost", "oci-cost"]


class SourceConfig(Strict):
    """One billing export to ingest."""

    name: str = Field(pattern=r"^[a-z0-9-]+$", max_length=64)
    kind: SourceKind
    location: str = Field(min_length=1, description="s3://bucket/prefix, a local directory or a local file")
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    report_name: str | None = None
    max_attempts: int = Field(default=5, ge=1, le=20)
    freshness_hours: int = Field(default=36, ge=1, description="/readyz fails when older than this")
    cost_type: Literal["auto", "actual", "amortized"] = Field(
        default="auto", description="azure-cost only: which cost the export holds; auto decides from its rows")

    @model_validator(mode="after")
    def _cost_type_is_azure_only(self) -> SourceConfig:
        if self.cost_type != "auto" and self.kind != "azure-cost":
            raise ValueError("cost_type applies to kind azure-cost only")
        return self

    @property
    def is_s3(self) -> bool:
        return self.location.startswith("s3://")


class GpuTypeConfig(Strict):  # a price for a built-in GPU type of `spendlake estimate`, or a new type
    peak_bf16_tflops: Decimal | None = Field(default=None, gt=0, description="dense, from the datasheet")
    price_per_gpu_hour: Decimal | None = Field(default=None, ge=0)


class EstimateConfig(Strict):
    gpus: dict[str, GpuTypeConfig] = Field(default_factory=dict)
    # S3 Standard, us-east-1, first 50 TB (aws.amazon.com/s3/pricing).
    storage_price_per_gb_month: Decimal = Field(default=Decimal("0.023"), ge=0)


class ReportConfig(Strict):
    # None: `reports/` next to the lake directory, i.e. ./spendlake-data/reports by default.
    out: str | None = Field(default=None, min_length=1, description="a local directory or s3://bucket/prefix")
    top: int = Field(default=10, ge=1, le=100, description="rows in each top-N table")


class InventorySource(Strict):
    """Settings shared by every inventory source (see connectors/inventory_base.py)."""

    name: str = Field(pattern=r"^[a-z0-9-]+$", max_length=64)
    regions: tuple[str, ...] = Field(default=(), description="AWS regions to read; empty: the profile's region")
    endpoint_url: str | None = None
    profile: str | None = None
    max_attempts: int = Field(default=5, ge=1, le=20)
    path: str | None = Field(default=None, description="read a local file or directory instead of the AWS API")


class AwsTagsSource(InventorySource):
    """Resource Groups Tagging API GetResources → resource_tags."""

    kind: Literal["aws-tags"]
    resource_types: tuple[str, ...] = Field(default=(), description="ResourceTypeFilters, e.g. ec2:instance")


class S3Location(Strict):
    bucket: str = Field(min_length=3, max_length=63)
    prefixes: tuple[str, ...] = ("",)


class S3ObjectsSource(InventorySource):
    """ListObjectsV2 and S3 Inventory reports → s3_objects; lifecycle rules → s3_buckets."""

    kind: Literal["s3-objects"]
    buckets: tuple[S3Location, ...] = ()
    inventory_manifests: tuple[str, ...] = Field(
        default=(), description="manifest.json of S3 Inventory reports: s3://bucket/key or a local path")
    lifecycle: bool = Field(default=True, description="read GetBucketLifecycleConfiguration of each bucket")
    lifecycle_path: str | None = Field(
        default=None, description="local JSON {bucket: lifecycle configuration or null} instead of the API")


class CloudWatchLogsSource(InventorySource):
    """DescribeLogGroups → log_groups."""

    kind: Literal["cloudwatch-logs"]
    name_prefix: str | None = None


GpuMetricName = Literal["DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"]


class GpuMetricsSource(InventorySource):
    """GPU utilisation per instance, GPU and hour → gpu_utilization. Exactly one of
    `prometheus_url` (DCGM exporter series), `cloudwatch: true` (CloudWatch agent) or `path`."""

    kind: Literal["gpu-metrics"]
    prometheus_url: str | None = Field(default=None, pattern=r"^https?://")
    instance_label: str = Field(default="instance_id", pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")
    gpu_label: str = Field(default="gpu", pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")
    metrics: tuple[GpuMetricName, ...] = Field(
        default=("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"),
        min_length=1, description="DCGM series in order of preference; the first with data is used per instance")
    cloudwatch: bool = False
    cloudwatch_namespace: str = "CWAgent"
    cloudwatch_metric: str = "nvidia_smi_utilization_gpu"
    lookback_hours: int = Field(default=48, ge=1, le=24 * 31)
    timeout_seconds: float = Field(default=30, gt=0, le=600)

    @model_validator(mode="after")
    def _one_origin(self) -> GpuMetricsSource:
        chosen = [n for n, v in (("prometheus_url", self.prometheus_url), ("cloudwatch", self.cloudwatch),
                                 ("path", self.path)) if v]
        if len(chosen) != 1:
            raise ValueError("set exactly one of prometheus_url, cloudwatch: true or path"
                             + (f" (found {', '.join(chosen)})" if chosen else ""))
        return self


InventorySourceConfig = Annotated[
    Union[AwsTagsSource, S3ObjectsSource, CloudWatchLogsSource, GpuMetricsSource, JobsFileSource],
    Field(discriminator="kind")]


class ServiceConfig(Strict):
    """`spendlake serve`: listen address, job schedule (UTC), bearer token, metric label bound."""

    listen: str = Field(default="127.0.0.1:9464", description="host:port")
    ingest_every_minutes: int = Field(default=60, ge=1, le=24 * 60)
    daily_at: str = Field(default="06:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$", description="HH:MM, UTC")
    api_token: str | None = Field(default=None, min_length=16, description="$SPENDLAKE_API_TOKEN takes precedence")
    top_n: int = Field(default=20, ge=1, le=200, description="label values per metric before folding into `other`")

    @field_validator("listen")
    @classmethod
    def _host_and_port(cls, listen: str) -> str:
        host, sep, port = listen.rpartition(":")
        if not sep or not host.strip("[]") or any(c.isspace() for c in listen) or not port.isdigit() \
                or not 0 <= int(port) <= 65535:
            raise ValueError(f"{listen!r} is not HOST:PORT with a port from 0 to 65535 (e.g. 127.0.0.1:9464)")
        return listen


class EngineConfig(Strict):
    """What executes the attribution SQL: DuckDB in-process, or Apache Spark (`pip install
    'spendlake[spark]'`) at `master` (`local[2]`, `spark://host:7077`, ...) with extra `options`,
    reading the lake at `lake` (a path every Spark node sees, or `s3a://bucket/prefix`)."""

    kind: Literal["duckdb", "spark"] = "duckdb"
    master: str = Field(default="local[2]", min_length=1)
    lake: str | None = Field(default=None, description="where Spark reads the lake; default: the top-level `lake`")
    endpoint_url: str | None = Field(default=None, pattern=r"^https?://\S+$",
                                     description="S3-compatible endpoint for s3a:// (path-style access)")
    options: dict[str, str] = Field(default_factory=dict, description="spark.* settings, e.g. spark.jars")

    @field_validator("lake")
    @classmethod
    def _lake_location(cls, lake: str | None) -> str | None:
        if lake is not None and not re.match(r"^(/|[A-Za-z][A-Za-z0-9+.-]*://[^\s/])\S*$", lake):
            raise ValueError(f"{lake!r} is neither an absolute path nor a URL such as s3a://bucket/lake")
        return lake


class Config(Strict):
    lake: Path = Path(DEFAULT_LAKE)
    sources: tuple[SourceConfig, ...] = ()
    estimate: EstimateConfig = EstimateConfig()
    report: ReportConfig = ReportConfig()
    inventory: tuple[InventorySourceConfig, ...] = ()
    attribution: AttributionConfig = Field(default_factory=AttributionConfig)
    service: ServiceConfig = ServiceConfig()
    budgets: tuple[BudgetConfig, ...] = ()
    engine: EngineConfig = EngineConfig()
    rules: dict[str, dict[str, Any]] = Field(default_factory=dict)  # each checked by rules.base.configure

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, sources: tuple[SourceConfig, ...]) -> tuple[SourceConfig, ...]:
        seen: set[str] = set()
        for source in sources:
            if source.name in seen:
                raise ValueError(f"source name {source.name!r} is used twice; names must be unique")
            seen.add(source.name)
        return sources

    @model_validator(mode="after")
    def _budgets_fit(self) -> Config:
        names = [b.name for b in self.budgets]
        for index, budget in enumerate(self.budgets):
            if names.index(budget.name) != index:
                raise NestedValueError(("budgets", index, "name"), f"budget name {budget.name!r} is used twice")
            if budget.dimension not in self.attribution.dimensions:
                raise NestedValueError(("budgets", index, "dimension"), f"unknown dimension {budget.dimension!r}; "
                                       f"declared: {', '.join(self.attribution.dimensions)}")
        return self

    @model_validator(mode="after")
    def _unique_inventory_names(self) -> Config:
        seen = {source.name for source in self.sources}
        for source in self.inventory:
            if source.name in seen:
                raise ValueError(f"inventory source name {source.name!r} is used twice (sources and inventory "
                                 "share one namespace); names must be unique")
            seen.add(source.name)
        return self

    def inventory_source(self, name: str) -> InventorySource:
        for source in self.inventory:
            if source.name == name:
                return source
        known = ", ".join(s.name for s in self.inventory) or "none configured"
        raise ConfigError(f"no inventory source named {name!r}", where="inventory", hint=f"known: {known}")

    def source(self, name: str) -> SourceConfig:
        for source in self.sources:
            if source.name == name:
                return source
        known = ", ".join(s.name for s in self.sources) or "none configured"
        raise ConfigError(f"no source named {name!r}", where="sources", hint=f"known sources: {known}")


def dotted_path(loc: tuple[Any, ...]) -> str:
    """('sources', 2, 'location') → 'sources[2].location'."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "(top level)"


def _raise_validation(exc: ValidationError, file: str) -> None:
    lines = []
    for error in exc.errors():
        loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, NestedValueError):
            loc += cause.subpath
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key; check its spelling against the documented settings"
        lines.append(f"{dotted_path(loc)}: {message}")
    raise ConfigError("; ".join(lines), where=file, hint="fix the config and run `spendlake config validate`")


def parse_config(data: Any, file: str = "<config>") -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("the top level must be a mapping of settings", where=file)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        _raise_validation(exc, file)
    base = Path(file).parent if file != "<config>" else Path.cwd()
    if not config.lake.is_absolute():
        config = config.model_copy(update={"lake": (base / config.lake).resolve()})
    return config


def resolve_config_path(explicit: str | os.PathLike[str] | None) -> Path | None:
    if explicit:
        return Path(explicit)
    env = os.environ.get("SPENDLAKE_CONFIG")
    if env:
        return Path(env)
    local = Path(DEFAULT_CONFIG_FILE)
    return local if local.exists() else None


def load_config(explicit: str | os.PathLike[str] | None = None) -> Config:
    path = resolve_config_path(explicit)
    if path is None:
        return parse_config({}, "<defaults>")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("config file not found", where=str(path), hint="pass --config PATH or set SPENDLAKE_CONFIG") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config: {exc}", where=str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}", where=str(path)) from None
    return parse_config(data, str(path))
