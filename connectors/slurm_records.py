"""Slurm accounting records → rows of `jobs`: pure functions over what sacct and slurmrestd
print, shared by the file and HTTP paths of connectors/slurm_jobs.py (sacct --parsable2 files
are read column-wise by connectors/sacct_columns.py, with these functions once per distinct value;
`slurm_jobs` makes the rows in DuckDB from the attempts' table).

- A job allocation is one row; its steps (`123.batch`, `123.extern`, `123.0`) are not jobs
  and are skipped: the allocation held the GPUs whatever its steps used.
- A requeued job has one record per attempt (`sacct --duplicates`, slurmrestd with a
  start_time): each attempt is a row, with `restarts` = the attempts before it.
- An array task is a job of its own (`7_1`, raw id 7; `7_0`, raw id 9); a heterogeneous
  job's components likewise (`10+0`, `10+1`). Their run defaults to the job as submitted
  (`7`, `10`); a plain job's run is its job id.
- GPUs are the allocation's `gres/gpu` TRES. With typed gres (`gres/gpu:h100=8`) the typed
  counts are summed, a MIG type (`gpu:3g.40gb`) as its share of a GPU; a GRES sharing GPUs
  (`gres/shard=2`) as the share the source's `shared_gpus` gives it.
- JSON documents become attempts in connectors/slurm_json.py, parsable2 lines read one by one
  in connectors/sacct_lines.py.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections.abc import Iterable
from functools import lru_cache
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import duckdb

from connectors.jobs_base import BATCH_ROWS, JOB_COLUMNS, from_epoch, jobs_schema, labelled_run, mig_fraction, stored
from service.core import json_text
from service.core.connection import isolated_connection
from service.core.job_states import FINISHED
from service.core.units import local_utc

if TYPE_CHECKING:
    import pyarrow as pa

# The --format list README documents; REQUIRED are the columns a parsable2 file must have.
SACCT_FORMAT = ("JobID,JobIDRaw,Cluster,Partition,Account,User,QOS,WCKey,State,Submit,Start,End,Elapsed,NodeList,"
                "AllocTRES,JobName,Comment")  # free text last: a '|' in it is told from the delimiter
REQUIRED = ("JobID", "JobIDRaw", "State", "Submit", "Start", "End", "NodeList", "AllocTRES")
NO_TIME = frozenset({"", "Unknown", "None", "N/A", "INVALID", "0"})  # "0": JSON's unset, as some tools print it
ENDED = FINISHED | {"REQUEUED",  # and flags set on an attempt that ended:
                    "COMPLETING", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT", "STAGE_OUT"}
_GRES = re.compile(r"(?:^|,)gres/([^=,:]+(?::[^=,]+)?)=(\d+(?:\.\d+)?)")
# a GRES that shares GPUs (`shard`, `mps`) → the share of a GPU one unit is (slurm-jobs `shared_gpus`)
GpuShares = tuple[tuple[str, float], ...]
SHARING_GRES = ("mps", "shard")  # Slurm's GRES that share GPUs (CUDA MPS, Sharding)
EPOCH = r"\d{9,11}"  # SLURM_TIME_FORMAT=%s: seconds since 1970 (1973 to 5138)
_DURATION = re.compile(r"^(?:(?:(\d+)-)?(\d+):)?(\d+):(\d+(?:\.\d+)?)$")
# a key=value word of a comment (a value "quoted" to hold spaces; a stray quote is dropped), apart from its neighbours
_PAIR = re.compile(r'(?<![^\s,;])([A-Za-z_][\w.\-/]*)=("[^"]*"(?![^\s,;])|[^\s,;]*)')


class BadRecord(ValueError):
    """A record that cannot be read; the caller names the file (and line). `hint`: the next
    step when it is not the format's (a file cut short is re-read, not rewritten)."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


