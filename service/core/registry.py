"""One registry for what spendlake finds by name: connectors by `kind`, rules by `name`.

Everything registers through Python entry points, the built-ins included (pyproject.toml),
so an installed package registers exactly as they do, with one line:

    [project.entry-points."spendlake.connectors"]
    acme-billing = "acme_spend.billing:AcmeBillingConnector"

    [project.entry-points."spendlake.rules"]
    acme-idle = "acme_spend.idle:AcmeIdle"

Lazy: asking for one name imports only the module behind it, so start-up stays quick and a
package that cannot be imported fails only where its name is asked for, with its import
error and its package named; the others work.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar, get_args

from pydantic import BaseModel

from service.core.errors import ConfigError
from service.core.schema import INVENTORY_PARTITION

log = logging.getLogger(__name__)

NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


class PluginError(ConfigError):
    """A name no installed package provides, or whose package cannot be loaded."""


class Disposition(Enum):
    """How a connector's rows replace what the lake holds (dlt's write disposition)."""

    PERIOD = "replace per billing period"  # a delivery replaces every billing period it holds
    SNAPSHOT = "snapshot per day"  # the run's UTC date; re-running that day replaces it
    SERIES = "time series by day"  # each UTC day of data replaces that day's partition


# The partition below `source=` that each disposition writes.
PARTITION_KEY = {Disposition.PERIOD: "billing_period", Disposition.SNAPSHOT: "snapshot_date",
                 Disposition.SERIES: "day"}


@dataclass(frozen=True)
class Feeds:
    """What a connector writes: its tables, their partition key and its write disposition."""

    tables: tuple[str, ...]
    partition_key: str
    disposition: Disposition

    def problem(self) -> str | None:
        if self.partition_key != PARTITION_KEY[self.disposition]:
            return f"writes {self.disposition.value} but partitions by {self.partition_key!r}"
        for table in self.tables:
            if (table == "costs") != (self.disposition is Disposition.PERIOD):
                return f"cannot feed {table!r} with {self.disposition.value}"
            if table != "costs" and INVENTORY_PARTITION.get(table) != self.partition_key:
                return f"feeds {table!r}, which is not partitioned by {self.partition_key!r}"
        return None if self.tables else "feeds no table"

    @classmethod
    def snapshot(cls, *tables: str) -> Feeds:
        """Inventory tables replaced by each run's snapshot of its UTC date."""
        return cls(tables, PARTITION_KEY[Disposition.SNAPSHOT], Disposition.SNAPSHOT)

    @classmethod
    def series(cls, *tables: str) -> Feeds:
        """Time-series tables whose every UTC day of data replaces that day's partition."""
        return cls(tables, PARTITION_KEY[Disposition.SERIES], Disposition.SERIES)


class Connector(Protocol):
    """What the registry asks of every connector, billing or inventory (connectors/base.py and
    connectors/inventory_base.py add how each reads)."""

    kind: ClassVar[str]
    config_model: ClassVar[type[BaseModel]]  # validates the connector's entries in the config
    feeds: ClassVar[Feeds]

    def local_paths(self) -> list[Path]:
        """Local files or directories the lake's DuckDB connection must be allowed to read."""
        ...


ModelT = TypeVar("ModelT", bound=BaseModel)


class Configured(Generic[ModelT]):
    """A registered class whose typed config model is its type parameter, so the model is
    named once: `class AwsTags(FileOrApiConnector[AwsTagsSource])` declares
    `config_model = AwsTagsSource` (what the config is validated with) and types
    `self.config` as AwsTagsSource. A class may still set `config_model` itself."""

    config_model: ClassVar[type[BaseModel]]
    config: ModelT

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            model = next(iter(get_args(base)), None)
            if isinstance(model, type) and issubclass(model, BaseModel) and "config_model" not in cls.__dict__:
                cls.config_model = model


def _origin(point: importlib.metadata.EntryPoint) -> str:
    dist = point.dist
    return f"{point.value} from {dist.name} {dist.version}" if dist else point.value


_INSTALLED: tuple[tuple[str, ...], importlib.metadata.EntryPoints] | None = None  # the sys.path scanned, its points


def _installed(fresh: bool) -> importlib.metadata.EntryPoints:
    """Every installed entry point, of every group: one scan (each reads every distribution's
    entry_points.txt, 3-5 ms) serves both registries until sys.path changes or a lookup asks afresh."""
    global _INSTALLED
    if fresh or _INSTALLED is None or _INSTALLED[0] != tuple(sys.path):
        _INSTALLED = (tuple(sys.path), importlib.metadata.entry_points())
    return _INSTALLED[1]


