"""Where a config's paths point. Relative paths in a config file are read from the file's
folder, not from the working directory: `spendlake --config /etc/spendlake/spendlake.yaml
ingest` run from cron, a systemd unit or another shell reads the same lake and the same
exports as it does from the config's folder. `s3://bucket/prefix` and absolute paths stay
as written; any other URL (`gs://`, a mistyped `s3:/`) is an error, not a local folder
named `gs:`. What is written (reports, exports) goes neither into the lake nor into a
source's location."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Any, Protocol, TypeVar

from service.core.errors import ConfigError, SpendlakeError, UsageError


class Config(Protocol):
    """What of a service.core.config.Config these helpers read (that module imports this one)."""

    lake: Path
    sources: tuple[Any, ...]
    inventory: tuple[Any, ...]
    report: Any

    def model_copy(self, *, update: dict[str, Any]) -> Any: ...


ConfigT = TypeVar("ConfigT", bound=Config)
# the settings of billing and inventory kinds that name a local file or folder (or s3://)
LOCAL_PATH_KEYS = ("location", "path", "lifecycle_path", "inventory_manifests")
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")


def anchored(config: ConfigT, base: Path, file: str) -> ConfigT:
    """`config` with `lake`, each source's and inventory source's local paths and
    `report.out` taken from `base` when relative (`~` expanded first, as connectors do)."""
    lake = config.lake.expanduser()
    _no_dangling_link(lake if lake.is_absolute() else base / lake, file)
    update: dict[str, Any] = {
        "lake": lake if lake.is_absolute() else (base / lake).resolve(),
        "sources": tuple(_entry(source, base, f"sources[{i}]", file) for i, source in enumerate(config.sources)),
        "inventory": tuple(_entry(source, base, f"inventory[{i}]", file) for i, source in enumerate(config.inventory)),
    }
    if config.report.out:
        update["report"] = config.report.model_copy(update={"out": _local(config.report.out, base, "report.out", file)})
    return config.model_copy(update=update)


def _no_dangling_link(lake: Path, file: str) -> None:
    """A ConfigError when `lake`, or a folder on its way, is a symbolic link that leads nowhere (a
    volume not mounted, a link left by a move): the lake would be made at its target, an empty
    lake in a place nobody chose, and every query would answer from it."""
    link = dangling_link(lake)
    if link is not None:
        on_path = "" if link == lake else f" (on the way to {lake})"
        loops = _loops(link)
        leads = "which leads back to itself (a loop of symbolic links)" if loops else "which does not exist"
        fix = f"point a link of the loop at a folder (`ls -l {link}`)" if loops else "mount or create what it points to"
        raise ConfigError(f"lake: {link} is a symbolic link to {os.readlink(link)}, {leads}{on_path}",
                          where=file, hint=f"{fix}, or point `lake` at the lake's folder")


def _loops(link: Path) -> bool:
    try:
        link.stat()
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def dangling_link(path: Path) -> Path | None:
    """`path`, or the folder on its way, that is a symbolic link to nothing; None if none is."""
    return next((p for p in (path, *path.parents) if p.is_symlink() and not p.exists()), None)


def _entry(entry: Any, base: Path, key: str, file: str) -> Any:
    """The entry with its local paths anchored, named `key` for the errors of a run (config_base.ConfigEntry)."""
    update = {}
    for name in LOCAL_PATH_KEYS:
        value = getattr(entry, name, None)
        if isinstance(value, str):
            update[name] = _local(value, base, f"{key}.{name}", file)
        elif isinstance(value, tuple) and value and all(isinstance(item, str) for item in value):
            update[name] = tuple(_local(item, base, f"{key}.{name}[{i}]", file) for i, item in enumerate(value))
    entry = entry.model_copy(update=update)
    entry._key = key
    return entry


def _local(value: str, base: Path, key: str, file: str) -> str:
    check_store(value, key, where=file, error=ConfigError)
    if value.startswith("s3://"):
        return value
    path = Path(value).expanduser()
    return value if path.is_absolute() else os.path.normpath(base / path)


def check_store(value: str, key: str, *, where: str, error: type[SpendlakeError] = UsageError) -> None:
    """`value` is a local path or `s3://bucket/prefix`, the one store spendlake reads and writes."""
    if URL.match(value) and not value.startswith("s3://"):
        raise error(f"{key}: " * bool(key) + f"{value!r} is neither a local path nor s3://bucket/prefix", where=where,
                    hint="give a local folder or s3://bucket/prefix (other stores: sync them to either)")


def read_locations(config: Config) -> list[tuple[str, str]]:
    """(dotted key, location) of every folder or prefix an ingest or inventory reads."""
    locations = [(f"sources[{i}].location", s.location) for i, s in enumerate(config.sources)]
    # job sources that read an API have no `path`
    return locations + [(f"inventory[{i}].path", str(path)) for i, s in enumerate(config.inventory)
                        if (path := getattr(s, "path", None))]


def check_outside_lake(config: Config, folder: str, what: str, *, where: str, key: str = "",
                       error: type[SpendlakeError] = UsageError) -> None:
    """`folder` is a local folder or s3:// prefix that is neither in the lake (only ingest
    writes the lake, and files among its partitions would be read or removed as its own) nor
    in a source's location (the next ingest would read what is written there: an export of
    the lake counted again)."""
    check_store(folder, key.rstrip(": "), where=where, error=error)
    for read_key, location in read_locations(config):
        if within(folder, location):
            raise error(f"{key}{folder} is inside {read_key} ({location}), so the next ingest would read it",
                        where=where, hint=f"write {what} to a folder outside the sources' locations")
    if folder.startswith("s3://"):
        return
    lake, target = config.lake.resolve(), Path(folder).expanduser().resolve()
    if target == lake or target.is_relative_to(lake):
        raise error(f"{key}{target} is inside the lake ({lake})", where=where,
                    hint=f"write {what} to a folder outside the lake; the lake is only written by ingest")


def within(folder: str, location: str) -> bool:
    """`folder` is `location` or under it: both s3:// prefixes, or both local paths."""
    if folder.startswith("s3://") or location.startswith("s3://"):
        return (folder.rstrip("/") + "/").startswith(location.rstrip("/") + "/")
    target, where = Path(folder).expanduser().resolve(), Path(location).expanduser().resolve()
    return target == where or target.is_relative_to(where)
