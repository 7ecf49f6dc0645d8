"""What the job sources (slurm-jobs, k8s-pods, jobs-file) share: their config's common keys,
rows of the `jobs` table (service.core.schema), job states, MIG slices as fractions of a GPU,
and the files of a local `path`.

Every source yields one row per job record with the table's columns; `job_row` fills what
a source leaves out (run_id defaults to job_id) and refuses a column the table lacks.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import re
import uuid
import zoneinfo
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import duckdb
from pydantic import Field, field_validator

from connectors.source_folder import Folder, inside
from service.core.source_deadline import RequestLimits
from service.core.config import Freshness
from service.core.errors import DataError, SourceError
from service.core.files import hidden_folder
from service.core.folding import folded
from service.core.job_states import FINISHED
from service.core.schema import INVENTORY_TABLES
from service.core.timewindow import CLOCK_SKEW
from service.core.units import naive_utc

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"  # an environment variable's name
JOB_COLUMNS = INVENTORY_TABLES["jobs"]
JOB_COLUMN_NAMES = tuple(name for name, _ in JOB_COLUMNS)

# A100/H100/H200/B200 MIG profiles have seven compute slices; A30's have four (1g.6gb, 2g.12gb,
# 4g.24gb: six GB per slice). Kubernetes' `nvidia.com/mig-3g.40gb` (metric form
# `nvidia_com_mig_3g_40gb`, `_me` for media extensions) and Slurm's gres types
# (`gpu:3g.40gb`, `gpu:nvidia_a100_3g.39gb`) alike.
_MIG = re.compile(r"(?<![0-9a-z])(\d)g[._](\d+)gb", re.IGNORECASE)
A30_PROFILES = frozenset({(1, 6), (2, 12), (4, 24)})

class JobSource(Freshness):
    """Settings every job source shares (an inventory source without the AWS keys)."""

    name: str = Field(pattern=r"^[a-z0-9-]+$", max_length=64)
    cluster: str | None = Field(default=None, min_length=1, max_length=200,
                                description="the cluster of records that do not name one")


class FileSource(JobSource):
    """A source that reads local files: `path` is a file or a directory of them."""

    path: str | None = Field(default=None, min_length=1, description="a local file or directory")
    timezone: str = Field(default="UTC", description="IANA zone of times written without an offset")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, name: str) -> str:
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{name!r} is not an IANA time zone (e.g. UTC, Europe/Paris)") from None
        return name


class HttpSource(JobSource, RequestLimits):
    """A source asking an HTTP API: its attempts, each request's timeout and the run's deadline (RequestLimits)."""

    max_attempts: int = Field(default=5, ge=1, le=20, description="HTTP attempts in all (the first and its retries)")
    lookback_hours: int = Field(default=48, ge=1, le=24 * 400, description="jobs active in this many past hours")
    run_labels: tuple[str, ...] = Field(
        default=("run", "run_id"), max_length=20,
        description="label keys naming a job's run, tried in order (case, how an accent is composed and -._/ "
                    "separators ignored)")


BATCH_ROWS = 20_000  # rows turned into Arrow at a time
_ARROW = {"VARCHAR": "string", "TIMESTAMP": "timestamp[us]", "DOUBLE": "float64", "INTEGER": "int32"}




def mig_fraction(resource: str) -> float | None:
    """The share of a whole GPU that one MIG instance of `resource` is; None if no MIG profile."""
    match = _MIG.search(resource)
    if not match:
        return None
    slices, memory = int(match.group(1)), int(match.group(2))
    return slices / (4 if (slices, memory) in A30_PROFILES else 7)


@functools.lru_cache(maxsize=4096)
def _label_key(label: str) -> str:
    """A label key compared as its letters and digits, folded as a tag key is (composed or
    decomposed, `Étape` typed on macOS, one key) (a million jobs repeat a few keys: cached)."""
    return re.sub(r"[-._/\s]", "", folded(label))


def labelled_run(labels: dict[str, str], run_labels: Iterable[str]) -> str | None:
    """The value of the first of `run_labels` present (folded, -._/ separators ignored: `_label_key`)."""
    by_key = {_label_key(k): v for k, v in labels.items() if v}
    return next((by_key[_label_key(name)] for name in run_labels if _label_key(name) in by_key), None)


def job_row(**values: Any) -> dict[str, Any]:
    """One row of `jobs`: the given columns, the others NULL; run_id defaults to job_id."""
    unknown = set(values) - set(JOB_COLUMN_NAMES)
    if unknown:
        raise KeyError(f"not columns of jobs: {sorted(unknown)}")
    row = dict.fromkeys(JOB_COLUMN_NAMES) | values
    row["run_id"] = row["run_id"] or row["job_id"]
    return row


def jobs_schema() -> pa.Schema:
    """The Arrow schema of the table's columns, exact types."""
    import pyarrow as pa

    def arrow(kind: str) -> pa.DataType:
        if kind.endswith("[]"):
            return pa.list_(arrow(kind[:-2]))
        if kind.startswith("MAP("):
            key, value = (part.strip() for part in kind[4:-1].split(","))
            return pa.map_(arrow(key), arrow(value))
        return pa.type_for_alias(_ARROW[kind])

    return pa.schema([(name, arrow(kind)) for name, kind in JOB_COLUMNS])


