"""Two configs on one lake: which of the sources this config does not declare (orphans, to
it) another config still reads.

Each ingest and inventory run records in `_state/sources.json` the config file it ran with
(`config`). An orphan whose file still declares it is that config's: `status` says so instead
of suggesting `forget`, and `forget` asks with it named and warns after. The file gone, or no
longer naming the source (renamed in it), releases it; a file that cannot be read now (being
edited) keeps every source recorded for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.core.config_file import read_config_file
from service.core.errors import ConfigError

if TYPE_CHECKING:
    from service.core.lake import Lake

CONFIG_KEY = "config"  # in a source's record of `_state/sources.json`
SOURCE_LISTS = ("sources", "inventory")


def other_configs(lake: Lake) -> dict[str, str]:
    """The lake's orphans that another config file still declares → that file."""
    return declared_elsewhere(lake.read_state("sources"), lake.orphans(), lake.config_file)


def declared_elsewhere(state: dict[str, Any], sources: Iterable[str], own_file: Path | None) -> dict[str, str]:
    """Of `sources`, those another config file still declares → that file."""
    found: dict[str, str] = {}
    declared: dict[str, frozenset[str] | None] = {}
    for source in sources:
        other = (state.get(source) or {}).get(CONFIG_KEY)
        if not other or (own_file is not None and Path(other) == own_file):
            continue
        if other not in declared:
            declared[other] = _names_declared_by(Path(other))
        names = declared[other]
        if names is None or source in names:
            found[source] = other
    return found


def _names_declared_by(path: Path) -> frozenset[str] | None:
    """The source names a config file declares; empty when it is gone, None when it cannot be
    read or parsed now (its sources stay claimed)."""
    if not path.exists():
        return frozenset()
    try:
        data = read_config_file(path)
    except ConfigError:
        return None
    if not isinstance(data, dict):
        return None
    return frozenset(item["name"] for key in SOURCE_LISTS for item in data.get(key) or ()
                     if isinstance(item, dict) and isinstance(item.get("name"), str))
