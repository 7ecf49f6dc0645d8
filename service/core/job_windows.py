"""When a window job source's snapshots were taken, and from when each one reads.

A window source (slurm-jobs with `url`, k8s-pods) reads the jobs active in [now -
lookback_hours, now]; `inventory` writes `taken_at` (now) and `window_start` into each of its
`jobs` snapshots' records (service/core/snapshot_ledger.py). A record running when snapshot S
was taken, that a newer snapshot of its source does not hold, has ended: the readers of job
history (allocation.SETTLED_JOBS) end it when S was taken, from the view
`job_snapshots(source, snapshot_date, taken_at, window_start, fingerprint)` made here. The
newer one read from after then (the job ended in between), or from before (its source no
longer knows the job: a Prometheus that lost its data, slurmdbd purged): either way the job
was last seen when S was taken, and holding its GPUs on would take every later bill's hours
from the jobs seen there and from idle; a still newer snapshot holding it again is its
newest record and runs it on. Snapshots without these times (files read, older records) end
none of their own records, but are newer snapshots all the same: a source switched from
slurmrestd to sacct files (`url` to `path`) whose files do not hold a job its last window saw
running ends it when last seen, as a window would (else it ran on for ever).

Each record also holds the `fingerprint` of the source's settings that decide which jobs a
read returns (a hash: a URL may hold a secret): a newer snapshot that asked otherwise ends
S's running jobs it does not hold as any other does, and `inventory` says they are no longer
asked about (say a namespace no longer read) so a setting changed by mistake is seen. A
record without a fingerprint (written before 2026-12-04) is taken to have asked the same as
any other.

A source's snapshot of a day is replaced when inventory runs again that day; a window shorter
than the time since the earlier run, or files holding only the last hour (an hourly `sacct -S
now-1h`) or moved out once read, would lose the jobs only the earlier one held (their GPU-hours
idle), so the later keeps them (`kept_earlier`) as a newer snapshot of another day would: a
window's running one ended when the earlier was taken, one of files as it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import duckdb

# A pod's uid: the last part of a <cluster>/<uid> record. Unique across clusters, it is the pod
# whatever the source's `cluster` was named when the record was read (a rename would make two).
POD_UID = ("CASE WHEN scheduler = 'kubernetes' AND record_id = concat(coalesce(cluster, ''), '/', "
           "regexp_replace(record_id, '^.*/', '')) THEN regexp_replace(record_id, '^.*/', '') END")
WINDOW_FIELDS = ("taken_at", "window_start")
FINGERPRINT = "fingerprint"
VIEW = "job_snapshots"
_COLUMNS = (("source", "VARCHAR"), ("snapshot_date", "VARCHAR"), ("taken_at", "TIMESTAMP"),
            ("window_start", "TIMESTAMP"), (FINGERPRINT, "VARCHAR"))


def window_fields(now: datetime, lookback_hours: int, question: Mapping[str, Any] | None = None) -> dict[str, str]:
    """A window snapshot's record fields: its run's `now` and the start of what it read (ISO, UTC;
    the whole second the connectors ask their source from), and the fingerprint of `question`
    (the source's settings that decide which jobs it returns, JSON values) if given."""
    taken = now.astimezone(timezone.utc)
    start = (taken - timedelta(hours=lookback_hours)).replace(microsecond=0)
    fields = {"taken_at": taken.isoformat(), "window_start": start.isoformat()}
    if question is not None:
        fields[FINGERPRINT] = hashlib.sha256(json.dumps(question, sort_keys=True).encode()).hexdigest()
    return fields


def asked_alike(newer: str, older: str) -> str:
    """SQL: the `job_snapshots` rows aliased `newer` and `older` asked the same (either without
    a fingerprint: as before there was one)."""
    return (f"({newer}.{FINGERPRINT} IS NULL OR {older}.{FINGERPRINT} IS NULL "
            f"OR {newer}.{FINGERPRINT} = {older}.{FINGERPRINT})")


def window_times(record: dict | None) -> tuple[datetime, datetime] | None:
    """(taken_at, window_start) of a window snapshot's record, naive UTC; None unless it holds both."""
    try:
        taken, start = (_naive(datetime.fromisoformat((record or {})[name])) for name in WINDOW_FIELDS)
    except (KeyError, TypeError, ValueError):
        return None
    return taken, start


def snapshot_rows(records: Iterable[tuple[str, dict | None]]) -> list[tuple]:
    """(source, snapshot_date, taken_at, window_start, fingerprint or None) of each `(snapshot
    path or URL, its record)`: the times naive UTC, as the lake's; both None unless its record
    holds both (a snapshot of files ends nothing of its own, but is newer than a window's)."""
    rows = []
    for path, record in records:
        source, partition = str(path).rsplit("/", 3)[-3:-1]
        taken, start = window_times(record) or (None, None)
        fingerprint = record.get(FINGERPRINT) if record else None
        rows.append((source.split("=", 1)[1], partition.split("=", 1)[1], taken, start,
                     fingerprint if isinstance(fingerprint, str) else None))
    return rows


def window_stamp(record: dict | None) -> str:
    """A snapshot's times as its part of the rollups' version (service/attribution/jobs.py): a
    re-run the same day with the same records ends others' running jobs later, or earlier.
    What it asked (the fingerprint) ends nothing otherwise: only the warning says it."""
    values = [(record or {}).get(name) for name in WINDOW_FIELDS]
    return "/".join(values) if all(isinstance(v, str) for v in values) else ""


def create_view(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> None:
    """`job_snapshots` on `con` over `rows` (snapshot_rows), the values bound."""
    columns = ", ".join(f"CAST({name} AS {kind}) AS {name}" for name, kind in _COLUMNS)
    names = ", ".join(name for name, _ in _COLUMNS)
    row = f"({', '.join('?' for _ in _COLUMNS)})"
    values = ", ".join([row] * len(rows)) or row.replace("?", "NULL")
    con.sql(f"SELECT {columns} FROM (VALUES {values}) AS t({names})" + ("" if rows else " WHERE false"),
            params=[value for row in rows for value in row] or None).create_view(VIEW)


def not_held(records: str, holding: str) -> str:
    """SQL: the rows of table or view `records` that `holding` does not hold, by record or a pod by its
    uid (POD_UID: a pod read under its source's `cluster` renamed since is the same pod), with
    `records`' columns: what a day's snapshot taken again keeps of the earlier one (kept_earlier), and
    a run of the ended records only snapshots set aside held (service/ingest/jobs_ahead.py)."""
    return (f"SELECT * EXCLUDE (a_uid) FROM (SELECT *, {POD_UID} AS a_uid FROM {records}) AS e WHERE e.record_id "
            f"NOT IN (SELECT record_id FROM {holding}) AND (e.a_uid IS NULL OR e.a_uid NOT IN "
            f"(SELECT {POD_UID} FROM {holding} WHERE {POD_UID} IS NOT NULL))")


def _naive(moment: datetime) -> datetime:
    return (moment.astimezone(timezone.utc) if moment.tzinfo else moment).replace(tzinfo=None)


@dataclass(frozen=True)
class Kept:
    """A day's snapshot taken again: its records with the earlier one's it does not hold
    (`kept_earlier`), its record's facts, how many of the earlier's records it keeps, and the
    running ones among them it ended (how many, the first's id, when they were last seen)."""
    relation: duckdb.DuckDBPyRelation
    facts: dict[str, str] | None
    held: int = 0  # the earlier's records kept
    ended: int = 0
    first: str | None = None
    seen: datetime | None = None


def kept_earlier(con: duckdb.DuckDBPyConnection, relation: duckdb.DuckDBPyRelation, earlier: str,
                 record: dict | None, facts: dict[str, str] | None, now: datetime) -> Kept:
    """`relation` (a job snapshot taken at `now`, `facts` its record's window_fields or None:
    files read) with the records of the same day's `earlier` snapshot file (whole; `record` its
    record) that it does not hold (by record, or a pod by its uid: its source's `cluster` renamed
    in between), as a snapshot of another day would keep them: one of files read (no times) as it
    is (it ends nothing of its own), a window's running one ended when that was taken (by a
    clock set back since: now at the latest); the facts reading from the earlier start."""
    times = window_times(record)
    key = hashlib.sha256(earlier.encode()).hexdigest()[:16]
    later, before = f"later_{key}", f"earlier_{key}"
    relation.create_view(later)
    con.read_parquet(earlier, hive_partitioning=False).create_view(before)
    only = (f"SELECT *, $times AS times, $times AND end_time IS NULL AND start_time IS NOT NULL AS ends FROM "
            f"({not_held(before, later)})")
    taken = min(times[0], _naive(now)) if times else None  # min: a clock set back
    params = {"times": times is not None, "taken": taken}
    [(held, ended, first)] = con.execute(f"SELECT count(*), count(*) FILTER (ends), min(record_id) FILTER (ends) "
                                         f"FROM ({only})", {"times": params["times"]}).fetchall()
    now_times = window_times(facts)
    if times and now_times and times[1] < now_times[1]:
        facts = {**facts, "window_start": record["window_start"]}  # type: ignore[dict-item, index]
    if not held:  # the relation as it is: the same records give the same bytes (a union's columns are nullable)
        return Kept(relation, facts)
    kept = con.sql(f"SELECT * FROM {later} UNION ALL BY NAME SELECT * EXCLUDE (times, ends) REPLACE (CASE WHEN ends "
                   f"THEN greatest(start_time, CAST($taken AS TIMESTAMP)) ELSE end_time END AS end_time) FROM ({only})",
                   params=params)
    return Kept(kept, facts, held, ended, first, taken)