def jobs_arrow(rows: Iterable[dict[str, Any]] | Iterable[tuple[Any, ...]]) -> pa.Table:
    """Rows made by `job_row` (or their values as tuples in the columns' order) as an Arrow
    table of the table's exact types; built in batches, so a million jobs are never a million
    dicts at once when `rows` is a generator."""
    import pyarrow as pa

    schema = jobs_schema()
    rows = iter(rows)
    batches = []
    while batch := list(itertools.islice(rows, BATCH_ROWS)):
        if isinstance(batch[0], dict):
            batches.append(pa.RecordBatch.from_pylist(batch, schema=schema))
        else:  # tuples in the columns' order
            batches.append(pa.RecordBatch.from_arrays([pa.array(column, type=field.type) for column, field
                                                       in zip(zip(*batch), schema)], schema=schema))
    return pa.Table.from_batches(batches, schema=schema)


def jobs_relation(con: duckdb.DuckDBPyConnection,
                  rows: Iterable[dict[str, Any]] | Iterable[tuple[Any, ...]]) -> duckdb.DuckDBPyRelation:
    """`jobs_arrow(rows)` as a relation on `con`."""
    return con.from_arrow(jobs_arrow(rows))


def stored(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None, into: str | None = None,
           **tables: pa.Table) -> str:
    """The answer to `sql` (naming each of `tables` by its keyword in braces: `FROM {cells}`)
    kept in a temporary table of `con`, whose name it returns (`into`: added to that table): DuckDB
    holds it within its memory limit, spilling beyond, where Arrow tables of a million job
    records would add to it."""
    views = {key: f"{key}_{uuid.uuid4().hex}" for key in tables}
    name = into or f"jobs_{uuid.uuid4().hex}"
    for key, table in tables.items():
        con.register(views[key], table)
    try:
        statement = f"INSERT INTO {name} " if into else f"CREATE TEMP TABLE {name} AS "
        con.execute(statement + sql.format(**views), params or {}).fetchall()
    finally:
        for view in views.values():
            con.unregister(view)
    return name


def with_values(con: duckdb.DuckDBPyConnection, table: str, sql: str, values: pa.Table) -> None:
    """Run the statement `sql` on `table` (`{table}`) with `values` (a small Arrow table: a
    column's distinct values and what they parse to) as `{values}`."""
    view = f"values_{uuid.uuid4().hex}"
    con.register(view, values)
    try:
        con.execute(sql.format(table=table, values=view)).fetchall()
    finally:
        con.unregister(view)


def from_epoch(seconds: float | None) -> datetime | None:
    """Unix seconds → naive UTC; 0 and None are Slurm's and Kubernetes' 'not set'."""
    if not seconds:
        return None
    return datetime.fromtimestamp(seconds, tz=timezone.utc).replace(tzinfo=None)


def source_files(path: str, config_path: str) -> list[Path]:
    """The file `path`, or every visible file under the directory `path`, sorted; a
    SourceError names the location when there is nothing to read, or a link out of it
    (source_folder.inside), and a folder the OS refuses fails naming it (skipped, its jobs
    would be missing without a word)."""
    root = Path(path).expanduser().resolve()
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise SourceError("no such file or directory", where=str(root), hint=f"check {config_path}")

    def refused(exc: OSError) -> None:
        raise unreadable(Path(exc.filename or root), exc)

    files = []
    for folder, folders, names in os.walk(root, onerror=refused):
        for name in [name for name in folders if hidden_folder(name) and not name.startswith(".")]:
            log.warning("%s: a folder whose name starts with '_' (a job's output still being written?): its files "
                        "are not read; move them out of it to read them", Path(folder, name))
        folders[:] = [name for name in folders if not hidden_folder(name)]
        files += [inside(root, Path(folder, name), config_path) for name in names
                  if not name.startswith(".") and Path(folder, name).is_file()]
    if not files:
        raise SourceError("the directory holds no files", where=str(root),
                          hint=f"point {config_path} at the scheduler's exported job files")
    return sorted(files)


def unreadable(path: Path, exc: OSError) -> DataError:
    """A job file or folder the OS refuses, said as the OS's reason (no "not UTF-8" for a permission)."""
    if isinstance(exc, PermissionError):
        return DataError(f"permission denied: the user running spendlake (uid {os.geteuid()}) cannot read it",
                         where=str(path), hint="make it readable to that user (chmod/chown, or its group)")
    return DataError(f"cannot read: {exc.strerror or type(exc).__name__}", where=str(path),
                     hint="check the file and its disk, then re-run")