def slurm_duration(text: str | None) -> float | None:
    """Elapsed/Timelimit `[DD-[HH:]]MM:SS[.fff]` → seconds; None for UNLIMITED, Unknown, ..."""
    match = _DURATION.match((text or "").strip())
    if not match:
        return None
    days, hours, minutes, seconds = match.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)


def gres_gpus(entries: Iterable[tuple[str, float]], shares: GpuShares = ()) -> float:
    """GPUs from gres TRES entries ("gpu" or "gpu:<type>", count), and from those of a GRES that
    shares GPUs (`shares`: "shard" → 0.25), each at its share: the untyped count, else the typed ones'."""
    untyped = 0.0
    typed: list[tuple[str, float]] = []
    shared = 0.0
    entries = list(entries)
    for name, share in shares:
        counts = [count for kind, count in entries if kind == name] or \
            [count for kind, count in entries if kind.startswith(f"{name}:")]
        shared += sum(counts) * share
    for name, count in entries:
        if name == "gpu":
            untyped += count
        elif name.startswith("gpu:"):
            typed.append((name[4:], count))
    if not typed:
        return untyped + shared
    fractions = [mig_fraction(kind) for kind, _ in typed]
    total = sum(count * (fraction or 1.0) for (_, count), fraction in zip(typed, fractions))
    return (total if any(fractions) else max(total, untyped)) + shared


def unshared_gres(entries: Iterable[tuple[str, float]], shares: GpuShares = ()) -> str | None:
    """The first GRES sharing GPUs (SHARING_GRES) the entries hold that `shares` does not count:
    its units then count no GPU."""
    counted = {name for name, _ in shares}
    return next((base for base in (name.split(":", 1)[0] for name, count in entries if count > 0)
                 if base in SHARING_GRES and base not in counted), None)


def tres_entries(text: str | None) -> list[tuple[str, float]]:
    return [(name, float(count)) for name, count in _GRES.findall(text or "")]


def alloc_tres_gpus(text: str, shares: GpuShares = ()) -> float:
    """`billing=1,cpu=1,gres/gpu=2,node=1` → 2.0; `gres/gpu=8,gres/gpu:1g.10gb=8` → 8/7;
    `gres/shard=2` with shares (("shard", 0.25),) → 0.5."""
    return gres_gpus(tres_entries(text), shares)


def alloc_tres_unshared(text: str, shares: GpuShares = ()) -> str | None:
    """`unshared_gres` of an AllocTRES text: `gres/shard=2` without shares → "shard"."""
    return unshared_gres(tres_entries(text), shares)


def _shared(text: str | None) -> str | None:
    """One copy of a value a million records repeat (user, account, partition, job name)."""
    return sys.intern(text) if text else text


@lru_cache(maxsize=65_536)
def comment_labels(comment: str | None) -> dict[str, str]:
    """Labels a job comment carries: a JSON object, or its key=value words (`run=sft-v2 job_type=sft`;
    `run=r9 resumed after OOM` → run r9: the other words are not labels). Cached (a run's jobs
    share a comment): callers copy, never change, what it returns."""
    text = (comment or "").strip()
    if text.startswith("{"):
        try:
            data = json_text.loads(text)
        except ValueError:
            return {}
        if isinstance(data, dict):
            return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in data.items() if v is not None}
        return {}
    return {key: value.strip('"') for key, value in _PAIR.findall(text)}


def unread_labels(comment: str | None) -> bool:
    """A comment that looks meant as labels (a `{`, an `=`) and yields none: JSON that does not
    parse, `=` with no key=value word."""
    text = (comment or "").strip()
    return (text.startswith("{") or "=" in text) and not comment_labels(text)


