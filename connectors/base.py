"""The protocol every billing connector follows, and the registry that finds them by kind.

A connector lists deliveries cheaply (manifests, fingerprints) and, for one delivery,
returns a DuckDB relation with exactly the canonical cost columns (service.core.schema).
It never writes into the lake: `service.core.lake.Lake.commit_costs` does.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

import duckdb

from service.core.config import SourceConfig
from service.core.errors import ConfigError


@dataclass(frozen=True)
class Delivery:
    """One snapshot of one or more billing periods, as the provider delivered it.

    `periods` comes from a manifest; None means the periods are known only once the data
    is read (a bare export file). `waiting` set means "not ready, skip without committing"
    (e.g. data parts present but the manifest not yet written).
    """

    delivery_id: str
    periods: tuple[str, ...] | None
    files: tuple[str, ...]
    waiting: str | None = None


class CostConnector(Protocol):
    kind: ClassVar[str]

    def __init__(self, config: SourceConfig) -> None: ...

    def local_paths(self) -> list[Path]:
        """Local files or directories the lake's DuckDB connection must be allowed to read."""
        ...

    def deliveries(self) -> Iterator[Delivery]: ...

    def read(self, delivery: Delivery, con: duckdb.DuckDBPyConnection, scratch: Path) -> duckdb.DuckDBPyRelation:
        """The delivery's rows as canonical cost columns. `scratch` is a private directory
        inside the lake's staging area for downloads; it is removed afterwards."""
        ...


CONNECTORS: dict[str, type[CostConnector]] = {}

# kind → module that registers it; imported lazily so one broken optional source does not
# stop the others, and start-up stays quick.
BUILTIN_MODULES = {
    "aws-cur": "connectors.aws_cur",
    "aws-cur2": "connectors.aws_cur2",
    "focus": "connectors.focus",
    "gcp-billing": "connectors.gcp_billing",
    "azure-cost": "connectors.azure_cost",
}


def register(cls: type[CostConnector]) -> type[CostConnector]:
    """Class decorator: make a connector available under its `kind`."""
    CONNECTORS[cls.kind] = cls
    return cls


def connector_for(config: SourceConfig) -> CostConnector:
    if config.kind not in CONNECTORS and config.kind in BUILTIN_MODULES:
        importlib.import_module(BUILTIN_MODULES[config.kind])
    try:
        cls = CONNECTORS[config.kind]
    except KeyError:
        raise ConfigError(f"no connector for kind {config.kind!r}", where=f"sources.{config.name}.kind") from None
    return cls(config)
