"""jobs-file: a job table any scheduler can write, as CSV (.csv, .csv.gz) or Parquet → `jobs`.

Columns (header names compared case-insensitively; others are ignored):
- required: `job_id`; `start_time` and `end_time` (ISO 8601; an offset is honoured, a time
  without one is in the source's `timezone`, UTC by default; an empty `end_time` means the
  job still runs, unless its `state` is one a job ends in: it then ends at its start, said
  per file, jobs_base.ended_at_start); `gpus` (the job's total over all its nodes, a number
  >= 0, fractions allowed);
- optional: `nodes` (a Slurm hostlist, `p5-[001-004],p5-010`), `instance_ids` (`;`-separated),
  `cluster` (default: the source's `cluster`), `state` (a Slurm job state; empty: RUNNING
  without an end, else unknown), `run_id` (default `job_id`), `user`, `team`, `project`,
  `experiment`, `job_type`, `labels` (a JSON object), `name`, `account`, `partition`, `qos`,
  `namespace`, `submit_time`, `restarts` (an integer >= 0), `instances` (an integer >= 0, each
  holding `gpus`), `parent_run` (the run an eval job serves: kept as its label `parent_run`).
`columns:` in the source's config renames other schemas' columns ({gpu_num: gpus, type: job_type};
several to job_id are joined with '/'); `states:` maps their state values ({Pass: COMPLETED,
Killed: CANCELLED}), looked up first; `header:` names the columns of CSV files without a header
row; `time_format:`/`time_origin:` read numeric times; `gpu_unit: percent` reads gpus in percent
of a GPU; an `instances` column multiplies gpus (connectors/jobs_file_config.py).
A bad value fails the source with its file, row (the first data row is 1) and column named; a
row without a start whose state says the job never ran (a trace's job killed while queued) is
left out, said with the count.
A job listed in several files (exports whose windows overlap) counts once: the row that has
ended, else the later file's (in name order). The record id is `<cluster>/<job_id>@<start_time>`
(`p5/101@2026-11-30T10:00:00`, UTC): an attempt keeps it whichever files are read, as readers
keep each record from the newest snapshot holding it (a corrected start_time is another record).

Files are read column-wise (connectors/jobs_file_columns.py); one that reader cannot take as
this one would is read again row by row, which names what is wrong in it.
"""

from __future__ import annotations

import difflib
import functools
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import date, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import duckdb

from connectors.inventory_base import FileOrApiConnector, SnapshotPart
from connectors.jobs_base import (empty_file, ended_at_start, job_file, job_row, jobs_arrow, jobs_schema, said_ahead,
                                  source_files, stored)
from connectors.jobs_file_config import FILE_COLUMNS, FILE_REQUIRED, TIME_UNITS, JobsFileSource
from connectors.jobs_file_instants import instant_times
from connectors.jobs_file_read import (SLURM_HINT, column_shown, columns_shown, file_format, file_head, looks_like_data,
                                      parquet_table, records, sacct_output, shown)
from connectors.jobs_file_values import (PARENT_RUN, SKEW, BadValue, not_before_2000, origin_utc, parse_count_time,
                                         parse_gpu_percent, parse_gpus, parse_instance_ids, parse_instances,
                                         parse_job_id, parse_labels, parse_nodes, parse_restarts, parse_shared_text,
                                         parse_state, parse_text, parse_time, present, unknown_states,
                                         with_parent_run)
from connectors.source_folder import Folder
from service.core.errors import DataError, SourceError
from service.core.registry import Feeds

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

RAN = ("RUNNING", "COMPLETED")  # states of a job that had a start: a row of one without it is wrong
TEXT_COLUMNS = ("run_id", "user", "team", "project", "experiment", "job_type", "name", "account", "partition",
                "qos", "namespace")


