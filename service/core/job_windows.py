"""When a window job source's snapshots were taken, and from when each one reads.

A window source (slurm-jobs with `url`, k8s-pods) reads the jobs active in [now -
lookback_hours, now]; `inventory` writes `taken_at` (now) and `window_start` into each of its
`jobs` snapshots' records (service/core/snapshot_ledger.py). A record running when snapshot S
was taken, that a newer snapshot of its source reading from after then does not hold, has
ended: the readers of job history (allocation.SETTLED_JOBS) end it when S was taken, from
the view `job_snapshots(source, snapshot_date, taken_at, window_start)` made here. Snapshots
without these fields (files read, older records) end nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone

import duckdb

WINDOW_FIELDS = ("taken_at", "window_start")
VIEW = "job_snapshots"
_COLUMNS = (("source", "VARCHAR"), ("snapshot_date", "VARCHAR"), ("taken_at", "TIMESTAMP"),
            ("window_start", "TIMESTAMP"))


def window_fields(now: datetime, lookback_hours: int) -> dict[str, str]:
    """A window snapshot's record fields: its run's `now` and the start of what it read (ISO, UTC;
    the whole second the connectors ask their source from)."""
    taken = now.astimezone(timezone.utc)
    start = (taken - timedelta(hours=lookback_hours)).replace(microsecond=0)
    return {"taken_at": taken.isoformat(), "window_start": start.isoformat()}


def snapshot_rows(records: Iterable[tuple[str, dict | None]]) -> list[tuple]:
    """(source, snapshot_date, taken_at, window_start) of each `(snapshot path or URL, its
    record)` whose record holds both times (naive UTC, as the lake's); others are left out."""
    rows = []
    for path, record in records:
        source, partition = str(path).rsplit("/", 3)[-3:-1]
        try:
            taken, start = (_naive(datetime.fromisoformat((record or {})[name])) for name in WINDOW_FIELDS)
        except (KeyError, TypeError, ValueError):
            continue
        rows.append((source.split("=", 1)[1], partition.split("=", 1)[1], taken, start))
    return rows


def window_stamp(record: dict | None) -> str:
    """A snapshot's times as its part of the rollups' version (service/attribution/jobs.py):
    a re-run the same day with the same records ends others' running jobs later, or earlier."""
    values = [(record or {}).get(name) for name in WINDOW_FIELDS]
    return "/".join(values) if all(isinstance(v, str) for v in values) else ""


def create_view(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> None:
    """`job_snapshots` on `con` over `rows` (snapshot_rows), the values bound."""
    columns = ", ".join(f"CAST({name} AS {kind}) AS {name}" for name, kind in _COLUMNS)
    names = ", ".join(name for name, _ in _COLUMNS)
    values = ", ".join(["(?, ?, ?, ?)"] * len(rows)) or "(NULL, NULL, NULL, NULL)"
    con.sql(f"SELECT {columns} FROM (VALUES {values}) AS t({names})" + ("" if rows else " WHERE false"),
            params=[value for row in rows for value in row] or None).create_view(VIEW)


def _naive(moment: datetime) -> datetime:
    return (moment.astimezone(timezone.utc) if moment.tzinfo else moment).replace(tzinfo=None)
