"""The protocol every billing connector follows.

A connector lists deliveries cheaply (manifests, fingerprints) and, for one delivery,
returns a DuckDB relation with exactly the canonical cost columns (service.core.schema).
It never writes into the lake: `service.core.lake.Lake.commit_costs` does. It is found by
its `kind` through the registry (service.core.registry, entry-point group
`spendlake.connectors`) and declares its config model and what it feeds (`COSTS`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

import duckdb

from service.core.config import SourceConfig
from service.core.registry import Disposition, Feeds

# Every billing connector feeds `costs`, and each delivery replaces the periods it holds.
COSTS = Feeds(("costs",), "billing_period", Disposition.PERIOD)


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
    config_model: ClassVar[type[SourceConfig]]
    feeds: ClassVar[Feeds]

    def __init__(self, config: SourceConfig) -> None: ...

    def local_paths(self) -> list[Path]:
        """Local files or directories the lake's DuckDB connection must be allowed to read."""
        ...

    def deliveries(self) -> Iterator[Delivery]: ...

    def read(self, delivery: Delivery, con: duckdb.DuckDBPyConnection,
             scratch: Path) -> duckdb.DuckDBPyRelation | list[duckdb.DuckDBPyRelation]:
        """The delivery's rows as canonical cost columns: one relation, or one per file (the
        lake writes them one after another, so memory does not grow with their number).
        `scratch` is a private directory inside the lake's staging area for downloads; it
        is removed afterwards."""
        ...