class Registry:
    """Classes by name, read from the entry-point group `group`. Each class carries its name
    in the attribute `key` and declares `requires`. `added` holds classes registered
    in-process (tests, embedding); they come before entry points of the same name."""

    def __init__(self, group: str, what: str, key: str, requires: tuple[str, ...]):
        self.group, self.what, self.key, self.requires = group, what, key, requires
        self.added: dict[str, type] = {}
        self._points: dict[str, list[importlib.metadata.EntryPoint]] = {}
        self._scanned: tuple[str, ...] | None = None  # the sys.path the scan saw
        self._loaded: dict[tuple[str, str], type | PluginError] = {}

    def _scan(self, fresh: bool = False) -> dict[str, list[importlib.metadata.EntryPoint]]:
        if fresh or self._scanned != tuple(sys.path):
            points: dict[str, list[importlib.metadata.EntryPoint]] = {}
            for point in _installed(fresh).select(group=self.group):
                points.setdefault(point.name, []).append(point)
            self._points, self._scanned = points, tuple(sys.path)
        return self._points

    def names(self) -> list[str]:
        """Every name installed, in discovery order; nothing is imported."""
        return list(dict.fromkeys([*self._scan(fresh=True), *self.added]))

    def get(self, name: str) -> type:
        """The class registered as `name`; a PluginError says why there is none."""
        if name in self.added:
            return self.added[name]
        points = self._scan().get(name) or self._scan(fresh=True).get(name)
        if not points:
            raise PluginError(f"no {self.what} {name!r} is installed; known: {', '.join(self.names()) or 'none'}")
        return self._load(name, points)

    def load_all(self) -> tuple[dict[str, type], dict[str, PluginError]]:
        """Every installed class by name, and apart those that cannot be loaded."""
        loaded: dict[str, type] = {}
        broken: dict[str, PluginError] = {}
        for name, points in self._scan(fresh=True).items():
            try:
                loaded[name] = self._load(name, points)
            except PluginError as exc:
                broken[name] = exc
        return loaded | self.added, {n: e for n, e in broken.items() if n not in self.added}

    def _load(self, name: str, points: list[importlib.metadata.EntryPoint]) -> type:
        if len(points) > 1:
            raise PluginError(f"{len(points)} packages provide {self.what} {name!r}: "
                              + "; ".join(_origin(p) for p in points), hint="uninstall all but one of them")
        point = points[0]
        # where the distribution lives, not _origin: reading a distribution's name and
        # version parses its METADATA file (~20 ms), and this runs on every lookup
        cached = (point.value, str(point.dist.locate_file("")) if point.dist else "")
        if cached not in self._loaded:
            self._loaded[cached] = self._import(name, point)
        found = self._loaded[cached]
        if isinstance(found, PluginError):
            raise found
        return found

    def _import(self, name: str, point: importlib.metadata.EntryPoint) -> type | PluginError:
        try:
            found = point.load()
        except Exception as exc:  # a plugin may fail to import in any way; it must not stop the others
            error = PluginError(f"{self.what} {name!r} cannot be loaded ({_origin(point)}): {type(exc).__name__}: {exc}",
                                hint="fix or reinstall the package that provides it, or stop using it")
            log.warning("%s", error)
            return error
        problem = self._problem(name, found)
        return PluginError(f"{self.what} {name!r} ({_origin(point)}) {problem}") if problem else found

    def _problem(self, name: str, found: object) -> str | None:
        if not NAME_RE.match(name):
            return "is not named in kebab-case"
        if not isinstance(found, type):
            return "is not a class"
        if getattr(found, self.key, None) != name:
            return f"declares {self.key} {getattr(found, self.key, None)!r}, not {name!r}"
        missing = [attr for attr in self.requires if not hasattr(found, attr)]
        if missing:
            return f"declares no {', '.join(missing)}"
        category = getattr(found, "category", None)
        if "category" in self.requires and category not in RULE_CATEGORIES:
            return f"declares category {category!r}, not one of {', '.join(RULE_CATEGORIES)}"
        feeds = getattr(found, "feeds", None)
        if "feeds" in self.requires and not isinstance(feeds, Feeds):
            return "declares feeds that are not a service.core.registry.Feeds"
        return feeds.problem() if isinstance(feeds, Feeds) else None


# A connector reads one kind of source; `config_model` validates its entries in the config
# (service/core/config_sources.py) and `feeds` says what ingest writes from it.
CONNECTORS = Registry("spendlake.connectors", "connector kind", "kind", ("config_model", "feeds"))
# What kind of money a rule's findings are about (rules/base.py says what each means).
RULE_CATEGORIES = ("waste", "overspend", "ownership")
RULES = Registry("spendlake.rules", "rule", "name", ("category", "config_model", "inputs", "evaluate"))
