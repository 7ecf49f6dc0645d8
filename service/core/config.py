"""YAML configuration → typed, frozen objects. Unknown keys are rejected.

Where the file is looked for, its size limit and its YAML rules (unique keys, bounded
lists): service.core.config_file. Every error carries a dotted path such as
`sources[2].location`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from service.core.config_attribution import AttributionConfig
from service.core.config_base import HttpUrl, InventoryEntry, NestedValueError, SourceEntry, Strict
from service.core.config_budgets import BudgetConfig, each_budget
from service.core.config_clusters import JOB_DIMENSIONS
from service.core.config_estimate import EstimateConfig
from service.core.config_file import ConfigLoader as ConfigLoader  # re-exported: what every YAML config is read with
from service.core.config_file import check_sizes, find_config, no_config_error, read_config_file
from service.core.config_paths import anchored, check_outside_lake, read_locations, within
from service.core.config_plugins import by_kind, by_rule
from service.core.errors import ConfigError
from service.core.source_deadline import MAX_DEADLINE, RequestLimits
from service.core.validation import plain_errors

DEFAULT_LAKE = "./spendlake-data/lake"

KIND_PATTERN = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$"
# a host name: dot-separated labels of letters, digits and inner hyphens or underscores (Compose and Docker
# service names such as `spend_lake` resolve inside their network and come as Host), a trailing dot allowed
HOST_LABEL = r"[A-Za-z0-9]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?"
HOST_NAME = re.compile(rf"(?=.{{1,253}}\.?$){HOST_LABEL}(\.{HOST_LABEL})*\.?")
MAX_BILLING_DEADLINE = 24 * 3600.0  # seconds: deadline_seconds of a billing source at most


class SourceConfig(SourceEntry, RequestLimits):
    """One billing export to ingest: what every billing kind takes. A connector whose kind
    takes more subclasses it beside its code and declares it as its `config_model`. On S3,
    timeout_seconds bounds each attempt's connect and each read, deadline_seconds all of an
    ingest's calls of the source (connectors/storage.py)."""

    name: str = Field(pattern=r"^[a-z0-9-]+$", max_length=64)
    kind: str = Field(pattern=KIND_PATTERN, description="a billing connector kind, e.g. aws-cur2 or focus")
    location: str = Field(min_length=1, description="s3://bucket/prefix, a local directory or a local file")
    endpoint_url: HttpUrl | None = None
    region: str | None = None
    profile: str | None = None
    max_attempts: int = Field(default=5, ge=1, le=20)
    freshness_hours: int = Field(default=36, ge=1, le=24 * 3650, description="stale (report, status, /readyz, alert) when "
                                 "the data or the last successful ingest is older than this")
    # an hour by default, as the inventory kinds at most; a delivery whose files take longer to download
    # (a first backfill of a very large export) needs it raised, up to a day
    deadline_seconds: float | None = Field(default=None, gt=0, le=MAX_BILLING_DEADLINE, description=(
        "all of an ingest's S3 calls of the source, their attempts and backoffs; at least timeout_seconds "
        "(default: 3600, at most 86400)"))

    @property
    def is_s3(self) -> bool:
        return self.location.startswith("s3://")

    @property
    def deadline(self) -> float:
        """deadline_seconds, else MAX_DEADLINE: the calls an ingest makes (a listing, a GET for each file,
        a ranged GET for each 8 MB of a large one) are known only once it has listed, so none are counted."""
        return self.deadline_seconds or MAX_DEADLINE