class JobsFileConnector(FileOrApiConnector[JobsFileSource]):
    kind = "jobs-file"
    feeds = Feeds.snapshot("jobs")

    def snapshot(self, con: duckdb.DuckDBPyConnection, scratch: Path, now: datetime) -> list[SnapshotPart]:
        where = f"{self.config_path}.path"
        found, folder = source_files(self.config.path, where), Folder.of(self.config.path, where)
        files = [p for p in found if file_format(p)]
        documents = [p for p in found if p.name.lower().endswith((".json", ".json.gz", ".jsonl"))]
        sacct = next(((p, what) for p in ([] if files else found[:20]) if (what := sacct_output(file_head(p, folder)))), None)
        if sacct:
            raise SourceError(f"{sacct[0].name} is {sacct[1]}, not a job table: kind slurm-jobs reads it",
                              where=str(Path(self.config.path)), hint=SLURM_HINT)
        if not files and documents:
            raise SourceError(f"{documents[0].name} is JSON, not a job table (Microsoft Philly's cluster_job_log?); "
                              "no .csv, .csv.gz or .parquet files found", where=str(Path(self.config.path)),
                              hint="flatten it to a CSV of one row per job or attempt (README: jobs-file shows "
                                   "philly_to_csv.py)")
        if not files:
            raise SourceError("no .csv, .csv.gz or .parquet files found", where=str(Path(self.config.path)),
                              hint=f"check {where}")
        tables = [self._read(con, path, folder, number) for number, path in enumerate(files)]
        for table, path in zip(tables, files):
            ended_at_start(con, path, table)
            if instants := instant_times(path, self.config):  # times no zone reads: a clock is wrong, not a zone
                said_ahead(con, path, f"SELECT * FROM {table}", now, instants=instants)
            else:
                said_ahead(con, path, f"SELECT * FROM {table}", now, f"{self.config_path}.timezone",
                           self.config.timezone)
        return [SnapshotPart("jobs", merged(con, tables, files))]

    def _read(self, con: duckdb.DuckDBPyConnection, path: Path, folder: Folder, number: int) -> str:
        """A temporary table of `con` holding the file's rows (`jobs`' columns, record_id NULL)
        with `_row` (0, 1, ... in the file), `_at` (where the row is, when read row by row) and
        `_file` (`number`)."""
        with job_file(path, folder) as raw:
            size = raw.seek(0, 2)
            raw.seek(0)
            read = records(path, raw, size, self.config.header)  # held until done: its wrapper closes `raw` when dropped
            header = next(read)
            if header is None:
                empty_file(path, size)
                return _stored_rows(con, _no_rows(), number)
            columns = self._columns(path, header)
            table = self._column_wise(con, path, raw, size, header, columns, number)
            if table is None:
                raw.seek(0)
                again = records(path, raw, size, self.config.header)
                next(again)
                table = _stored_rows(con, self._row_wise(path, again, header, columns), number)
            del read
        return table

    @functools.cached_property
    def _state(self) -> Callable[[Any], str | None]:
        """parse_state with the source's `states` looked up first."""
        return functools.partial(parse_state, states=self.config.state_map(), config=f"{self.config_path}.states")

    @functools.cached_property
    def _gpus(self) -> Callable[[Any], float]:
        return parse_gpu_percent if self.config.gpu_unit == "percent" else parse_gpus

    @functools.cached_property
    def _origin(self) -> datetime | None:
        return origin_utc(self.config.time_origin, ZoneInfo(self.config.timezone))

    def _time(self, value: Any, fold: int = 0) -> datetime | None:
        """A time cell as the source's time_format reads it (a Parquet timestamp is itself)."""
        unit = self.config.time_format
        if unit == "iso" or isinstance(value, (datetime, date)):
            moment = parse_time(value, ZoneInfo(self.config.timezone), fold)
            return moment if self._origin else not_before_2000(value, moment)  # as numeric times from 1970
        return parse_count_time(value, unit, TIME_UNITS[unit], self._origin)

    @functools.cached_property
    def _parsers(self) -> dict[str, Callable[[Any], Any]]:
        """The column-wise reader's parsers that differ by config: states, GPUs."""
        return {"state": self._state, "gpus": self._gpus}

    def _column_wise(self, con: duckdb.DuckDBPyConnection, path: Path, raw: IO[bytes], size: int,
                     header: list[str], columns: dict[str, int], number: int) -> str | None:
        # Arrow: loaded to read a file, not to configure or query
        from connectors.jobs_file_columns import CountedTimes, column_rows, csv_file_blocks, parquet_blocks

        raw.seek(0)
        if file_format(path) == "parquet":
            blocks = parquet_blocks(parquet_table(path, raw, size), columns)
        else:
            blocks = csv_file_blocks(raw, path.name.lower().endswith(".gz"), header, columns,
                                     has_header=self.config.header is None)
        unit = self.config.time_format
        counted = None if unit == "iso" else CountedTimes(TIME_UNITS[unit], self._origin, self._time)
        return column_rows(con, blocks, ZoneInfo(self.config.timezone), self.config.cluster, number, self._parsers,
                           counted)

    def _row_wise(self, path: Path, read: Iterator[Any], header: list[str], columns: dict[str, int]) -> pa.Table:
        """The file's rows read one at a time; the first bad value fails naming its row and column."""
        where: list[str] = []
        skewed, first, unstarted, without_gpus = 0, None, [], []

        def rows() -> Iterator[dict[str, Any]]:
            nonlocal skewed, first
            for at, row in self._rows(path, read, header, columns):
                if row is None:
                    unstarted.append(at)
                    continue
                if row.pop("_skewed"):
                    skewed, first = skewed + 1, first or (at, row["job_id"])
                if row.pop("_no_gpus"):
                    without_gpus.append(at)
                where.append(at)
                yield row

        import pyarrow as pa

        table = jobs_arrow(rows())
        if first:
            log.warning("%s: %d row(s) end less than %d minutes before they start (clock skew?), counted as holding "
                        "no GPU time; the first, %s (job %s)", path, skewed, SKEW.seconds // 60, *first)
        if without_gpus:
            log.warning("%s: %d row(s) with an empty gpus cell (a trace's CPU-only tasks, as Alibaba PAI's plan_gpu) "
                        "are read as holding no GPU; the first, %s", path, len(without_gpus), without_gpus[0])
        if unstarted:
            log.warning("%s: %d row(s) without a start_time, whose state says they never ran (cancelled, failed or "
                        "pending before they started), are left out: they held no GPUs; the first, %s", path,
                        len(unstarted), unstarted[0])
        return table.append_column("_row", pa.array(range(table.num_rows), pa.int64())).append_column(
            "_at", pa.array(where, pa.string()))

    def _rows(self, path: Path, read: Iterator[Any], header: list[str], columns: dict[str, int]) -> Iterator[Any]:
        spelled = {ours: header[index].strip() for ours, index in columns.items()}  # for errors: the file's name
        for at, record in read:
            if len(record) != len(header):  # a cell's comma unquoted, or a row cut short: its cells shifted
                raise DataError(f"{at}: {self._miscounted(record, header, columns)}", where=str(path),
                                hint="quote each cell holding a comma, and write every row with the header's "
                                     "columns (README: jobs-file)")
            values = {ours: record[index] for ours, index in columns.items()}
            if "job_id+1" in values:
                values["job_id"] = joined_id([values.pop(ours) for ours in columns if ours.startswith("job_id")])
            try:
                row = self._row(values)
            except _ColumnError as exc:
                theirs = spelled.get(exc.column, exc.column)
                column = exc.column if theirs.lower() == exc.column else f"{theirs} (read as {exc.column})"
                cell = values.get(exc.column)
                spans = isinstance(cell, str) and ("\n" in cell or "\r" in cell)
                if exc.column == "state":  # a trace's own states: each of them, not the first alone
                    exc.reason = self._unknown_states(cell, read, columns["state"], len(header))
                raise DataError(f"{at}, column {column}: {exc.reason}"
                                + (" (the cell spans lines: a quote left open?)" if spans else ""), where=str(path),
                                hint="fix the file (README: jobs-file)") from None
            yield at, row

    def _unknown_states(self, first: Any, rest: Iterator[Any], index: int, width: int) -> str:
        """unknown_states of the file's state cells that are no job state nor mapped by `states`:
        `first`, the row reader's first, and those of the records `rest` yields (their state at
        `index`; a record of another width than the header's is left out, and the count stops at
        a record that cannot be read), each value looked up once and counted in any case, as
        `states` compares them, under its first spelling."""
        spelled = {str(first).strip().lower(): str(first).strip()}  # `states` compares values in any case
        rows, known = Counter({str(first).strip(): 1}), {}
        try:
            for _, record in rest:
                cell = record[index] if len(record) == width else None
                if not present(cell):
                    continue
                text = str(cell).strip()
                if text not in known:
                    try:
                        known[text] = self._state(text) is not None
                    except BadValue:
                        known[text] = False
                if not known[text]:
                    rows[spelled.setdefault(text.lower(), text)] += 1
        except DataError:
            pass  # the first state's error is the one to fix first
        return unknown_states(rows, f"{self.config_path}.states")

    def _miscounted(self, record: list[Any], header: list[str], columns: dict[str, int]) -> str:
        """What is wrong with a CSV row of another number of fields than its header, naming a
        hostlist written unquoted (`p5-016,p5-015`, the usual cause) as it should be quoted."""
        names = "the header has" if self.config.header is None else f"{self.config_path}.header names"
        said = f"{len(record)} fields where {names} {len(header)}"
        extra, nodes = len(record) - len(header), columns.get("nodes")
        if extra > 0 and nodes is not None:
            said += f" (a list of nodes written unquoted? quote it: \"{','.join(record[nodes:nodes + extra + 1])}\")"
        return said

    def _columns(self, path: Path, header: list[str]) -> dict[str, int]:
        """Our column name → its index in the file, after the config's renames."""
        renames = self.config.renames()
        found: dict[str, int] = {}
        for index, name in enumerate(header):
            ours = self.config.our_name(name)
            if ours not in FILE_COLUMNS:
                continue
            if ours in found and ours == "job_id" and name.strip().lower() in renames and header[found[ours]].strip(
                    ).lower() in renames:  # several columns mapped to job_id: one id, joined with '/'
                ours = f"job_id+{sum(1 for key in found if key.startswith('job_id+')) + 1}"
            elif ours in found:
                raise DataError(f"columns {header[found[ours]]!r} and {name!r} both give {ours!r}", where=str(path),
                                hint=f"drop one, or rename one with {self.config_path}.columns")
            found[ours] = index
        missing = [name for name in FILE_REQUIRED if name not in found]
        if missing and self.config.header is None and file_format(path) == "csv" and looks_like_data(header):
            raise DataError(f"missing column(s) {', '.join(missing)}: the first line ({columns_shown(header)}) "
                            "looks like data, not a header", where=str(path),
                            hint=f"list the columns' names in {self.config_path}.header for CSV files without a "
                                 "header row (Alibaba PAI's trace ships them in <table>.header files)")
        absent = {ours: theirs for theirs, ours in self.config.columns.items()
                  if ours.lower() in missing and theirs.strip().lower() not in {h.strip().lower() for h in header}}
        if absent:
            ours, theirs = next(iter(absent.items()))
            raise DataError(f"missing column(s) {', '.join(missing)} ({self.config_path}.columns maps {theirs!r} "
                            f"to it: the file has no such column; it has: {columns_shown(header)})",
                            where=str(path), hint=f"fix the name in {self.config_path}.columns")
        if missing:
            unread = [h.strip() for i, h in enumerate(header) if i not in found.values() and h.strip()]
            theirs = (difflib.get_close_matches(missing[0], unread, n=1, cutoff=0.5) or unread or ["<its name>"])[0]
            raise DataError(f"missing column(s) {', '.join(missing)} (the file has: {columns_shown(header)})",
                            where=str(path), hint=f"add {'it' if len(missing) == 1 else 'them'}, or map the file's own "
                                                  f"name{'' if len(missing) == 1 else 's'} to "
                                                  f"{'it' if len(missing) == 1 else 'them'} with "
                                                  f"{self.config_path}.columns, e.g. {{{column_shown(theirs)}: {missing[0]}}}")
        names = {h.strip().lower() for h in header}
        for theirs, ours in self.config.columns.items():
            if theirs.strip().lower() not in names and (ours.lower() not in found or ours.lower() == "job_id"):
                raise DataError(f"{self.config_path}.columns maps {theirs!r} to {ours!r}, and the file has no column "
                                f"{theirs!r} (it has: {columns_shown(header)})", where=str(path),
                                hint=f"fix the name in {self.config_path}.columns, or drop it if these files lack it")
        for name in sorted(names - set(renames) - set(FILE_COLUMNS)):
            near = difflib.get_close_matches(name, [c for c in FILE_COLUMNS if c not in found], n=1, cutoff=0.8)
            if near:
                log.warning("%s: column %r is not read: is it %s? (else ignore this; to read it, set %s.columns: "
                            "{%s: %s})", path, name, near[0], self.config_path, name, near[0])
        return found

    def _row(self, values: dict[str, Any]) -> dict[str, Any] | None:
        """The row as `jobs`' columns; None for a job that never started (no start, a state saying so)."""
        def read(column: str, parse):
            try:
                return parse(values.get(column))
            except BadValue as exc:
                raise _ColumnError(column, str(exc)) from None

        job_id = read("job_id", parse_job_id)
        if job_id is None:
            raise _ColumnError("job_id", "empty; every job needs an id")
        start = read("start_time", self._time)
        if start is None:
            if read("state", self._state) not in (None, *RAN):
                return None
            raise _ColumnError("start_time", f"{shown(values.get('start_time') or '')}: a job without a start "
                                             "cannot hold GPUs (one whose state says it never ran, such as "
                                             "CANCELLED, is left out)")
        end = read("end_time", self._time)
        if end is not None and end < start:  # a job across the hour the clocks turned back: it ends in its second pass
            end = max(end, read("end_time", lambda v: self._time(v, fold=1)))
        skewed = end is not None and end < start
        if skewed and start - end > SKEW:
            raise _ColumnError("end_time", f"{end.isoformat()} is before start_time {start.isoformat()} (by more "
                                           f"than {SKEW.seconds // 60} minutes of clock skew: columns swapped?)")
        state = read("state", self._state)
        cluster = read("cluster", parse_shared_text) or self.config.cluster
        no_gpus = not present(values.get("gpus"))  # a trace's CPU-only task: no GPU
        gpus, instances = 0.0 if no_gpus else read("gpus", self._gpus), read("instances", parse_instances)
        gpus = gpus if instances is None else gpus * instances
        return {"_skewed": skewed, "_no_gpus": no_gpus} | job_row(
            job_id=job_id, scheduler="file", cluster=cluster, start_time=start, end_time=start if skewed else end,
            state=state or ("RUNNING" if end is None else None), gpus=gpus,
            nodes=read("nodes", parse_nodes), instance_ids=read("instance_ids", parse_instance_ids),
            submit_time=read("submit_time", self._time),
            labels=with_parent_run(read("labels", parse_labels), read(PARENT_RUN, parse_shared_text)),
            restarts=read("restarts", parse_restarts), **{name: read(name, parse_shared_text) for name in TEXT_COLUMNS})


def joined_id(parts: list[Any]) -> str | None:
    """A job id made of several columns (columns: maps them all to job_id): the cells that
    have a value, stripped, joined with '/'."""
    texts = [text for text in map(parse_text, parts) if text]
    return "/".join(texts) or None


class _ColumnError(Exception):
    def __init__(self, column: str, reason: str):
        super().__init__(reason)
        self.column, self.reason = column, reason


def _no_rows() -> pa.Table:
    import pyarrow as pa

    schema = jobs_schema()
    return schema.empty_table().append_column("_row", pa.array([], pa.int64())).append_column(
        "_at", pa.array([], pa.string()))


def _stored_rows(con: duckdb.DuckDBPyConnection, rows: pa.Table, number: int) -> str:
    return stored(con, f"SELECT *, CAST({int(number)} AS INTEGER) AS _file FROM {{rows}}", rows=rows)


def merged(con: duckdb.DuckDBPyConnection, tables: list[str], files: list[Path]) -> duckdb.DuckDBPyRelation:
    """The files' rows (`tables`, temporary) as one relation of `jobs`: a job listed in several
    files (exports whose windows overlap) once, the row that has ended, else the later file's;
    record_id `<cluster>/<job_id>@<start_time>`. The same job id starting at the same time twice
    in one file is one job listed twice: an error naming both rows."""
    rows = " UNION ALL ".join(f"SELECT * FROM {table}" for table in tables)
    twice = con.sql(f"SELECT job_id, start_time, _file, list(_at ORDER BY _row) FROM ({rows}) AS t "
                    "GROUP BY cluster, job_id, start_time, _file HAVING count(*) > 1 "
                    "ORDER BY coalesce(cluster, ''), job_id, start_time, _file LIMIT 1").fetchall()
    if twice:
        [(job_id, start, file, where)] = twice
        raise DataError(f"job {job_id} is listed twice with start_time {start.isoformat()} ({where[0]} and "
                        f"{where[1]})", where=str(files[file]),
                        hint="keep one row per job (or per attempt, with different start times); for parts of one job "
                             "(a trace's tasks), map the column telling them apart to job_id too (README: jobs-file)")
    columns = ", ".join(f'"{name}"' for name in jobs_schema().names if name != "record_id")
    return con.sql(
        "SELECT coalesce(cluster, '') || '/' || job_id || '@' || strftime(start_time, '%Y-%m-%dT%H:%M:%S') || "
        "CASE WHEN microsecond(start_time) % 1000000 <> 0 THEN strftime(start_time, '.%f') ELSE '' END "
        f"AS record_id, {columns} FROM (SELECT *, row_number() OVER (PARTITION BY cluster, job_id, start_time "
        f"ORDER BY end_time IS NOT NULL DESC, _file DESC) AS kept FROM ({rows}) AS t) AS listed WHERE kept = 1")
