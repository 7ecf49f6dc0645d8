"""YAML configuration → typed, frozen objects. Unknown keys are rejected.

Lookup order: `--config PATH`, else `$SPENDLAKE_CONFIG`, else `./spendlake.yaml`; with
none of them, the defaults (a local lake and no sources). Every error carries a dotted
path such as `sources[2].location`.
"""

from __future__ import annotations

import os
from pathlib import Path
from decimal import Decimal
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from service.core.errors import ConfigError

DEFAULT_CONFIG_FILE = "spendlake.yaml"
DEFAULT_LAKE = "./spendlake-data/lake"

SourceKind = Literal["aws-cur", "aws-cur2", "focus", "gcp-billing", "azure-cost"]


class Strict(BaseModel):
    """Base for every config section: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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

    @property
    def is_s3(self) -> bool:
        return self.location.startswith("s3://")


class GpuTypeConfig(Strict):
    """A GPU type for `spendlake estimate`: a price for a built-in type, or a new type."""

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


class Config(Strict):
    lake: Path = Path(DEFAULT_LAKE)
    sources: tuple[SourceConfig, ...] = ()
    estimate: EstimateConfig = EstimateConfig()
    report: ReportConfig = ReportConfig()
    # Each rule validates its own section (rules/<rule>.py); see service.settings.
    rules: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, sources: tuple[SourceConfig, ...]) -> tuple[SourceConfig, ...]:
        seen: set[str] = set()
        for source in sources:
            if source.name in seen:
                raise ValueError(f"source name {source.name!r} is used twice; names must be unique")
            seen.add(source.name)
        return sources

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
