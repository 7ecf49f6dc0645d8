"""Two configs on one lake: which of the sources this config does not declare (orphans, to
it) another config still reads.

Each ingest and inventory run records in `_state/sources.json` the config file it ran with
(`config`), and how it read it (`read_as`). An orphan whose file still declares it is that
config's: `status` says so instead of suggesting `forget`, and `forget` asks with it named and
warns after. The file gone, or no longer naming the source (renamed in it), releases it; a file
that cannot be read now (being edited, or left broken) keeps every source recorded for it, as its
last run read each (`refused`).

A lake is copied or moved (`cp -r`, `mv`) with its configs beside it: the file is recorded
both as given and relative to the lake (`config_from_lake`), and the claim holds only for a
file whose `lake` is this lake. So a moved lake still finds its other config at the new
place, and a copy is not claimed by the original's config, which reads the original.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from service.core.config import DEFAULT_LAKE, load_config
from service.core.config_base import InventoryEntry
from service.core.config_file import read_config_file
from service.core.config_paths import LOCAL_PATH_KEYS
from service.core.errors import ConfigError, UsageError
from service.core.lake_sources import orphaned_sources
from service.core.logs import redact

if TYPE_CHECKING:
    from service.core.lake import Lake

CONFIG_KEY = "config"  # in a source's record of `_state/sources.json`
FROM_LAKE_KEY = "config_from_lake"  # the same file, relative to the lake's root
READ_AS_KEY = "read_as"  # in a source's record: how the config that ran it last read it (`key`, `said`)
REFUSED_KEY = "refused"  # in a source's record: another config file → its runs refused (`refused`), as a record's
SOURCE_LISTS = ("sources", "inventory")
RUN_KEYS = ("failures_total", "last_success", "last_failure", "last_error", "last_run_failed")  # a record's runs
AWS_S3_HOST = re.compile(r"s3([.-][a-z0-9-]+)*\.amazonaws\.com(\.cn)?")  # s3., s3.<region>., s3-<region>.
DEFAULT_PORTS = {"http": 80, "https": 443}
# An inventory source's settings that change how it is asked, not what its snapshots hold
HOW_ASKED = frozenset({"name", "kind", "freshness_hours", "max_attempts", "timeout_seconds", "deadline_seconds",
                       "token_env", "user_name", "sigv4"})
URL_KEYS = ("url", "prometheus_url", "endpoint_url")
WHERE_KEYS = ("path", *URL_KEYS)  # an inventory source's place, said when another kind reads the name


def claim(lake: Lake, record: MutableMapping[str, Any], entry: Any) -> None:
    """Record the lake's config file in a source's record, when there is one, and how it reads the
    source (`entry`: its kind and location or settings, which hold the claim while that file cannot
    be read); its refusals there (`refused_record`) end: the record is its own now."""
    if lake.config_file:
        record[CONFIG_KEY] = str(lake.config_file)
        record[FROM_LAKE_KEY] = os.path.relpath(lake.config_file, lake.root)
        record[READ_AS_KEY] = {"key": list(_key(entry)), "said": _said(entry, None)}
        others = record.get(REFUSED_KEY) or {}
        others.pop(str(lake.config_file), None)
        if not others:
            record.pop(REFUSED_KEY, None)


def refused_record(lake: Lake, record: MutableMapping[str, Any]) -> dict[str, Any]:
    """Where another config's `record` of a source keeps this config's refused runs of it (its
    failures, last error and time: service/ingest/freshness.py `record_refused`), made when none."""
    return record.setdefault(REFUSED_KEY, {}).setdefault(str(lake.config_file), {"failures_total": 0})


def own_record(lake: Lake, record: dict[str, Any]) -> dict[str, Any]:
    """A source's record as this config sees it: another config's, with this config's refused runs
    in place of that config's runs (its successes, failures and errors) while it refuses them."""
    mine = (record.get(REFUSED_KEY) or {}).get(str(lake.config_file)) if lake.config_file else None
    return record if not mine else {**{k: v for k, v in record.items() if k not in RUN_KEYS}, **mine}


