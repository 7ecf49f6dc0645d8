"""The sandboxed DuckDB connection every read and write of the lake goes through (Lake.connect).

Its file access is limited to the lake root (plus the local source files an ingest reads), and
its configuration is then locked, so SQL cannot turn external access back on, install
extensions or read elsewhere.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

import duckdb


def sandboxed_connection(root: Path, staging: Path, *, extra_paths: Sequence[str | os.PathLike[str]] = (),
                         threads: int | None = None, memory_limit: str | None = None,
                         writer: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection whose file access is limited to `root` (plus `extra_paths`).
    `writer` (Lake.writer): it spills to `staging`. Any other connection spills to a private
    directory of the system's (DuckDB removes it on close), so a query writes nothing to the
    lake, and an ingest cleaning its staging area at start never deletes a query's spill files."""
    if writer:
        root.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:")
    dirs = [str(root) + os.sep]
    paths: list[str] = []
    for extra in extra_paths:
        extra = Path(extra).resolve()
        (dirs if extra.is_dir() else paths).append(str(extra) + (os.sep if extra.is_dir() else ""))
    con.execute("SET allowed_directories = ?", [dirs])
    if paths:
        con.execute("SET allowed_paths = ?", [paths])
    con.execute("SET temp_directory = ?", [str(staging / "duckdb_tmp" if writer else private_spill())])
    if memory_limit:
        con.execute("SET memory_limit = ?", [memory_limit])
    con.execute("SET enable_progress_bar = false")
    if writer:
        con.execute("SET preserve_insertion_order = false")
        # each query's peak memory and spill, which service.core.staging logs
        con.execute("SET enable_profiling = 'no_output'")
        con.execute("SET tracked_metrics = ['system.*']")
    else:
        # a query binds the `costs` view (and the rollups over it) several times: each bind
        # parsed every partition's footer again (~9 ms for a 10M-row one). The cache lives
        # as long as this connection's database, and DuckDB drops an entry whose file's
        # modification time changed (a partition replaced by a commit).
        con.execute("SET parquet_metadata_cache = true")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    return _locked(con)


def isolated_connection() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection for data Python hands it (registered tables, bound values): no file
    access at all, spilling to a private temporary directory (an unsandboxed in-memory one
    spills to `.tmp` in the working directory), its configuration locked."""
    con = duckdb.connect(":memory:")
    con.execute("SET temp_directory = ?", [str(private_spill())])
    return _locked(con)


def private_spill() -> Path:
    """A temporary directory of the system's for one connection (DuckDB removes it on close)."""
    return Path(tempfile.gettempdir()) / f"spendlake-{uuid.uuid4().hex}"


def _locked(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con
