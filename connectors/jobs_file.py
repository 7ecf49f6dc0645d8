"""jobs-file: a job table any scheduler can write, as CSV (.csv, .csv.gz) or Parquet → `jobs`.

Columns (header names compared case-insensitively; others are ignored):
- required: `job_id`; `start_time` and `end_time` (ISO 8601; an offset is honoured, a time
  without one is in the source's `timezone`, UTC by default; an empty `end_time` means the
  job still runs); `gpus` (the job's total over all its nodes, a number >= 0, fractions allowed);
- optional: `nodes` (a Slurm hostlist, `p5-[001-004],p5-010`), `instance_ids` (`;`-separated),
  `cluster` (default: the source's `cluster`), `state` (a Slurm job state; empty: RUNNING
  without an end, else unknown), `run_id` (default `job_id`), `user`, `team`, `project`,
  `experiment`, `job_type`, `labels` (a JSON object), `name`, `account`, `partition`, `qos`,
  `namespace`, `submit_time`, `restarts` (an integer >= 0).
`columns:` in the source's config renames other schemas' columns ({gpu_num: gpus, type: job_type}).
A bad value fails the source with its file, row (the first data row is 1) and column named.
The record id is `<cluster>/<job_id>#<n>`, n counting one job id's rows in start order, so
a corrected time keeps its record.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import sys
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, NamedTuple
from zoneinfo import ZoneInfo

import duckdb
from pydantic import Field, model_validator

from connectors.hostlist import hosts
from connectors.inventory_base import FileOrApiConnector, SnapshotPart
from connectors.jobs_base import (JOB_COLUMN_NAMES, STATES, FileSource, empty_file, job_file, job_row, jobs_relation,
                                  normal_state, source_files)
from connectors.jobs_file_read import file_format, records, shown
from service.core.config_base import NestedValueError
from service.core.errors import DataError, SourceError
from service.core.registry import Feeds
from service.core.units import naive_utc

log = logging.getLogger(__name__)

# The columns a jobs file may have (header names compared case-insensitively).
FILE_REQUIRED = ("job_id", "start_time", "end_time", "gpus")
FILE_OPTIONAL = ("nodes", "instance_ids", "cluster", "state", "run_id", "user", "team", "project", "experiment",
                 "job_type", "labels", "name", "account", "partition", "qos", "namespace", "submit_time", "restarts")
FILE_COLUMNS = FILE_REQUIRED + FILE_OPTIONAL
RECORD_ID = JOB_COLUMN_NAMES.index("record_id")
NOT_YET = frozenset({"unknown", "none", "n/a", "0", "null", "nat"})  # a time not set, as schedulers write it
SKEW = timedelta(minutes=5)  # an end this much before the start is clock skew; more is a wrong value
TEXT_COLUMNS = ("run_id", "user", "team", "project", "experiment", "job_type", "name", "account", "partition",
                "qos", "namespace")


class JobsFileSource(FileSource):
    """A CSV or Parquet job table written by any scheduler (README: "jobs-file")."""

    kind: Literal["jobs-file"]
    path: str = Field(min_length=1, description="a CSV/Parquet file or a directory of them")
    columns: dict[str, str] = Field(default_factory=dict, max_length=100,
                                    description="the file's column name → a jobs-file column, e.g. {gpu_num: gpus}")

    @model_validator(mode="after")
    def _columns_are_ours(self) -> JobsFileSource:
        targets: dict[str, str] = {}
        for theirs, ours in self.columns.items():
            if ours.lower() not in FILE_COLUMNS:
                raise NestedValueError(("columns", theirs), f"{ours!r} is not a jobs-file column; "
                                       f"known: {', '.join(FILE_COLUMNS)}")
            if ours.lower() in targets:
                raise NestedValueError(("columns", theirs), f"{theirs!r} and {targets[ours.lower()]!r} "
                                       f"both become {ours!r}")
            targets[ours.lower()] = theirs
        return self


class BadValue(ValueError):
    """A value that cannot be read; the reader adds file, row and column."""


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip()) and not (
        isinstance(value, float) and math.isnan(value))


def parse_time(value: Any, zone: ZoneInfo) -> datetime | None:
    """ISO 8601 text or a Parquet timestamp/date → naive UTC; empty, or a word a scheduler
    writes for "not yet" (Slurm's `Unknown`, `None`, `0`; `null`, `NaT`) → None."""
    if not _present(value) or (isinstance(value, str) and value.strip().lower() in NOT_YET):
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise BadValue(f"{shown(value)} is not an ISO 8601 time such as 2026-11-30T14:00:00Z") from None
    else:
        raise BadValue(f"{shown(value)} is not a time (want ISO 8601 text or a timestamp)")
    return naive_utc(moment if moment.tzinfo else moment.replace(tzinfo=zone))


def parse_gpus(value: Any) -> float:
    if not _present(value):
        raise BadValue("empty; gpus is required (0 for a job without GPUs)")
    try:
        gpus = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise BadValue(f"{shown(value)} is not a number") from None
    if not math.isfinite(gpus) or gpus < 0:
        raise BadValue(f"{shown(value)} is not a number >= 0")
    return gpus


def parse_labels(value: Any) -> dict[str, str] | None:
    if not _present(value):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise BadValue(f"{shown(value)} is not JSON") from None
    elif isinstance(value, list):  # a Parquet map reads as [(key, value), ...]
        value = dict(value)
    if not isinstance(value, dict):
        raise BadValue('not a JSON object such as {"team": "nlp"}')
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items() if v is not None}


