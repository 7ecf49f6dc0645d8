"""Relative paths in a config file are read from the file's folder, not from the working
directory: `spendlake --config /etc/spendlake/spendlake.yaml ingest` run from cron, a
systemd unit or another shell reads the same lake and the same exports as it does from
the config's folder. URLs (`s3://bucket/prefix`) and absolute paths stay as written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.core.config import Config

# the settings of billing and inventory kinds that name a local file or folder
LOCAL_PATH_KEYS = ("location", "path", "lifecycle_path", "inventory_manifests")


def anchored(config: Config, base: Path) -> Config:
    """`config` with `lake`, each source's and inventory source's local paths and
    `report.out` taken from `base` when relative (`~` expanded first, as connectors do)."""
    lake = config.lake.expanduser()
    update: dict[str, Any] = {
        "lake": lake if lake.is_absolute() else (base / lake).resolve(),
        "sources": tuple(_entry(source, base) for source in config.sources),
        "inventory": tuple(_entry(source, base) for source in config.inventory),
    }
    if config.report.out:
        update["report"] = config.report.model_copy(update={"out": _local(config.report.out, base)})
    return config.model_copy(update=update)


def _entry(entry: Any, base: Path) -> Any:
    update = {}
    for key in LOCAL_PATH_KEYS:
        value = getattr(entry, key, None)
        if isinstance(value, str):
            update[key] = _local(value, base)
        elif isinstance(value, tuple) and value and all(isinstance(item, str) for item in value):
            update[key] = tuple(_local(item, base) for item in value)
    return entry.model_copy(update=update) if update else entry


def _local(value: str, base: Path) -> str:
    if "://" in value:
        return value
    path = Path(value).expanduser()
    return value if path.is_absolute() else os.path.normpath(base / path)