def refused(lake: Lake, sources: Iterable[Any]) -> dict[str, ConfigError]:
    """Of `sources` (billing or inventory), those another config on this lake ran last and still
    declares with another kind or location (an inventory source: other settings shaping its
    snapshots, `_key`) → the error their run fails with (each alone; the others go on): running one
    would replace the bill, or the snapshots, that config stored with this one's, each config's run
    putting its own back. Nothing is refused for a config without a file. While the other file
    cannot be read (being edited, or left broken) its claim stands as its last run read the name
    (the record's READ_AS_KEY; a record written before it was kept claims nothing). Two folders, or
    two endpoints, may hold one bill (a mirror synced from one bucket): they are refused all the
    same, and the hint never advises a rename that would count such a bill twice."""
    if lake.config_file is None:
        return {}
    state = lake.read_state("sources")
    declared: dict[Path, frozenset[str] | None] = {}
    found: dict[str, ConfigError] = {}
    for source in sources:
        record = state.get(source.name) or {}
        other = claimant(record, source.name, lake.config_file, lake.root, declared)
        try:
            theirs = _entry_of(other, source.name, lake.root) if other else None
        except ConfigError as broken:  # edited or broken: as its last run read the name, while the file is there
            read_as = record.get(READ_AS_KEY) or {}
            if read_as.get("key") is not None and not _read_alike(read_as["key"], source):
                found[source.name] = _refusal(source, other, f"{read_as.get('said')} when it last ran it (that file "
                                              f"cannot be read now: {broken.message})", broken=True)
            continue
        if theirs is not None and _key(theirs) != _key(source):
            found[source.name] = _refusal(source, other, _said(theirs, source), theirs)
    return found


def _refusal(source: Any, other: Path, said: str, theirs: Any = None, broken: bool = False) -> ConfigError:
    """Why `source` is not run here: `other` reads its name as `said` (`theirs`, its entry, when it
    can be read; `broken`: it cannot be, its last run's reading said)."""
    if isinstance(source, InventoryEntry):
        taking, held, alike = "taking", "the snapshots that config stored (a source name holds one inventory", \
            "if both read one inventory, give both configs' entries the same settings"
        run, different = "take the inventory", "the two read different inventories"
    else:
        taking, held, alike = "ingesting", "the bill that config stored (a source name holds one bill", \
            "if both read one bill (a mirror or copy of one export), point both configs at one location"
        run, different = "ingest", "the two hold different bills (a renamed mirror counts its bill twice)"
    away = (f"fix {other} (its claim stands while the file is there), or remove the file if nothing runs it any "
            f"more" if broken else f"remove it from {other}, run `spendlake --config {other} forget {source.name}`")
    return ConfigError(
        f"source {source.name!r} is read by {other} too, another config on this lake, as {said}; this config reads "
        f"it as {_said(source, theirs)}, and {taking} it here would replace {held} in a lake)",
        where=f"{source.config_path}.name",
        hint=f"{alike}; or, to read it from here only, {away}, then {run}; rename the source in one config only if "
             f"{different}")


def _key(entry: Any) -> tuple[str, str, str]:
    """What two configs' entries of one name must share: the kind, the location as compared (`_place`)
    and, for an s3:// location, the endpoint (s3://bills/cur on MinIO is not AWS's); for an inventory
    source, every setting that shapes its snapshots (`_settings`)."""
    if isinstance(entry, InventoryEntry):
        return entry.kind, json.dumps(_settings(entry), sort_keys=True), ""
    location = getattr(entry, "location", "")
    endpoint = getattr(entry, "endpoint_url", None) if location.startswith("s3://") else None
    return entry.kind, _place(location), endpoint_compared(str(endpoint or ""))