class Attempt:
    """One allocation record, as read; `row()` makes it a `jobs` row once restarts are known.
    Slotted: a month of a big cluster is a million of them in memory at once."""

    __slots__ = ("raw_id", "job_id", "submitted_as", "cluster", "state", "submit", "start", "end", "gpus", "nodes",
                 "user", "account", "partition", "qos", "name", "comment", "wckey", "record_id", "skewed_end",
                 "unshared")

    def __init__(self, *, raw_id: str, job_id: str, submitted_as: str, cluster: str | None, state: str | None,
                 submit: datetime | None, start: datetime | None, end: datetime | None, elapsed: float | None,
                 gpus: float, nodes: Iterable[str] | None, user: str | None, account: str | None,
                 partition: str | None, qos: str | None, name: str | None, wckey: str | None,
                 comment: str | None, unshared: str | None = None):
        if end is None and start is not None and elapsed is not None and state in ENDED:
            end = start + timedelta(seconds=elapsed)  # sacct without an End for a finished job
        # an End before the Start (the controller's clock stepped back): no GPU time, said by the reader
        self.skewed_end = end if end is not None and start is not None and end < start else None
        end = start if self.skewed_end else end
        self.raw_id, self.job_id, self.submitted_as, self.cluster = raw_id, job_id, submitted_as, _shared(cluster)
        self.state, self.submit, self.start, self.end, self.gpus = _shared(state), submit, start, end, gpus
        self.nodes = tuple(nodes) if nodes else None
        self.user, self.account, self.partition = _shared(user), _shared(account), _shared(partition)
        self.qos, self.name = _shared(qos), _shared(name)
        self.comment, self.wckey = _shared((comment or "").strip()), _shared((wckey or "").lstrip("*"))
        # the epoch of the naive UTC submit time, whatever the machine's zone
        epoch = int(submit.replace(tzinfo=timezone.utc).timestamp()) if submit else 0
        self.record_id = f"{cluster or ''}/{raw_id}@{epoch}"
        self.unshared = unshared  # a GRES sharing GPUs held that the source does not count (unshared_gres)


# ---- attempts as a table, and the rows of `jobs` -----------------------------------------

ATTEMPT_COLUMNS = {  # the table's columns → their types, by name (Arrow loaded only to read)
    "record_id": "text", "raw_id": "text", "job_id": "text", "submitted_as": "text", "cluster": "text",
    "state": "text", "submit_time": "time", "start_time": "time", "end_time": "time", "skewed_end": "time",
    "gpus": "float64", "nodes": "text list", "user": "text", "account": "text", "partition": "text",
    "qos": "text", "name": "text", "comment": "text", "wckey": "text",  # comment, wckey: '' when none
    "unshared": "text",
    "_file": "int32", "_row": "int64"}


@lru_cache(maxsize=1)
def attempts_schema() -> pa.Schema:
    import pyarrow as pa

    types = {"text": pa.string(), "time": pa.timestamp("us"), "float64": pa.float64(),
             "text list": pa.list_(pa.string()), "int32": pa.int32(), "int64": pa.int64()}
    return pa.schema([(name, types[kind]) for name, kind in ATTEMPT_COLUMNS.items()])


def attempts_table(attempts: list[Attempt], file: int = 0, first_row: int = 0) -> pa.Table:
    """`attempts` (read one at a time) as the table, in their order, `_row` counted from `first_row`."""
    fields = {"submit_time": "submit", "start_time": "start", "end_time": "end"}
    columns = {name: [getattr(a, fields.get(name, name)) for a in attempts] for name in list(ATTEMPT_COLUMNS)[:-2]}
    columns["nodes"] = [list(nodes) if nodes else None for nodes in columns["nodes"]]
    columns["_file"] = [file] * len(attempts)
    columns["_row"] = list(range(first_row, first_row + len(attempts)))
    import pyarrow as pa

    return pa.table(columns, schema=attempts_schema())


KEPT = frozenset({"record_id", "job_id", "submitted_as", "cluster", "state", "submit_time", "start_time", "end_time",
                  "gpus", "nodes", "user", "account", "partition", "qos", "name", "wckey"})