@contextmanager
def job_file(path: Path, folder: Folder) -> Iterator[IO[bytes]]:
    """A job file of `folder` opened for reading (no link out of it followed: Folder.open),
    checked after the caller has read it: one written again
    meanwhile (`sacct ... > jobs.txt` re-run truncates and rewrites it in place) fails, and
    its change is the error even when the caller's parse failed on the half-written bytes.
    A file replaced by rename is read whole as it was (the descriptor holds the old one)."""
    try:
        raw = folder.open(path)
    except OSError as exc:
        raise unreadable(path, exc) from None
    descriptor = os.dup(raw.fileno())  # for the check: a reader's text wrapper closes `raw` when done
    try:
        with raw:
            before = os.fstat(descriptor)
            try:
                yield raw
            except (DataError, OSError, EOFError, ValueError):
                _unchanged(path, descriptor, before)
                raise
            _unchanged(path, descriptor, before)
    finally:
        os.close(descriptor)


def _unchanged(path: Path, descriptor: int, before: os.stat_result) -> None:
    after = os.fstat(descriptor)
    changed = (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns)
    if after.st_nlink == before.st_nlink:  # (replaced by rename, its link count and so its ctime change: read whole)
        changed = changed or after.st_ctime_ns != before.st_ctime_ns  # rewritten in place within one mtime tick
    if changed:
        raise DataError(f"changed while it was read ({before.st_size:,} bytes, then {after.st_size:,})",
                        where=str(path), hint="re-run when the job writing it has finished (write to a temporary "
                                              "name and rename it, and readers never see half a file)")


def empty_file(path: Path, size: int) -> None:
    """The one line a job file without a byte of data gets: it counts as no jobs."""
    log.warning("%s: %s: counted as no jobs (a scheduler's export writes a header even without jobs: was it "
                "still being written, or did the export fail?)", path, "0 bytes" if not size else "only blank lines")


def said_ahead(con: duckdb.DuckDBPyConnection, where: Path | str, rows: str, now: datetime,
               zone_key: str | None = None, zone: str | None = None, instants: str = "seconds since 1970") -> None:
    """One line for the jobs of `rows` (SQL: job_id, start_time as naive UTC, `_row`) that start after
    `now`, the snapshot's time, by more than CLOCK_SKEW, which no job can: their times are read in
    another zone than they were written in (a file written in Asia/Tokyo read as UTC starts every
    job 9 hours late), or the clock that wrote them runs ahead. `zone_key`: the config key naming `zone`;
    None for times that are instants whatever the zone (slurmrestd's seconds since 1970; `instants` says
    how they are written): only a clock is wrong."""
    [(count, job, start)] = con.execute(
        f"SELECT count(*), arg_min(job_id, _row), arg_min(start_time, _row) FROM ({rows}) AS t "
        "WHERE start_time > ?", [naive_utc(now) + CLOCK_SKEW]).fetchall()
    if count:
        cause = (f"its times are read in {zone} ({zone_key}): written in another zone? (set {zone_key} to theirs; "
                 "else the clock that wrote them runs ahead)" if zone_key else
                 f"its times are {instants}, the same in every zone: the clock that wrote them runs ahead of "
                 "this machine's, or this machine's runs behind (compare both with NTP)")
        log.warning("%s: %d job(s) start after this snapshot was taken (%s UTC), which no job can; the first, job %s "
                    "at %s UTC: %s", where, count, naive_utc(now).isoformat(timespec="seconds"), job,
                    start.isoformat(timespec="seconds"), cause)


def ended_at_start(con: duckdb.DuckDBPyConnection, where: Path | str, table: str) -> str:
    """`table` (a temporary table of one file's or answer's job records: job_id, state,
    start_time, end_time, `_row`), its records in a FINISHED state with a start and no end
    ended at their start, holding no GPU time, and said in one line: when they ended is not
    known, and read as running they would hold their GPUs to the data's end (a trace's killed
    attempt written with end `None` took the cluster's pool for a fortnight)."""
    unended = "end_time IS NULL AND start_time IS NOT NULL AND list_contains($finished, state)"
    params = {"finished": sorted(FINISHED)}
    [(count, job, state)] = con.execute(f"SELECT count(*), arg_min(job_id, _row), arg_min(state, _row) FROM {table} "
                                        f"WHERE {unended}", params).fetchall()
    if count:
        con.execute(f"UPDATE {table} SET end_time = start_time WHERE {unended}", params).fetchall()
        log.warning("%s: %d job record(s) in a state a job ends in (COMPLETED, FAILED, CANCELLED, ...) have a start "
                    "and no end: each is counted as ending at its start, holding no GPU time, not as running to the "
                    "data's end; the first, job %s (%s): write the end its scheduler recorded", where, count, job,
                    state)
    return table
