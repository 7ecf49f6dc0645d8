"""The virtual-tag rules on a job's own fields (`job_name`, `partition`, `qos`, `namespace`)
that match no job record: a pattern that matches no job ever is a mistake the config cannot
show by itself (a typo in a regular expression, a partition renamed), and one that matches
none in a window says why that window has no such value."""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import duckdb

from service.attribution.jobs import JOBS_TABLE
from service.attribution.job_values import JOB_FIELDS
from service.attribution.sql import rule_condition
from service.attribution.statement import Params
from service.core.config_attribution import AttributionConfig
from service.core.config_clusters import JOB_MATCH_FIELDS
from service.core.lake import DATA_FILE, READER_MEMORY_LIMIT, Lake
from service.core.snapshot import Snapshot
from service.core.snapshot_ledger import RECORDS
from service.core.timewindow import Window


@dataclass(frozen=True)
class IdleRule:
    path: str  # attribution.dimensions.<dim>.rules[i]
    match: dict[str, str]  # its conditions on a job's fields
    ever: bool  # it matches a job outside the window

    def text(self) -> str:
        shown = ", ".join(f"{key} {value!r}" for key, value in self.match.items())
        if self.ever:
            return f"{self.path} ({shown}) matches no job in the window (it matches jobs outside it)"
        return (f"{self.path} ({shown}) matches no job record of the lake: check it against the jobs' "
                f"{', '.join(self.match)} (`job_name` is a regular expression, the others whole values, any case)")


def idle_job_rules(lake: Lake, config: AttributionConfig, window: Window, dims: tuple[str, ...] | None = None,
                   con: duckdb.DuckDBPyConnection | None = None, snapshot: Snapshot | None = None) -> list[IdleRule]:
    """The rules of `dims` (None: every dimension) with a condition on a job's fields that no
    job record meets in `window` (those conditions alone: the rule's others cannot widen it).
    `con`: a connection with the lake's `jobs` view to read them on (an answer's own: a
    connection of its own and the job records' checks cost ~25 ms), else one is opened on
    `snapshot` (an answer's: its job records, Snapshot.tables; None: the job records there now).
    A check is kept by what it reads (the service asks on every request): with `con`, only
    when `snapshot`, the one `con` reads, is given too."""
    if config.clusters is None or not lake.has_table(JOBS_TABLE):
        return []
    rules = [(f"attribution.dimensions.{name}.rules[{i}]", {k: v for k, v in rule.match.items() if k in JOB_MATCH_FIELDS})
             for name, dim in config.dimensions.items() if dims is None or name in dims
             for i, rule in enumerate(dim.rules)]
    rules = [(path, match) for path, match in rules if match]
    if not rules:
        return []
    # `con` without its snapshot: what it reads is not known here
    key = None if con is not None and snapshot is None else _checked_key(lake, rules, window, snapshot)
    with _KEPT:
        if key is not None and key in _CHECKED:
            _CHECKED.move_to_end(key)
            return list(_CHECKED[key])
    params = Params()
    inside = (f"start_time < {params.bind(window.until.replace(tzinfo=None), 'until')} AND "
              f"coalesce(end_time, $until) > {params.bind(window.since.replace(tzinfo=None), 'since')}")
    tests = [rule_condition(match, params) for _, match in rules]
    fields = ", ".join(f"CAST({JOB_FIELDS[key]} AS VARCHAR) AS {column}" for key, column in JOB_MATCH_FIELDS.items())
    reading = (nullcontext(con) if con is not None
               else lake.query(snapshot, memory_limit=READER_MEMORY_LIMIT, tables=(JOBS_TABLE,)))
    with reading as reader:
        found = reader.execute(
            f"SELECT {', '.join(f'coalesce(bool_or({t} AND w), false), coalesce(bool_or({t}), false)' for t in tests)} "
            f"FROM (SELECT {fields}, {inside} AS w FROM jobs) AS j", params.values).fetchall()[0]
    idle = [IdleRule(path, match, found[2 * i + 1]) for i, (path, match) in enumerate(rules) if not found[2 * i]]
    if key is not None:
        with _KEPT:  # the service's requests run in threads
            _CHECKED[key] = list(idle)
            while len(_CHECKED) > CHECKS_KEPT:
                _CHECKED.popitem(last=False)
    return idle


# The service checks the rules on every /api/v1/attribute request: an answer is kept by what it
# read (the job records' files, the rules, the window), so a request repeated between two
# inventory runs reads no job record (at 200k jobs ~50 ms CPU, half an answer from the rollups).
_CHECKED: OrderedDict[tuple, list[IdleRule]] = OrderedDict()
_KEPT = threading.Lock()
CHECKS_KEPT = 64


def _checked_key(lake: Lake, rules: list[tuple[str, dict[str, str]]], window: Window,
                 snapshot: Snapshot | None = None) -> tuple | None:
    """What a check reads: each job records file (those `snapshot` holds, else those there now) and
    its record as they are now (a commit renames a new file in place: another inode and time), the
    configured sources, the rules and the window; None when a file went while it was listed (the
    check then reads, and keeps nothing)."""
    held = snapshot.tables.get(JOBS_TABLE) if snapshot is not None else None
    read = ([Path(pin.path) for pin in held] if held is not None
            else list(lake.table_dir(JOBS_TABLE).glob(f"*=*/*=*/{DATA_FILE}")))
    try:  # the files and their records: a record damaged after a kept check must fail the next as a read does
        files = tuple(sorted((str(path), (stat := path.stat()).st_ino, stat.st_size, stat.st_mtime_ns)
                             for path in [*read,
                                          *(lake.root / RECORDS / JOBS_TABLE).glob("source=*/*=*.json")]))
    except OSError:
        return None
    return (str(lake.root), lake.sources, files, tuple((path, tuple(match.items())) for path, match in rules),
            window.since, window.until)
