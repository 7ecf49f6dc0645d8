"""What a run's row is built from (service/attribution/run_rows.py says how): its job records
in a window, and the idle share of the instances its jobs ran on.

    job_records(lake, con, config, window, billed_until) -> {run (lower case): JobSide}
    run_span(lake, con, run) -> (first start, last end, running)
    idle_shares(lake, session, config, window, cost) -> {(run lower case, currency): share}
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal

import duckdb

from service.attribution.allocation_stage import drop_stage
from service.attribution.compute import RollupSession
from service.attribution.job_values import job_values_ctes
from service.attribution.jobs import JOBS_TABLE, label_keys
from service.attribution.placed import parts_sql, stored_placed
from service.attribution.rollup_versions import cost_partitions, recorded_tag_keys
from service.attribution.sql import dim_col, held_records_cte
from service.attribution.statement import Params, run_setup
from service.attribution.tag_keys import all_tag_keys_sql
from service.core.config_attribution import AttributionConfig
from service.core.folding import folded
from service.core.job_states import Restarts, work_of
from service.core.lake import Lake
from service.core.snapshot import Snapshot
from service.core.timewindow import Window, utc_now
from service.core.units import share_of

VALUES = ("team", "project", "experiment", "job_type", "cluster", "user")
SEVERAL = "several"
CLUSTERS_JOINED = ","
HOURS = Decimal(3600)
RATIO_QUANTUM = Decimal("1e-4")
BATCH = 50_000  # job records read at once


@dataclass
class JobSide:
    """What a run's job records say in the window."""
    name: str
    jobs: int = 0
    gpus: Decimal = Decimal(0)
    gpu_hours: Decimal = Decimal(0)
    # (cluster, job id) → its GPU-hours up to the bill's end: a scheduler's job ids are its cluster's own
    held: dict[tuple[str, str], Decimal] = field(default_factory=dict)
    restarts: int = 0
    state: str | None = None  # its last job's: the one that ended last, a running one before any
    last: tuple | None = None  # (running, end, start) of the job `state` is from
    start: datetime | None = None
    end: datetime | None = None
    running: bool = False
    values: dict[str, str] | None = None  # what its jobs state (`several` where they differ), but cluster
    clusters: set[str | None] = field(default_factory=set)  # each cluster its jobs state

    @property
    def stated(self) -> dict[str, str | None]:
        return {**(self.values or {}), "cluster": joined_clusters(self.clusters)}


def joined_clusters(names: set[str | None]) -> str | None:
    """A run's clusters as one value: sorted (case-insensitively), joined by `,`."""
    return CLUSTERS_JOINED.join(sorted((n for n in names if n), key=lambda n: (folded(n), n))) or None


def held_key(cluster: str | None, job_id: str) -> tuple[str, str]:
    """A job's key in `JobSide.held`: its cluster (any case) and id, as job ids repeat across clusters."""
    return folded(cluster or ""), job_id


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(timezone.utc).replace(tzinfo=None)


def running_until(until: datetime) -> datetime:
    """Where a job still running stops holding GPUs in a window ending at `until` (naive UTC):
    now, when sooner (a run's window ends at the whole hour after it)."""
    return min(until, _naive(utc_now()))


def job_records(lake: Lake, con: duckdb.DuckDBPyConnection, config: AttributionConfig,
                 window: Window, billed_until: datetime | None = None) -> dict[str, JobSide]:
    """run (lower case) → its job records' figures in `window`: the newest snapshot of each
    record that held GPUs and overlaps the window, as allocation reads them, with the values
    its jobs state (service/attribution/job_values.py). `billed_until`: the bill's end, where
    `held` stops (hours after it have no cost yet, so no price)."""
    if not lake.has_table(JOBS_TABLE):
        return {}
    since, until = _naive(window.since), _naive(window.until)
    priced_until = min(until, _naive(billed_until)) if billed_until else until
    running = running_until(until)
    params = Params()
    records = held_records_cte(params, since, until, failed_before=True)
    values, last = job_values_ctes(config, "j_records", label_keys(con), VALUES, params)
    result = con.execute(
        f"WITH {records}, {values} SELECT run_id, state, start_time, end_time, gpus, job_id, name, scheduler, "
        f"{', '.join(dim_col(d) for d in VALUES)} FROM {last} ORDER BY start_time, end_time NULLS LAST, record_id",
        params.values)
    runs: dict[str, JobSide] = {}
    restarted: dict[str, Restarts] = defaultdict(Restarts)  # per run, its jobs so far, to tell the next a restart
    # in batches: a month's 200k records read at once held ~200 MB of rows beside what they add up to
    rows = (row for batch in iter(lambda: result.fetchmany(BATCH), []) for row in batch)
    for run_id, state, start, end, gpus, job_id, name, scheduler, *stated in rows:
        restart = restarted[folded(run_id)].told(start, end, state, work_of(job_id, name, scheduler))
        if end is not None and end <= since:  # a failure before the window: its restarts count in it
            continue
        side = runs.setdefault(folded(run_id), JobSide(run_id.strip()))
        gpus = job_gpus(gpus)
        side.restarts += restart
        side.jobs += 1
        side.gpus = max(side.gpus, gpus)
        side.gpu_hours += gpu_hours(gpus, max(start, since), min(end or running, until))
        # the run's last job is the one that ended last (a running one has not ended: it is last);
        # rows come by start time, so of jobs that ended together the later start wins
        last = (end is None, end or start, start)
        if side.last is None or last >= side.last:
            side.state, side.last = state, last
        side.start = side.start or start.replace(tzinfo=timezone.utc)
        side.running = side.running or end is None
        if end is not None:
            side.end = max(side.end or end.replace(tzinfo=timezone.utc), end.replace(tzinfo=timezone.utc))
        stated = dict(zip(VALUES, stated))
        cluster = stated.pop("cluster")
        side.clusters.add(cluster)
        key = held_key(cluster, job_id)
        side.held[key] = side.held.get(key, Decimal(0)) + gpu_hours(gpus, max(start, since),
                                                                     min(end or until, priced_until))
        side.values = stated if side.values is None else {d: v if v == stated[d] else SEVERAL
                                                          for d, v in side.values.items()}
    return runs