class ReportConfig(RequestLimits):
    """`spendlake report` and the reports serve shows; on S3 (`out: s3://...`) timeout_seconds bounds each
    attempt's connect and each read, deadline_seconds all of a report's uploads, and each page or file serve
    reads of them (service/serve/report_store.py)."""

    # None: `reports/` next to the lake directory, i.e. ./spendlake-data/reports by default.
    out: str | None = Field(default=None, min_length=1, description="a local directory or s3://bucket/prefix")
    top: int = Field(default=10, ge=1, le=100, description="rows in each top-N table")
    # the Shared GPU clusters section's cost: billed by default, as `runs` and /metrics show a run;
    # effective: a run on Savings Plan or reserved nodes costs its share of the commitment, not $0
    clusters_cost: Literal["effective", "billed"] = Field(
        default="billed", description="the cost the Shared GPU clusters section places on runs, jobs and idle")
    # on S3, as a billing source's: the endpoint, the profile, and each call's attempts and their bounds
    endpoint_url: HttpUrl | None = None
    profile: str | None = None
    max_attempts: int = Field(default=5, ge=1, le=20, description="S3 calls' attempts (standard retry mode)")
    timeout_seconds: float = Field(default=30, gt=0, le=600, description="each S3 attempt's connect and each read")
    deadline_seconds: float | None = Field(default=None, gt=0, le=MAX_DEADLINE, description=(
        "all of a report's S3 uploads, their attempts and backoffs, and the S3 calls of each page or file serve "
        "shows of them; at least timeout_seconds (default: 300, or timeout_seconds when more)"))

    HELD: ClassVar[str] = "the report's S3 calls"

    def requests(self) -> int:
        """None counted: a report's files are known once rendered, serve's listings once listed."""
        return 1


class Freshness(InventoryEntry):
    """The setting every inventory source has, job sources included."""

    freshness_hours: int = Field(default=36, ge=1, le=24 * 3650, description="stale when the latest snapshot or sample, or the "
                                 "last successful run, is older than this")


class InventorySource(Freshness):
    """Settings shared by every inventory source (see connectors/inventory_base.py); each kind
    subclasses it beside its connector and declares it as its `config_model`."""

    name: str = Field(pattern=r"^[a-z0-9-]+$", max_length=64)
    kind: str = Field(pattern=KIND_PATTERN, description="an inventory connector kind")
    regions: tuple[str, ...] = Field(default=(), description="AWS regions to read; empty: the profile's region")
    endpoint_url: HttpUrl | None = None
    profile: str | None = None
    max_attempts: int = Field(default=5, ge=1, le=20)
    path: str | None = Field(default=None, description="read a local file or directory instead of the AWS API")


class ServiceConfig(Strict):
    """`spendlake serve`: listen address, job schedule (UTC), bearer token, metric label bound."""

    listen: str = Field(default="127.0.0.1:9464", description="host:port")
    ingest_every_minutes: int = Field(default=60, ge=1, le=24 * 60)
    daily_at: str = Field(default="06:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$", description="HH:MM, UTC")
    api_token: str | None = Field(default=None, min_length=16, description="$SPENDLAKE_API_TOKEN takes precedence")
    top_n: int = Field(default=20, ge=1, le=200, description="label values per metric before folding into `other`")
    read_only: bool = Field(default=False, description=(
        "serve reads only (the API, /metrics, the reports stored) of a lake another job writes: no service lock, "
        "no scheduled ingest, rules, verify or daily report"))
    metrics_auth: Literal["open", "token"] = Field(
        default="open", description="`token`: /metrics needs api_token as /api does (Prometheus: authorization)")
    allowed_hosts: tuple[str, ...] = Field(default=(), max_length=100, description=(
        "host names a request's Host may name where no api_token guards the route (all of them without a token; "
        "/metrics with metrics_auth: open, /healthz, /readyz with one), besides localhost, IP addresses and "
        "the listen host (e.g. the Compose service name Prometheus scrapes)"))

    @field_validator("listen")
    @classmethod
    def _host_and_port(cls, listen: str) -> str:
        host, sep, port = listen.rpartition(":")
        if not sep or not host.strip("[]") or any(c.isspace() for c in listen) or not port.isdigit() \
                or not 0 <= int(port) <= 65535:
            raise ValueError(f"{listen!r} is not HOST:PORT with a port from 0 to 65535 (e.g. 127.0.0.1:9464)")
        return listen

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if not HOST_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a host name: give the name alone, without a scheme, port or path "
                                 "(e.g. spendlake or spendlake.example.com; localhost and IP addresses need no entry)")
        return names