def endpoint_compared(endpoint: str) -> str:
    """An S3 endpoint as compared across configs: scheme and host lower-case, the scheme's default
    port and a trailing slash dropped (`http://MinIO:9000/` is `http://minio:9000`); AWS's own S3
    endpoints (`https://s3.amazonaws.com`, `https://s3.<region>.amazonaws.com`) are none, the
    bucket being the same wherever it is asked. Text that is no URL is compared as written."""
    try:
        url = urlsplit(endpoint.strip())
        port = url.port
    except ValueError:
        return endpoint.strip().rstrip("/")
    scheme, host, path = url.scheme.lower(), (url.hostname or "").lower(), url.path.rstrip("/")
    if not scheme or not host:
        return endpoint.strip().rstrip("/")
    if AWS_S3_HOST.fullmatch(host) and not path and port in (None, DEFAULT_PORTS.get(scheme)):
        return ""
    host = f"[{host}]" if ":" in host else host  # IPv6
    netloc = host if port in (None, DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    return f"{scheme}://{netloc}{path}"


def _read_alike(recorded: list[Any], entry: Any) -> bool:
    """Whether `entry` reads its source as a record's key (`_key`, recorded by another config's last
    run, perhaps of another spendlake version) says: an inventory source's settings compared where
    both have them, a setting the record lacks (one a later version added, or one since left out of
    the key) only when this entry sets it otherwise than its default."""
    mine = list(_key(entry))
    if not isinstance(entry, InventoryEntry) or recorded == mine:
        return recorded == mine
    try:
        kind, theirs = recorded[0], json.loads(recorded[1])
    except (IndexError, TypeError, ValueError):
        return False
    settings, set_here = json.loads(mine[1]), entry.model_dump(exclude_defaults=True).keys()
    return kind == entry.kind and isinstance(theirs, dict) and all(
        theirs[key] == value if key in theirs else key not in set_here for key, value in settings.items())


def _settings(entry: InventoryEntry) -> dict[str, Any]:
    """An inventory source's settings that shape its snapshots (all but HOW_ASKED and those its origin
    does not read), as compared: its local paths resolved (`_place`), its addresses as
    `endpoint_compared` (no credentials)."""
    settings = entry.model_dump(mode="json", exclude=set(HOW_ASKED | entry.unread_settings()))
    for key, value in settings.items():
        if key in LOCAL_PATH_KEYS:
            settings[key] = [_place(v) for v in value] if isinstance(value, list) else value and _place(value)
        elif key in URL_KEYS and value:
            settings[key] = endpoint_compared(value)
    return settings


def _said(entry: Any, other: Any) -> str:
    """How `entry` reads its source, said beside `other`'s: a billing source's kind and location; an
    inventory source's kind and the settings that differ from `other`'s (its path or address beside
    another kind)."""
    if not isinstance(entry, InventoryEntry):
        return f"{entry.kind} at {_named(entry.location, entry)}"
    mine = _settings(entry)
    theirs = _settings(other) if isinstance(other, InventoryEntry) and other.kind == entry.kind else None
    shown = [key for key in mine if mine[key] != theirs[key]] if theirs \
        else [key for key in WHERE_KEYS if mine.get(key)]
    return entry.kind + "".join(f"{', ' if i else ' with '}{key} {_text(mine[key])}" for i, key in enumerate(shown))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _named(location: str, entry: Any) -> str:
    """A location as said: an s3:// one with its endpoint when it has one (credentials in it
    redacted: the words are kept in the lake's state and said in errors)."""
    endpoint = getattr(entry, "endpoint_url", None) if location.startswith("s3://") else None
    return f"{location} (endpoint {redact(endpoint)})" if endpoint else location


def _entry_of(path: Path, name: str, root: Path) -> Any | None:
    """The source or inventory source `name` of the config at `path`, when that file reads the lake
    at `root`; None otherwise; its ConfigError when it cannot be loaded now (being edited, broken)."""
    config = load_config(path)
    if config.lake.resolve() != root:
        return None
    return next((entry for entry in (*config.sources, *config.inventory) if entry.name == name), None)


def _place(location: str) -> str:
    """A location as compared across configs: an s3:// prefix without its last slash, a local path resolved."""
    return location.rstrip("/") if location.startswith("s3://") or not location else str(Path(location).resolve())


def other_configs(lake: Lake) -> dict[str, str]:
    """The lake's orphans that another config file still declares → that file."""
    return declared_elsewhere(lake.read_state("sources"), lake.orphans(), lake.config_file, lake.root)


def declared_elsewhere(state: dict[str, Any], sources: Iterable[str], own_file: Path | None,
                       root: Path) -> dict[str, str]:
    """Of `sources`, those another config file on the lake at `root` still declares → that file: the
    one that ran it last (its record), or, for a source whose record names none (known by a failure's
    mark alone: its run could not write the state), any config file the lake's records name."""
    declared: dict[Path, frozenset[str] | None] = {}
    known = [file for record in state.values() for file in _files(record, root)]
    known += [Path(file) for record in state.values() for file in record.get(REFUSED_KEY) or {}]
    found = {}
    for source in sources:
        record = state.get(source) or {}
        other = claimant(record, source, own_file, root, declared)
        if other is None and not _files(record, root):
            other = next((file for file in dict.fromkeys(known) if file != own_file
                          and source in (_declared(file, root, declared) or ())), None)
        found[source] = other
    return {source: str(other) for source, other in found.items() if other is not None}


def claimant(record: dict[str, Any], source: str, own_file: Path | None, root: Path,
             declared: dict[Path, frozenset[str] | None] | None = None) -> Path | None:
    """The other config file on the lake at `root` that ran `source` last (its `record`) and still
    declares it; None when it is `own_file`, gone, reads another lake or no longer names it.
    `declared`: the names each file declares, read once for many sources."""
    declared = {} if declared is None else declared
    for other in _files(record, root):
        if own_file is not None and other == own_file:
            return None
        names = _declared(other, root, declared)
        if names is None or source in names:
            return other
    return None


def forget_declaring_none(lake: Lake, source: str) -> UsageError:
    """Why `forget SOURCE` does nothing with a config that declares no sources: it reads every source
    the lake holds, so none is an orphan to it; the hint names the config to run it with (the one
    that ran the source last, when its file is there)."""
    held = orphaned_sources(lake, (), lake.ledger())
    if source not in held:
        return UsageError(f"the lake holds nothing of source {source!r}", where="SOURCE",
                          hint=f"sources it holds: {', '.join(held) or 'none'}")
    last = next((file for file in _files(lake.read_state("sources").get(source) or {}, lake.root)
                 if file.exists()), None)
    names = _declared(last, lake.root, {}) if last else None
    if last and names is not None and source in names:
        hint = f"{last} declares it and reads it: remove it there, then run `spendlake --config {last} forget {source}`"
    elif last and names is not None:
        hint = f"run it with {last}, which ran the source last and no longer names it: " \
               f"`spendlake --config {last} forget {source}`"
    else:
        hint = f"run it with a config that declares its sources, {source} not among them: " \
               f"`spendlake --config FILE forget {source}`"
    return UsageError(f"this config declares no sources, so it reads every source the lake holds, {source} among "
                      "them: none is an orphan to forget here", where="SOURCE", hint=hint)


def _files(record: dict[str, Any], root: Path) -> list[Path]:
    """The config file a source's record names, relative to the lake first, then as given."""
    candidates = [root / record[FROM_LAKE_KEY]] if isinstance(record.get(FROM_LAKE_KEY), str) else []
    candidates += [Path(record[CONFIG_KEY])] if isinstance(record.get(CONFIG_KEY), str) else []
    return list(dict.fromkeys(Path(os.path.normpath(c)) for c in candidates))


def _declared(path: Path, root: Path, declared: dict[Path, frozenset[str] | None]) -> frozenset[str] | None:
    """`_names_declared_by`, read once per file into `declared`."""
    if path not in declared:
        declared[path] = _names_declared_by(path, root)
    return declared[path]


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