def parse_restarts(value: Any) -> int | None:
    if not _present(value):
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise BadValue(f"{shown(value)} is not a whole number") from None
    if not number.is_integer() or not 0 <= number < 2**31:
        raise BadValue(f"{shown(value)} is not a whole number >= 0")
    return int(number)


def _text(value: Any) -> str | None:
    if not _present(value):
        return None
    return value.strip() if isinstance(value, str) else str(value)


def _shared_text(value: Any) -> str | None:
    """_text, one copy of a text a million rows repeat (cluster, user, project)."""
    text = _text(value)
    return sys.intern(text) if text else text


class JobsFileConnector(FileOrApiConnector[JobsFileSource]):
    kind = "jobs-file"
    feeds = Feeds.snapshot("jobs")

    def snapshot(self, con: duckdb.DuckDBPyConnection, scratch: Path, now: datetime) -> list[SnapshotPart]:
        where = f"{self.config_path}.path"
        files = [p for p in source_files(self.config.path, where) if file_format(p)]
        if not files:
            raise SourceError("no .csv, .csv.gz or .parquet files found", where=str(Path(self.config.path)),
                              hint=f"check {where}")
        listed: list[_Listed] = []
        for number, path in enumerate(files):
            listed += self._read(path, number)
        return [SnapshotPart("jobs", jobs_relation(con, _numbered(listed, files)))]

    def _read(self, path: Path, number: int) -> list[_Listed]:
        """The file's rows, compact: a million of them are held until all files are read."""
        listed, skewed, first = [], 0, None
        with job_file(path) as raw:
            size = raw.seek(0, 2)
            raw.seek(0)
            for at, row in self._rows(path, records(path, raw, size), size):
                if row.pop("_skewed"):
                    skewed, first = skewed + 1, first or (at, row["job_id"])
                values = tuple(map(row.__getitem__, JOB_COLUMN_NAMES))
                listed.append(_Listed(row["cluster"] or "", row["job_id"], row["start_time"], row["end_time"],
                                      number, at, values))
        if first:
            log.warning("%s: %d row(s) end less than %d minutes before they start (clock skew?), counted as holding "
                        "no GPU time; the first, %s (job %s)", path, skewed, SKEW.seconds // 60, *first)
        return listed

    def _rows(self, path: Path, read: Any, size: int) -> Any:
        header = next(read)
        if header is None:
            empty_file(path, size)
            return
        columns = self._columns(path, header)
        spelled = {ours: header[index].strip() for ours, index in columns.items()}  # for errors: the file's name
        zone = ZoneInfo(self.config.timezone)
        for at, record in read:
            values = {ours: record[index] if index < len(record) else None for ours, index in columns.items()}
            try:
                row = self._row(values, zone)
            except _ColumnError as exc:
                theirs = spelled.get(exc.column, exc.column)
                column = exc.column if theirs.lower() == exc.column else f"{theirs} (read as {exc.column})"
                cell = values.get(exc.column)
                spans = isinstance(cell, str) and ("\n" in cell or "\r" in cell)
                raise DataError(f"{at}, column {column}: {exc.reason}"
                                + (" (the cell spans lines: a quote left open?)" if spans else ""), where=str(path),
                                hint="fix the file (README: jobs-file)") from None
            yield at, row

    def _columns(self, path: Path, header: list[str]) -> dict[str, int]:
        """Our column name → its index in the file, after the config's renames."""
        renames = {theirs.strip().lower(): ours.lower() for theirs, ours in self.config.columns.items()}
        found: dict[str, int] = {}
        for index, name in enumerate(header):
            ours = renames.get(name.strip().lower(), name.strip().lower())
            if ours not in FILE_COLUMNS:
                continue
            if ours in found:
                raise DataError(f"columns {header[found[ours]]!r} and {name!r} both give {ours!r}", where=str(path),
                                hint=f"drop one, or rename one with {self.config_path}.columns")
            found[ours] = index
        missing = [name for name in FILE_REQUIRED if name not in found]
        absent = {ours: theirs for theirs, ours in self.config.columns.items()
                  if ours.lower() in missing and theirs.strip().lower() not in {h.strip().lower() for h in header}}
        if absent:
            ours, theirs = next(iter(absent.items()))
            raise DataError(f"missing column(s) {', '.join(missing)} ({self.config_path}.columns maps {theirs!r} "
                            f"to it: the file has no such column; it has: {', '.join(header) or 'none'})",
                            where=str(path), hint=f"fix the name in {self.config_path}.columns")
        if missing:
            raise DataError(f"missing column(s) {', '.join(missing)} (the file has: {', '.join(header) or 'none'})",
                            where=str(path), hint=f"add them, or map the file's own names with "
                                                  f"{self.config_path}.columns, e.g. {{gpu_num: gpus}}")
        names = {h.strip().lower() for h in header}
        for theirs, ours in self.config.columns.items():
            if theirs.strip().lower() not in names and ours.lower() not in found:
                raise DataError(f"{self.config_path}.columns maps {theirs!r} to {ours!r}, and the file has no column "
                                f"{theirs!r} (it has: {', '.join(header)})", where=str(path),
                                hint=f"fix the name in {self.config_path}.columns, or drop it if these files lack it")
        for name in sorted(names - set(renames) - set(FILE_COLUMNS)):
            near = difflib.get_close_matches(name, [c for c in FILE_COLUMNS if c not in found], n=1, cutoff=0.8)
            if near:
                log.warning("%s: column %r is not read: is it %s? (else ignore this; to read it, set %s.columns: "
                            "{%s: %s})", path, name, near[0], self.config_path, name, near[0])
        return found

    def _row(self, values: dict[str, Any], zone: ZoneInfo) -> dict[str, Any]:
        def read(column: str, parse):
            try:
                return parse(values.get(column))
            except BadValue as exc:
                raise _ColumnError(column, str(exc)) from None

        job_id = read("job_id", _text)
        if job_id is None:
            raise _ColumnError("job_id", "empty; every job needs an id")
        start = read("start_time", lambda v: parse_time(v, zone))
        if start is None:
            raise _ColumnError("start_time", f"{shown(values.get('start_time') or '')}: a job without a start "
                                             "cannot hold GPUs (leave jobs that never started out)")
        end = read("end_time", lambda v: parse_time(v, zone))
        skewed = end is not None and end < start
        if skewed and start - end > SKEW:
            raise _ColumnError("end_time", f"{end.isoformat()} is before start_time {start.isoformat()} (by more "
                                           f"than {SKEW.seconds // 60} minutes of clock skew: columns swapped?)")
        state = read("state", _state)
        cluster = read("cluster", _shared_text) or self.config.cluster
        return {"_skewed": skewed} | job_row(
            job_id=job_id, scheduler="file", cluster=cluster, start_time=start, end_time=start if skewed else end,
            state=state or ("RUNNING" if end is None else None), gpus=read("gpus", parse_gpus),
            nodes=read("nodes", _nodes), instance_ids=read("instance_ids", _instance_ids),
            submit_time=read("submit_time", lambda v: parse_time(v, zone)), labels=read("labels", parse_labels),
            restarts=read("restarts", parse_restarts), **{name: read(name, _shared_text) for name in TEXT_COLUMNS})


class _ColumnError(Exception):
    def __init__(self, column: str, reason: str):
        super().__init__(reason)
        self.column, self.reason = column, reason


def _state(value: Any) -> str | None:
    if not _present(value):
        return None
    state = normal_state(str(value))
    if state is None:
        raise BadValue(f"{shown(value)} is not a job state (one of {', '.join(sorted(STATES))})")
    return state


def _nodes(value: Any) -> list[str] | None:
    if not _present(value):
        return None
    try:
        return list(hosts(str(value))) or None
    except ValueError as exc:
        raise BadValue(str(exc)) from None


def _instance_ids(value: Any) -> list[str] | None:
    ids = [part.strip() for part in str(value).split(";") if part.strip()] if _present(value) else []
    return ids or None


class _Listed(NamedTuple):
    """A row as read: what finds it again in another file, where it is, and its values in the
    order of `jobs`' columns."""

    cluster: str
    job_id: str
    start: datetime
    end: datetime | None
    file: int
    at: str
    values: tuple[Any, ...]


def _numbered(listed: list[_Listed], files: list[Path]) -> Iterator[tuple[Any, ...]]:
    """The rows' values, a job listed in several files (exports whose windows overlap) once:
    the row that has ended, else the later file's. record_id `<cluster>/<job_id>#<n>`: n counts
    a job id's rows by start (attempts); the same job id starting twice at the same time in
    one file is one job listed twice, an error."""
    listed.sort(key=lambda r: (r.cluster, r.job_id, r.start))  # stable: files in name order
    kept: list[_Listed] = []
    for row in listed:
        held = kept[-1] if kept else None
        if held is None or (held.cluster, held.job_id, held.start) != (row.cluster, row.job_id, row.start):
            kept.append(row)
        elif held.file == row.file:
            raise DataError(f"job {row.job_id} is listed twice with start_time {row.start.isoformat()}"
                            f" ({held.at} and {row.at})", where=str(files[row.file]),
                            hint="keep one row per job (or per attempt, with different start times)")
        elif row.end is not None or held.end is None:
            kept[-1] = row
    listed.clear()
    attempt = 0
    for index, row in enumerate(kept):
        previous = kept[index - 1] if index else None
        attempt = attempt + 1 if previous and (previous.cluster, previous.job_id) == (row.cluster, row.job_id) else 0
        values = row.values
        yield values[:RECORD_ID] + (f"{row.cluster}/{row.job_id}#{attempt}",) + values[RECORD_ID + 1:]