class EngineConfig(Strict):
    """What executes the attribution SQL: DuckDB in-process, or Apache Spark (`pip install
    'spendlake[spark]'`) at `master` (`local[2]`, `spark://host:7077`, ...) with extra `options`,
    reading the lake at `lake` (a path every Spark node sees, or `s3a://bucket/prefix`)."""

    kind: Literal["duckdb", "spark"] = "duckdb"
    master: str = Field(default="local[2]", min_length=1)
    lake: str | None = Field(default=None, description="where Spark reads the lake; default: the top-level `lake`")
    endpoint_url: HttpUrl | None = Field(default=None,
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
    inventory: tuple[InventorySource, ...] = ()
    attribution: AttributionConfig = Field(default_factory=AttributionConfig)
    service: ServiceConfig = ServiceConfig()
    budgets: tuple[BudgetConfig, ...] = ()
    engine: EngineConfig = EngineConfig()
    rules: dict[str, dict[str, Any]] = Field(default_factory=dict)  # each checked by rules.base.configure
    _file: str = PrivateAttr(default="<config>")  # the file it was read from, for errors found later

    @property
    def file(self) -> str:
        return self._file

    @field_validator("lake", mode="before")
    @classmethod
    def _lake_named(cls, lake: Any) -> Any:
        """`lake: ""` (a template whose variable was unset) would put the lake beside the config."""
        if isinstance(lake, str) and not lake.strip():
            raise ValueError("must be a path, not an empty string")
        return lake

    @field_validator("rules", mode="wrap")
    @classmethod
    def _each_by_its_rule(cls, sections: Any, handler: Any) -> Any:
        return by_rule(handler(sections))  # handler: a mapping of mappings, or pydantic says what it is

    @field_validator("sources", "inventory", mode="wrap")
    @classmethod
    def _each_by_its_kind(cls, items: Any, handler: Any, info: Any) -> Any:
        if not isinstance(items, (list, tuple)):
            return handler(items)  # not a list: pydantic says so
        billing = info.field_name == "sources"
        return by_kind(info.field_name, items, SourceConfig if billing else InventorySource, billing)

    @field_validator("budgets", mode="wrap")
    @classmethod
    def _each_budget(cls, items: Any, handler: Any, info: Any) -> Any:
        attribution = info.data.get("attribution")  # declared before budgets; absent when it failed
        return each_budget(items, handler,
                           None if attribution is None else lambda dimension: _undeclared(attribution, dimension))

    @model_validator(mode="after")
    def _rule_dimensions_declared(self) -> Config:
        """spend-anomaly's `dimension`, unallocated-spend's `dimensions`: checked here, not when the rule runs"""
        for rule, section in self.rules.items():
            if isinstance(section.get("dimension"), str):
                self._declared(("rules", rule, "dimension"), section["dimension"])
            for index, name in enumerate(section.get("dimensions") or ()):
                self._declared(("rules", rule, "dimensions", index), name)
        return self

    def _declared(self, where: tuple[str | int, ...], dimension: str) -> None:
        if message := _undeclared(self.attribution, dimension):
            raise NestedValueError(where, message)

    @model_validator(mode="after")
    def _unique_inventory_names(self) -> Config:
        """A name of `sources` also under `inventory` (one section's twice by_kind says)."""
        seen = {source.name for source in self.sources}
        for source in self.inventory:
            if source.name in seen:
                raise ValueError(f"inventory source name {source.name!r} is used twice (sources and inventory "
                                 "share one namespace); names must be unique")
            seen.add(source.name)
        return self

    def inventory_source(self, name: str) -> InventorySource:
        elsewhere = "a billing source: `spendlake ingest --source` reads it" if self._has(self.sources, name) else ""
        return _named(self.inventory, name, "inventory", "inventory source", elsewhere)

    def source(self, name: str) -> SourceConfig:
        elsewhere = "an inventory source: `spendlake inventory --source` reads it" if self._has(self.inventory, name) else ""
        return _named(self.sources, name, "sources", "source", elsewhere)

    @staticmethod
    def _has(entries: tuple, name: str) -> bool:
        return any(entry.name == name for entry in entries)


def _undeclared(attribution: AttributionConfig, dimension: str) -> str | None:
    """Why `dimension` is not one to attribute by (None when it is declared)."""
    if dimension in attribution.dimensions:
        return None
    declared = ', '.join(attribution.dimensions)
    if dimension in JOB_DIMENSIONS and attribution.clusters is None:  # README's `dimension: job_type`
        return (f"{dimension!r} is a dimension of shared GPU clusters: add `clusters:` under `attribution:`; "
                f"declared now: {declared}")
    return f"unknown dimension {dimension!r}; declared: {declared}"


def _named(entries: tuple, name: str, section: str, what: str, elsewhere: str = ""):
    """The entry of `section` called `name`; a ConfigError lists the names there are, and says
    so when `name` is one of the other section (`elsewhere`: what it is there)."""
    for entry in entries:
        if entry.name == name:
            return entry
    known = ", ".join(e.name for e in entries) or "none configured"
    if elsewhere:
        raise ConfigError(f"{name!r} is {elsewhere}", where=section, hint=f"{section} here: {known}")
    raise ConfigError(f"no {what} named {name!r}", where=section, hint=f"known: {known}")


def _raise_validation(exc: ValidationError, data: Any, file: str) -> None:
    lines = [f"{path}: {message}" for path, message in plain_errors(exc, data, model=Config)]
    raise ConfigError("; ".join(lines), where=file, hint="fix the config and run `spendlake config validate`")


def parse_config(data: Any, file: str = "<config>") -> Config:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("the top level must be a mapping of settings", where=file)
    check_sizes(data, file)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        _raise_validation(exc, data, file)
    config = anchored(config, Path(file).parent.absolute() if file != "<config>" else Path.cwd(), file)
    _check_lake(config, file)
    config._file = file
    return config


def _check_lake(config: Config, file: str) -> None:
    """The lake is a directory (created on first use), and no source reads it: a lake inside
    a source's location, or a location inside the lake, would make every ingest read the
    lake's own files. Reports go outside it (only ingest writes the lake)."""
    lake = config.lake.resolve()
    existing = next(p for p in (lake, *lake.parents) if p.exists())
    if not existing.is_dir():
        on_path = "" if existing == lake else f" (on the way to {lake})"
        raise ConfigError(f"lake: {existing} is a file{on_path}; the lake must be a directory, created if missing",
                          where=file, hint="point `lake` at a directory, e.g. ./spendlake-data/lake")
    for key, location in read_locations(config):
        if location.startswith("s3://"):
            continue
        where = Path(location).expanduser().resolve()  # as connectors.storage resolves it
        if lake.is_relative_to(where):  # the lake itself as a location is said here too
            raise ConfigError(f"lake: {lake} is inside {key} ({where}), so every ingest would read the lake's "
                              "own files", where=file, hint="move the lake out of the source's location")
        if where.is_relative_to(lake):
            raise ConfigError(f"{key}: {where} is inside the lake ({lake}), so every ingest would read the lake's "
                              "own files", where=file, hint=f"point {key} at the folder the export is delivered to, "
                                                            "outside the lake")
    if config.report.out:
        check_outside_lake(config, config.report.out, "reports", where=file, key="report.out: ", error=ConfigError)
    _check_overlaps(config, file)


def _check_overlaps(config: Config, file: str) -> None:
    """Two billing sources reading one folder (or one inside the other's) would count its
    files twice; only aws-cur sources that pick different reports (`report_name`) may share one."""
    for i, source in enumerate(config.sources):
        report = getattr(source, "report_name", None)
        for j, other in enumerate(config.sources[:i]):
            other_report = getattr(other, "report_name", None)
            if other.endpoint_url != source.endpoint_url or (report and other_report and report != other_report):
                continue
            if within(source.location, other.location) or within(other.location, source.location):
                raise ConfigError(f"sources[{i}].location ({source.location}) and sources[{j}].location "
                                  f"({other.location}) overlap, so their files would be counted twice",
                                  where=file, hint="point each source at its own folder or prefix (aws-cur sources "
                                                   "sharing a prefix: give each its report_name)")


def attribution_of(config: AttributionConfig | Config) -> AttributionConfig:
    """The attribution section of a whole Config; an AttributionConfig itself."""
    return config.attribution if isinstance(config, Config) else config


def load_config(explicit: str | os.PathLike[str] | None = None, *, required: bool = True) -> Config:
    """The config at `explicit`, else $SPENDLAKE_CONFIG, else ./spendlake.yaml. None of them:
    a ConfigError naming the three places, or with `required=False` the built-in defaults
    (for commands such as `estimate` that need no lake)."""
    path = find_config(explicit)
    if path is None:
        if required:
            raise no_config_error()
        return parse_config({}, "<defaults>")
    return parse_config(read_config_file(path), str(path))