def job_gpus(value: float) -> Decimal:
    """A job record's GPUs (a DOUBLE: MIG slices and shared GPUs are fractions) as the decimal
    it was written as, whole when it is whole."""
    gpus = Decimal(repr(value))
    return gpus.to_integral_value() if gpus == gpus.to_integral_value() else gpus


def gpu_hours(gpus: Decimal, start: datetime, end: datetime) -> Decimal:
    """GPUs × the hours from `start` to `end` (none when it ends first), to the microsecond."""
    seconds = Decimal(int((end - start).total_seconds() * 1_000_000)) / 1_000_000
    return gpus * max(seconds, Decimal(0)) / HOURS


def run_span(lake: Lake, con: duckdb.DuckDBPyConnection, run: str) -> tuple[datetime | None, datetime | None, bool]:
    """When the run (any case) held GPUs, in every job record the lake holds (the newest
    snapshot of each, as `job_records` reads them): its first start, its last end, and whether
    one of its jobs still runs. (None, None, False): no record names it."""
    if not lake.has_table(JOBS_TABLE):
        return None, None, False
    params = Params()
    first, last, running = con.execute(
        f"WITH {held_records_cte(params, run=run)} SELECT min(start_time), max(end_time), bool_or(end_time IS NULL) "
        "FROM j_records", params.values).fetchall()[0]
    return (first and first.replace(tzinfo=timezone.utc), last and last.replace(tzinfo=timezone.utc), bool(running))


def placed_parts(lake: Lake, con: duckdb.DuckDBPyConnection, snapshot: Snapshot, config: AttributionConfig,
                 window: Window, cost: str, select: str, bind: dict | None = None) -> list[tuple]:
    """Rows of `select` over `parts` (`con`: a `Lake.query` connection on `snapshot`; no rollup
    view needed): allocation's job and idle parts of the window's cluster lines, the hours
    starting in `window`, with columns `run` (lower case), `resource`, `hour`, `currency`,
    `category` (the line's ChargeCategory), `kind` (`job` or `idle`) and `amount` (`cost`'s
    measure), per instance-hour. From the periods' stored placed rows when every period has
    them (service/attribution/placed.py), else allocated from the window's lines (in stages:
    only those lines are read in full). `bind` gives `select`'s own parameters (`$name`)."""
    params = Params()
    since, until = params.bind(_naive(window.since), "since"), params.bind(_naive(window.until), "until")
    for name, value in (bind or {}).items():
        params.bind(value, name)
    within = f"hour >= {since} AND hour < {until}"
    columns = f"run, resource, hour, currency, category, kind, {cost} AS amount"
    stored = stored_placed(lake, config, snapshot)
    if stored is not None:
        files = params.bind([str(file) for file in stored], "files")
        sql = f"WITH parts AS (SELECT {columns} FROM read_parquet({files}) WHERE {within}) {select}"
        return con.execute(sql, params.values).fetchall()
    start = "coalesce(ChargePeriodStart, BillingPeriodStart)"
    where = f"{start} < {until} AND (coalesce(ChargePeriodEnd, {start}) > {since} OR {start} >= {since})"
    tag_keys = recorded_tag_keys(cost_partitions(lake, snapshot))
    if tag_keys is None:
        tag_sql = all_tag_keys_sql()
        tag_keys = [row[0] for row in con.execute(tag_sql.text, tag_sql.params).fetchall()]
    lines = parts_sql(lake, con, config, where, params, tag_keys, (cost,))
    sql = lines.text + f", parts AS (SELECT {columns} FROM placed WHERE {within}) {select}"
    run_setup(con, lines)
    try:
        return con.execute(sql, lines.params).fetchall()
    finally:
        drop_stage(con, lines.stage)


def idle_shares(lake: Lake, session: RollupSession, config: AttributionConfig, window: Window,
                 cost: str) -> dict[tuple[str, str | None], Decimal]:
    """(run lower case, currency) → idle share of the instances its jobs' parts are on, over
    their hours that start in `window` (`placed_parts`, with the run dimension alone)."""
    instance_total: dict[tuple, Decimal] = defaultdict(Decimal)
    instance_idle: dict[tuple, Decimal] = defaultdict(Decimal)
    on: dict[tuple[str, str | None], set] = defaultdict(set)
    select = "SELECT run, resource, currency, kind, sum(amount) FROM parts GROUP BY ALL"
    for value, resource, currency, kind, amount in placed_parts(lake, session.con, session.snapshot, config, window, cost,
                                                                      select):
        instance_total[(resource, currency)] += amount or 0
        if kind == "idle":
            instance_idle[(resource, currency)] += amount or 0
        else:
            on[(value, currency)].add(resource)
    shares = {}
    for (value, currency), instances in on.items():
        share = share_of(sum((instance_idle[(i, currency)] for i in instances), Decimal(0)),
                         sum((instance_total[(i, currency)] for i in instances), Decimal(0)), RATIO_QUANTUM)
        if share is not None:
            shares[(value, currency)] = share
    return shares
