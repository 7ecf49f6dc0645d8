"""Two configs on one lake: which of the sources this config does not declare (orphans, to
it) another config still reads.

Each ingest and inventory run records in `_state/sources.json` the config file it ran with
(`config`). An orphan whose file still declares it is that config's: `status` says so instead
of suggesting `forget`, and `forget` asks with it named and warns after. The file gone, or no
longer naming the source (renamed in it), releases it; a file that cannot be read now (being
edited) keeps every source recorded for it.

A lake is copied or moved (`cp -r`, `mv`) with its configs beside it: the file is recorded
both as given and relative to the lake (`config_from_lake`), and the claim holds only for a
file whose `lake` is this lake. So a moved lake still finds its other config at the new
place, and a copy is not claimed by the original's config, which reads the original.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.core.config import DEFAULT_LAKE
from service.core.config_file import read_config_file
from service.core.errors import ConfigError

if TYPE_CHECKING:
    from service.core.lake import Lake

CONFIG_KEY = "config"  # in a source's record of `_state/sources.json`
FROM_LAKE_KEY = "config_from_lake"  # the same file, relative to the lake's root
SOURCE_LISTS = ("sources", "inventory")


def claim(lake: Lake, record: MutableMapping[str, Any]) -> None:
    """Record the lake's config file in a source's record, when there is one."""
    if lake.config_file:
        record[CONFIG_KEY] = str(lake.config_file)
        record[FROM_LAKE_KEY] = os.path.relpath(lake.config_file, lake.root)


def other_configs(lake: Lake) -> dict[str, str]:
    """The lake's orphans that another config file still declares → that file."""
    return declared_elsewhere(lake.read_state("sources"), lake.orphans(), lake.config_file, lake.root)


def declared_elsewhere(state: dict[str, Any], sources: Iterable[str], own_file: Path | None,
                       root: Path) -> dict[str, str]:
    """Of `sources`, those another config file on the lake at `root` still declares → that file."""
    found: dict[str, str] = {}
    declared: dict[Path, frozenset[str] | None] = {}
    for source in sources:
        record = state.get(source) or {}
        candidates = [root / record[FROM_LAKE_KEY]] if isinstance(record.get(FROM_LAKE_KEY), str) else []
        candidates += [Path(record[CONFIG_KEY])] if isinstance(record.get(CONFIG_KEY), str) else []
        for other in dict.fromkeys(Path(os.path.normpath(c)) for c in candidates):
            if own_file is not None and other == own_file:
                break
            if other not in declared:
                declared[other] = _names_declared_by(other, root)
            names = declared[other]
            if names is None or source in names:
                found[source] = str(other)
                break
    return found


def _names_declared_by(path: Path, root: Path) -> frozenset[str] | None:
    """The source names a config file declares for the lake at `root`; empty when it is gone
    or reads another lake, None when it cannot be read or parsed now (its sources stay claimed)."""
    if not path.exists():
        return frozenset()
    try:
        data = read_config_file(path)
    except ConfigError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("lake", DEFAULT_LAKE), str):
        return None
    if (path.parent / Path(data.get("lake", DEFAULT_LAKE)).expanduser()).resolve() != root:
        return frozenset()
    return frozenset(item["name"] for key in SOURCE_LISTS for item in data.get(key) or ()
                     if isinstance(item, dict) and isinstance(item.get("name"), str))