def stored_attempts(con: duckdb.DuckDBPyConnection, attempts: Iterable[Attempt], file: int = 0) -> str:
    """`attempts` (read one at a time) in a temporary table of `con` (its name), in their order,
    BATCH_ROWS at a time: a file read line by line never holds its million records at once."""
    table, rows, attempts = None, 0, iter(attempts)
    try:
        while True:
            batch = list(itertools.islice(attempts, BATCH_ROWS))
            if batch or table is None:
                table = stored(con, "SELECT * FROM {attempts}", into=table,
                               attempts=attempts_table(batch, file, first_row=rows))
            rows += len(batch)
            if len(batch) < BATCH_ROWS:
                return table
    except BaseException:
        if table is not None:
            con.execute(f"DROP TABLE IF EXISTS {table}").fetchall()
        raise


# A job requeued in the second it was submitted (or last requeued) has attempts of one submit
# second, so of one record id. An attempt's start, once set, stays, and the reads come in order
# (files by name, each's lines; an appended export repeats an attempt, with its start or, before
# it started, none). So an attempt with a start that any read of its id shows starting later, or
# a later read shows pending, was followed by another: it takes its start epoch after the id,
# `@<submit>~<start>`, and history keeps each attempt, the latest keeping the id the snapshots
# that no longer list the others give it. One unordered window: a month of a big cluster is a
# million attempts.
SAME_SECOND = ("SELECT * REPLACE (CASE WHEN start_time < max(start_time) OVER id OR (start_time IS NOT NULL AND "
               "max(CASE WHEN start_time IS NULL THEN [_file, _row] END) OVER id > [_file, _row]) THEN record_id || "
               "'~' || CAST(epoch(start_time) AS BIGINT) ELSE record_id END AS record_id) FROM ({attempts}) AS listed "
               "WINDOW id AS (PARTITION BY record_id)")


