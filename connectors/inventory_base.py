"""The protocol of inventory connectors (tags, S3 objects, log groups, GPU metrics).

An inventory connector reads what exists now and returns it as parts of canonical
inventory tables (service.core.schema.INVENTORY_TABLES). It never writes into the lake:
service/ingest/inventory.py commits each part with `Lake.commit_snapshot`. It is found by
its `kind` through the registry (service.core.registry) and declares its config model and
what it feeds: its tables, their partition key and its write disposition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import duckdb

from connectors.file_readers import json_reader
from connectors.source_folder import Folder, inside
from service.core import json_text
from service.core.config import InventorySource
from service.core.errors import DataError, SourceError, duckdb_error
from service.core.files import hidden_folder
from service.core.registry import Configured, Connector
from service.core.schema import INVENTORY_TABLES, inventory_select_list

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SnapshotPart:
    """Rows of one inventory table. `partition` None: the run's snapshot date; a connector
    of a time series (gpu_utilization) sets the UTC day its rows belong to."""

    table: str
    relation: duckdb.DuckDBPyRelation
    partition: str | None = None


class InventoryConnector(Connector, Protocol):
    def __init__(self, config: InventorySource) -> None: ...

    def snapshot(self, con: duckdb.DuckDBPyConnection, scratch: Path, now: datetime) -> list[SnapshotPart]:
        """Everything the source holds now. `scratch` is a private directory for downloads."""
        ...


SourceT = TypeVar("SourceT", bound=InventorySource)


class FileOrApiConnector(Configured[SourceT]):
    """What every built-in inventory connector shares: its config (its model the type
    parameter, `FileOrApiConnector[AwsTagsSource]`), the dotted config path its errors name,
    and a local `path` that replaces the cloud API when set."""

    kind: ClassVar[str]

    def __init__(self, config: SourceT):
        self.config = config
        self.config_path = config.config_path  # `inventory[2]`, as the config's errors name the entry
        # files or folders a snapshot did not read → why: one line each, as `ingest` tells a source's
        self.passed_over: dict[str, str] = {}

    def local_paths(self) -> list[Path]:
        return [Path(self.config.path).expanduser().resolve()] if self.config.path else []

    def inputs(self) -> list[Path] | None:
        """The local files and folders a snapshot reads when it asks nothing else (no API, bucket or
        URL): what service/ingest/inventory_inputs.py fingerprints to skip a read of the same
        bytes; None: it asks something else."""
        return self.local_paths() if self.config.path else None


# ---- helpers shared by the connectors ------------------------------------------------------

_ARROW_TYPES = {"VARCHAR": "string", "BIGINT": "int64", "INTEGER": "int32", "BOOLEAN": "bool",
                "DOUBLE": "float64", "TIMESTAMP": "timestamp[us]"}


def rows_relation(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> duckdb.DuckDBPyRelation:
    """API results (dicts keyed by the table's columns) as a typed relation of `table`."""
    import pyarrow as pa

    schema = pa.schema([(name, pa.type_for_alias(_ARROW_TYPES[kind])) for name, kind in INVENTORY_TABLES[table]])
    return con.from_arrow(pa.Table.from_pylist(rows, schema=schema))


def cli_dump_part(con: duckdb.DuckDBPyConnection, path: Path, folder: Folder, table: str, api: str, list_key: str,
                  to_rows: Callable[[list], list[dict[str, Any]]], example: str) -> SnapshotPart:
    """A local copy of what an AWS API lists: a CSV/Parquet table file as it is, or the JSON
    the AWS CLI writes for `api` (`{list_key: [...]}` or the bare list), rows by `to_rows`; the
    JSON opened as `folder` allows (Folder.open: no link out of it followed)."""
    if path.suffix.lower() != ".json":
        return SnapshotPart(table, read_table_file(con, path, table))
    try:
        with folder.open(path) as file:
            data = json_text.loads(file.read().decode("utf-8"))
        rows = to_rows(data[list_key] if isinstance(data, dict) else data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"not a {api} JSON ({type(exc).__name__}: {exc})", where=str(path),
                        hint=f"expected {example}") from None
    return SnapshotPart(table, rows_relation(con, table, rows))



def from_epoch_ms(value: int | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value / 1000, tz=timezone.utc).replace(tzinfo=None)


def local_files(path: str, config_path: str) -> list[Path]:
    """The data files of a local `path`: the file itself, or the files of a directory (a link out
    of it refused: source_folder.inside)."""
    root = Path(path).expanduser().resolve()
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise SourceError("no such file or directory", where=str(root), hint=f"check {config_path}")
    files, hidden = [], set()
    for candidate in sorted(root.rglob("*")):
        if candidate.name.startswith(".") or not candidate.is_file() or not file_format(candidate):
            continue
        folder = next((f for f in candidate.relative_to(root).parents if hidden_folder(f.name)), None)
        if folder is None:
            files.append(inside(root, candidate, config_path))
        elif folder not in hidden:
            hidden.add(folder)
            log.warning("%s: a folder whose name starts with '%s' (hidden, or a job's output still being written): "
                        "its files are not read; move them out of it to read them", root / folder, folder.name[0])
    if not files:
        raise SourceError("no .csv, .csv.gz, .parquet or .json files found", where=str(root), hint=f"check {config_path}")
    return files


def file_format(path: Path) -> str | None:
    name = path.name.lower()
    for suffix, fmt in ((".csv.gz", "csv"), (".csv", "csv"), (".parquet", "parquet"),
                        (".jsonl", "json"), (".json", "json")):
        if name.endswith(suffix):
            return fmt
    return None


def read_table_file(con: duckdb.DuckDBPyConnection, path: Path, table: str,
                    expressions: dict[str, str] | None = None) -> duckdb.DuckDBPyRelation:
    """A local CSV/Parquet/JSON file whose columns carry the table's names (others ignored),
    cast to the table's types. `expressions` overrides how a column is computed. A JSON file's
    fields and types are found from every line (file_readers.json_reader): read_json's sample of
    20,480 left out a field first written after it (every row's `gpu` NULL) and read a number
    widened after it in the sample's type (55.5 as 56)."""
    fmt = file_format(path)
    readers = {"csv": lambda: con.read_csv(str(path), header=True), "parquet": lambda: con.read_parquet(str(path)),
               "json": lambda: json_reader(con, path, str(path))}
    if fmt not in readers:
        raise DataError("unsupported file type (want .csv, .csv.gz, .parquet, .json or .jsonl)", where=str(path))
    try:
        source = readers[fmt]()
        wanted = [name for name, _ in INVENTORY_TABLES[table]]
        exprs = {name: f'"{name}"' for name in wanted if name in source.columns} | (expressions or {})
        missing = REQUIRED_COLUMNS[table] - set(exprs)
        if missing:
            raise DataError(f"missing column(s) {sorted(missing)} for {table}", where=str(path),
                            hint=f"the file needs the columns of {table}: {', '.join(wanted)}")
        return source.project(inventory_select_list(table, exprs))
    except duckdb.Error as exc:
        raise duckdb_error(exc, f"cannot read as {table}", where=str(path)) from None


# Columns a local file must have; the others may be absent (NULL).
REQUIRED_COLUMNS = {"resource_tags": {"resource_id"}, "s3_objects": {"bucket", "key", "size"},
                    "s3_buckets": {"bucket"}, "log_groups": {"name"},
                    "gpu_utilization": {"resource_id", "hour", "util_pct"}}