def slurm_jobs(con: duckdb.DuckDBPyConnection, attempts: str, run_labels: Iterable[str]) -> duckdb.DuckDBPyRelation:
    """`jobs` rows of `attempts` (SQL over attempts tables, ATTEMPT_COLUMNS): one per record id (the last read
    that has ended, else the last read: files in name order), restarts counted per job in submit
    order, a job's comment from its latest attempt showing one (Slurm 22.05 stores the comment
    when an attempt ends, so the running attempt of a requeued job shows none, yet it is the same
    job and run), else from a task or heterogeneous component of its submission showing one (a
    running task's is not stored yet; `--comment` before `hetjob` sets the first component's
    only); labels and run once per distinct comment and wckey."""
    names = ", ".join(f'"{name}"' for name in ATTEMPT_COLUMNS if name in KEPT)  # what the rows take
    # a record read once (most files) is its own newest and no same-second requeue (SAME_SECOND changes only a
    # record id read twice): the windows over every record are spared (a fifth of this)
    [(once,)] = con.sql(f"SELECT count(*) = count(DISTINCT record_id) FROM ({attempts}) AS read").fetchall()
    read = f"({attempts}) AS read" if once else f"({SAME_SECOND.format(attempts=attempts)}) AS read"
    newest = "" if once else ("QUALIFY row_number() OVER (PARTITION BY record_id ORDER BY end_time IS NOT NULL DESC, "
                              "_file DESC, _row DESC) = 1")
    kept = stored(con, (
        f"SELECT {names}, CAST(row_number() OVER job - 1 AS INTEGER) AS restarts, coalesce(nullif(comment, ''), "
        "last_value(nullif(comment, '') IGNORE NULLS) OVER (job ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED "
        "FOLLOWING), last_value(nullif(comment, '') IGNORE NULLS) OVER (PARTITION BY cluster, CASE WHEN job_id <> "
        "raw_id AND job_id <> submitted_as THEN submitted_as ELSE raw_id END ORDER BY submit_time NULLS FIRST, raw_id "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), '') AS job_comment "
        f"FROM (SELECT * FROM {read} {newest}) AS kept "
        "WINDOW job AS (PARTITION BY cluster, raw_id ORDER BY submit_time NULLS FIRST, start_time NULLS LAST)"))
    run_labels = tuple(run_labels)
    comments, wckeys, runs = [], [], []
    keys, texts, ends, without = [], [], [0], []  # the labels as Arrow builds a map: flat, with each one's end
    for comment, wckey in con.sql(f"SELECT DISTINCT job_comment, wckey FROM {kept}").fetchall():
        found = {**comment_labels(comment), **({"wckey": wckey} if wckey else {}),
                 **({"comment": comment} if comment else {})}
        comments.append(comment)
        wckeys.append(wckey)
        keys += found
        texts += found.values()
        ends.append(len(keys))
        without.append(not found)
        runs.append(labelled_run(found, run_labels))
    import pyarrow as pa

    labels = pa.MapArray.from_arrays(pa.array(ends, pa.int32()), pa.array(keys, pa.string()),
                                     pa.array(texts, pa.string()), type=jobs_schema().field("labels").type,
                                     mask=pa.array(without, pa.bool_()))
    said = stored(con, "SELECT * FROM {said}", said=pa.table({
        "comment": pa.array(comments, pa.string()), "wckey": pa.array(wckeys, pa.string()), "labels": labels,
        "run": pa.array(runs, pa.string())}))
    values = {"run_id": "coalesce(s.run, nullif(k.submitted_as, ''), k.job_id)", "scheduler": "'slurm'",
              "labels": "s.labels"}
    columns = {"record_id", "job_id", "cluster", "state", "submit_time", "start_time", "end_time", "gpus", "nodes",
               "user", "account", "partition", "qos", "name", "restarts"}
    return con.sql("SELECT " + ", ".join(
        f'CAST({values.get(name, f"k.{quoted}" if name in columns else "NULL")} AS {kind}) AS {quoted}'
        for name, kind, quoted in ((name, kind, f'"{name}"') for name, kind in JOB_COLUMNS)) + f" FROM {kept} AS k "
        f"LEFT JOIN {said} AS s ON k.job_comment = s.comment AND k.wckey = s.wckey")


def rows_of(attempts: Iterable[Attempt], run_labels: Iterable[str]) -> list[dict[str, Any]]:
    """`slurm_jobs` of `attempts` as dicts, for a caller without a connection."""
    with isolated_connection() as con:
        rows = slurm_jobs(con, f"SELECT * FROM {stored_attempts(con, attempts)}", run_labels).order(
            "record_id").to_arrow_table().to_pylist()
    return [row | {"labels": dict(row["labels"]) if row["labels"] is not None else None} for row in rows]


# ---- sacct --parsable2 times (connectors/sacct_lines.py reads its lines) ----------------------

def parse_sacct_time(text: str, zone: ZoneInfo, column: str, fold: int = 0) -> datetime | None:
    """sacct's default `2026-12-01T20:47:05` (in `zone` unless it carries an offset), or the
    seconds since 1970 `SLURM_TIME_FORMAT=%s` prints (the same instant in every zone).
    `fold`: which pass of an hour `zone`'s clocks go through twice the time is (0: the first);
    a time `zone`'s clocks skip (spring forward) is a BadRecord."""
    text = text.strip()
    if text in NO_TIME:
        return None
    if re.fullmatch(EPOCH, text):
        return from_epoch(int(text))
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadRecord(f"{column} {text!r} is not a time such as 2026-12-01T20:47:05 "
                        "(leave SLURM_TIME_FORMAT unset, or set it to %s)") from None
    try:
        return local_utc(moment, zone, fold)
    except ValueError as exc:
        raise BadRecord(f"{column} {exc}") from None


def field_text(value: str | None) -> str | None:
    return value.strip() or None if value else None
