"""What a run's row is built from (service/attribution/run_rows.py says how): its job records
in a window, and the idle share of the instances its jobs ran on.

    job_records(lake, con, config, window, billed_until, run=None, as_of=False) -> {run (lower case): JobSide}
    run_span(lake, con, run) -> (first start, last end, running)
    evals_span(lake, con, config, run, since) -> (the last end of the eval jobs naming it, one running)
    idle_shares(lake, session, config, window, cost) -> {(run lower case, currency): share}
"""

from __future__ import annotations

import functools
import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import duckdb

from service.attribution.allocation_stage import drop_stage
from service.attribution.compute import RollupSession
from service.attribution.job_values import job_values_ctes
from service.attribution.jobs import JOBS_TABLE, label_keys
from service.attribution.placed import parts_sql, stored_placed
from service.attribution.rollup_versions import cost_partitions, recorded_tag_keys
from service.attribution.run_evals import EVAL, PARENT
from service.attribution.sql import dim_col, held_records_cte
from service.attribution.statement import Params, run_setup
from service.attribution.tag_keys import all_tag_keys_sql
from service.core.config_attribution import AttributionConfig
from service.core.folding import folded, folded_forms
from service.core.job_states import ARRAY_TASK, ATTEMPT_SUFFIX, NOT_FAILED, Restarts, work_of
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
    gpus: Decimal = Decimal(0)  # the most its jobs held at once (peak_gpus)
    gpu_hours: Decimal = Decimal(0)
    # (cluster, job id) → its GPU-microseconds up to the bill's end (`gpu_hours_of`: divided once for a
    # run's priced hours); a scheduler's job ids are its cluster's own
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


def job_records(lake: Lake, con: duckdb.DuckDBPyConnection, config: AttributionConfig, window: Window,
                billed_until: datetime | None = None, run: str | None = None, as_of: bool = False) -> dict[str, JobSide]:
    """run (lower case) → its job records' figures in `window`: the newest snapshot of each
    record that held GPUs and overlaps the window, as allocation reads them, with the values
    its jobs state (service/attribution/job_values.py). `billed_until`: the bill's end, where
    `held` stops (hours after it have no cost yet, so no price). `run`: that run's (any case),
    and perhaps others whose id is not ASCII (sql.held_records_cte). `as_of`: each job as it
    stood at the window's end (`runs --until`): one that ended after it is RUNNING, without end
    (AS_OF_END). Summed per run in SQL (`_summed_records`), else record by record here."""
    if not lake.has_table(JOBS_TABLE):
        return {}
    since, until = _naive(window.since), _naive(window.until)
    priced_until = min(until, _naive(billed_until)) if billed_until else until
    running = running_until(until)
    params = Params()
    records = held_records_cte(params, since, until, run, failed_before=True, not_ascii=True)
    values, last = job_values_ctes(config, "j_records", label_keys(con), VALUES, params)
    summed = _summed_records(con, f"WITH {records}, {values}", last, Params(dict(params.values)), since, until,
                             priced_until, running, as_of)
    if summed is not None:
        return summed
    result = con.execute(
        f"WITH {records}, {values} SELECT run_id, state, start_time, end_time, gpus, job_id, name, scheduler, "
        f"{', '.join(dim_col(d) for d in VALUES)} FROM {last} ORDER BY start_time, end_time NULLS LAST, record_id",
        params.values)
    runs: dict[str, JobSide] = {}
    micros: dict[str, Decimal] = defaultdict(Decimal)  # per run, GPU-microseconds: divided once, as in SQL
    priced: dict[str, dict[tuple[str, str], Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    restarted: dict[str, Restarts] = defaultdict(Restarts)  # per run, its jobs so far, to tell the next a restart
    spans: dict[str, list[tuple[datetime, datetime | None, Decimal]]] = defaultdict(list)  # per run, for peak_gpus
    # in batches: a month's 200k records read at once held ~200 MB of rows beside what they add up to
    rows = (row for batch in iter(lambda: result.fetchmany(BATCH), []) for row in batch)
    for run_id, state, start, end, gpus, job_id, name, scheduler, *stated in rows:
        if as_of and end is not None and end > until:  # still running at the window's end
            state, end = AS_OF_END, None
        restart = restarted[folded(run_id)].told(start, end, state, work_of(job_id, name, scheduler))
        if end is not None and end <= since:  # a failure before the window: its restarts count in it
            continue
        side = runs.setdefault(folded(run_id), JobSide(run_id.strip()))
        gpus = job_gpus(gpus)
        side.restarts += restart
        side.jobs += 1
        spans[folded(run_id)].append((start, end, gpus))
        micros[folded(run_id)] += gpus * micros_between(max(start, since), min(end or running, until))
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
        priced[folded(run_id)][held_key(cluster, job_id), gpus] += micros_between(max(start, since),
                                                                                  min(end or until, priced_until))
        side.values = stated if side.values is None else {d: v if v == stated[d] else SEVERAL
                                                          for d, v in side.values.items()}
    for run, side in runs.items():
        side.gpus = peak_gpus(spans[run])
        side.gpu_hours = gpu_hours_of(micros[run])
        for (key, gpus), held in priced[run].items():
            side.held[key] = side.held.get(key, 0) + gpus * held
    return runs


AS_OF_END = "RUNNING"  # the state of a job that ended after the window's end, as of that end
TOLD = "start_time, end_time NULLS LAST, record_id"  # the order Restarts is told a run's jobs in
PRINTABLE = "[ -~]*"  # ASCII: where DuckDB's trim, lower and regexes read a text as Python's do


def _summed_records(con: duckdb.DuckDBPyConnection, ctes: str, last: str, params: Params, since: datetime,
                    until: datetime, priced_until: datetime, running: datetime,
                    as_of: bool = False) -> dict[str, JobSide] | None:
    """`job_records`' answer summed per run in SQL (a month's 200k records never come into
    Python one by one): restarts by Restarts' rules, over windows in the order it is told a run's
    jobs; the last state by its tie rules; GPU-microseconds per GPU count (a DOUBLE is made a
    decimal in Python, `job_gpus`). None (the caller loops in Python) where a run id, job id,
    name or cluster is not printable ASCII: there `folded` and `work_of` are not SQL's lower and trim.
    `as_of`: a job's state and end as they stood at `until` (`job_records`)."""
    not_failed = ", ".join(f"'{state}'" for state in NOT_FAILED if state)
    name = "lower(trim(name))"
    work = (f"CASE WHEN nullif(trim(name), '') IS NULL OR scheduler = 'kubernetes' THEN NULL ELSE coalesce(nullif("
            f"regexp_replace({name}, {params.bind(ATTEMPT_SUFFIX.pattern)}, ''), ''), {name}) || chr(0) || "
            f"regexp_extract(job_id, {params.bind(ARRAY_TASK.pattern)}, 1) END")
    before = f"ORDER BY {TOLD} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING"  # the jobs told before
    failed_before = (f"CASE WHEN r_work IS NULL THEN min(r_failed) OVER (PARTITION BY r_run {before}) ELSE least("
                     f"min(r_failed) OVER (PARTITION BY r_run, r_work {before}), min(CASE WHEN r_work IS NULL "
                     f"THEN r_failed END) OVER (PARTITION BY r_run {before})) END")  # failures_it_may_redo's
    since_, until_ = params.bind(since, "r_since"), params.bind(until, "r_until")
    if as_of:  # a job that ended after the window's end was running as of it
        last = (f"(SELECT * REPLACE (CASE WHEN end_time > {until_} THEN '{AS_OF_END}' ELSE state END AS state, "
                f"CASE WHEN end_time > {until_} THEN NULL ELSE end_time END AS end_time) FROM {last})")
    start = f"epoch_us(greatest(start_time, {since_}))"
    held = f"greatest(epoch_us(least(coalesce(end_time, {params.bind(running, 'r_running')}), {until_})) - {start}, 0)"
    priced_end = params.bind(priced_until, "r_priced")
    priced = f"greatest(epoch_us(least(coalesce(end_time, {until_}), {priced_end})) - {start}, 0)"
    cluster = dim_col("cluster")
    stated = [d for d in VALUES if d != "cluster"]
    several = ", ".join(f"count(DISTINCT {dim_col(d)}) + max(({dim_col(d)} IS NULL)::INT), min({dim_col(d)})"
                        for d in stated)
    rows = con.execute(
        f"{ctes}, r AS (SELECT run_id, job_id, state, start_time, end_time, gpus, record_id, "
        f"{', '.join(dim_col(d) for d in VALUES)}, lower(trim(run_id)) AS r_run, {work} AS r_work, "
        f"CASE WHEN end_time IS NOT NULL AND state IS NOT NULL AND state NOT IN ({not_failed}) THEN end_time END "
        f"AS r_failed, regexp_full_match(concat(run_id, job_id, name, {cluster}), '{PRINTABLE}') AS r_ok "
        f"FROM {last}), "
        f"k AS (SELECT *, coalesce({failed_before} <= start_time, false) AS r_restart, "
        f"bool_and(r_ok) OVER (PARTITION BY r_run) AS r_run_ok FROM r), "
        f"w AS (SELECT *, {held} AS r_held, {priced} AS r_priced FROM k "
        f"WHERE end_time IS NULL OR end_time > {since_}), "
        "g AS (SELECT r_run, list((gpus, r_held)) AS r_gpus FROM (SELECT r_run, gpus, sum(r_held) AS r_held FROM w "
        "GROUP BY ALL) GROUP BY r_run), "
        "p AS (SELECT r_run, list((gpus, r_cluster, job_id, r_priced)) AS r_jobs FROM (SELECT r_run, gpus, job_id, "
        f"lower(trim(coalesce({cluster}, ''))) AS r_cluster, sum(r_priced) AS r_priced FROM w GROUP BY ALL) "
        f"GROUP BY r_run), {PEAK_SQL} "
        "SELECT * FROM (SELECT r_run, bool_and(r_run_ok), arg_min(trim(run_id), (start_time, coalesce(end_time, "
        "'infinity'::TIMESTAMP), record_id)), count(*), count_if(r_restart), arg_max({'s': state}, "
        "(end_time IS NULL, coalesce(end_time, start_time), start_time, record_id)).s, min(start_time), "
        f"max(end_time), bool_or(end_time IS NULL), list(DISTINCT {cluster}), bool_or({cluster} IS NULL), {several} "
        "FROM w GROUP BY r_run) JOIN g USING (r_run) JOIN p USING (r_run) LEFT JOIN pk USING (r_run)",
        params.values).fetchall()
    runs: dict[str, JobSide] = {}
    decimal = functools.cache(job_gpus)  # a few GPU counts, each made a decimal once
    for run, ok, first_id, jobs, restarts, state, first, end, still, clusters, no_cluster, *values in rows:
        if not ok:
            return None
        *values, per_gpus, per_job, at_peak = values
        peak = sum((decimal(g) * n for g, n in at_peak or ()), Decimal(0))
        side = runs[run] = JobSide(first_id, jobs, peak, restarts=restarts, state=state, running=still,
                                   start=first.replace(tzinfo=timezone.utc),
                                   end=end and end.replace(tzinfo=timezone.utc))
        side.gpu_hours = gpu_hours_of(sum((decimal(g) * us for g, us in per_gpus), Decimal(0)))
        for g, key_cluster, job_id, us in per_job:
            side.held[key_cluster, job_id] = side.held.get((key_cluster, job_id), 0) + decimal(g) * us
        side.clusters = {*clusters, *([None] if no_cluster else [])}
        side.values = {d: SEVERAL if values[2 * n] > 1 else values[2 * n + 1] for n, d in enumerate(stated)}
    return runs


# A run's peak GPUs in SQL (peak_gpus' rule), over `w`: its jobs' starts and ends in time order (an end
# before a start at the same instant, a job ending as it starts after), the GPUs held after each instant's
# starts (`h`, a DOUBLE: finds the instant), and the jobs held then (`r_peak`: (GPUs, jobs), summed exactly).
PEAK_SQL = (
    "e AS (SELECT r_run, start_time AS t, 1 AS o, gpus AS d FROM w UNION ALL SELECT r_run, end_time, CASE WHEN "
    "end_time > start_time THEN 0 ELSE 2 END, -gpus FROM w WHERE end_time IS NOT NULL), "
    "pt AS (SELECT r_run, arg_max(t, h) AS r_at FROM (SELECT r_run, t, o, sum(d) OVER (PARTITION BY r_run ORDER BY "
    "t, o) AS h FROM e) AS held WHERE o = 1 GROUP BY r_run), "
    "pk AS (SELECT r_run, list((gpus, n)) AS r_peak FROM (SELECT w.r_run, gpus, count(*) AS n FROM w JOIN pt "
    "ON w.r_run = pt.r_run WHERE start_time <= r_at AND (end_time IS NULL OR end_time > r_at OR (end_time <= "
    "start_time AND start_time = r_at)) GROUP BY ALL) AS at_peak GROUP BY r_run)")


def peak_gpus(jobs: Iterable[tuple[datetime, datetime | None, Decimal]]) -> Decimal:
    """The most GPUs `jobs` (start, end or None while running, GPUs) held at once: a heterogeneous
    job's components or an array's tasks together; a requeued job's attempts one after another
    (one ending as the next starts is not both held). A job ending as it starts counts at its start."""
    jobs = list(jobs)
    events = sorted([(start, 1, gpus) for start, _, gpus in jobs] +
                    [(end, 0 if end > start else 2, -gpus) for start, end, gpus in jobs if end is not None],
                    key=lambda event: event[:2])
    held = peak = Decimal(0)
    for (_, order), together in itertools.groupby(events, key=lambda event: event[:2]):
        held += sum(gpus for *_, gpus in together)
        peak = max(peak, held) if order == 1 else peak
    return peak


def gpu_hours_of(gpu_micros: Decimal) -> Decimal:
    """GPU-microseconds as GPU-hours, divided once (not per record: the same figure however summed)."""
    return gpu_micros / 1_000_000 / HOURS


def job_gpus(value: float) -> Decimal:
    """A job record's GPUs (a DOUBLE: MIG slices and shared GPUs are fractions) as the decimal
    it was written as, whole when it is whole."""
    gpus = Decimal(repr(value))
    return gpus.to_integral_value() if gpus == gpus.to_integral_value() else gpus


def gpu_hours(gpus: Decimal, start: datetime, end: datetime) -> Decimal:
    """GPUs × the hours from `start` to `end` (none when it ends first), to the microsecond."""
    return gpu_hours_of(gpus * micros_between(start, end))


def micros_between(start: datetime, end: datetime) -> int:
    """The whole microseconds from `start` to `end`, exactly (0 when it ends first)."""
    return max((end - start) // timedelta(microseconds=1), 0)


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


def evals_span(lake: Lake, con: duckdb.DuckDBPyConnection, config: AttributionConfig, run: str, since: datetime
               ) -> tuple[datetime | None, bool]:
    """When the eval jobs naming the run (any case) as their parent_run (run_evals: job type `eval`,
    their values as job_values decides them) last held GPUs, in the job records the lake holds running
    after `since` (the run's first start): their last end, and whether one still runs. (None, False):
    none names it, or no `clusters:` counts them."""
    if PARENT not in config.dimensions or not lake.has_table(JOBS_TABLE):
        return None, False
    params = Params()
    values, last = job_values_ctes(config, "j_records", label_keys(con), ("job_type", PARENT), params)
    named = params.bind(folded_forms(run), "parent")
    end, running = con.execute(
        f"WITH {held_records_cte(params, _naive(since))}, {values} SELECT max(end_time), bool_or(end_time IS NULL) FROM {last} "
        f"WHERE lower(trim({dim_col('job_type')})) = {params.bind(EVAL, 'eval')} "
        f"AND list_contains({named}, lower(trim({dim_col(PARENT)})))", params.values).fetchall()[0]
    return end and end.replace(tzinfo=timezone.utc), bool(running)


def placed_parts(lake: Lake, con: duckdb.DuckDBPyConnection, snapshot: Snapshot, config: AttributionConfig,
                 window: Window, cost: str, select: str, bind: dict | None = None,
                 inventory: dict[str, str] | None = None) -> list[tuple]:
    """Rows of `select` over `parts` (`con`: a `Lake.query` connection on `snapshot`; no rollup
    view needed): allocation's job and idle parts of the window's cluster lines, the hours
    starting in `window`, with columns `run` (lower case), `resource`, `hour`, `currency`,
    `category` (the line's ChargeCategory), `kind` (`job` or `idle`) and `amount` (`cost`'s
    measure), per instance-hour. From the periods' stored placed rows when every period has
    them (service/attribution/placed.py), else allocated from the window's lines (in stages:
    only those lines are read in full). `bind` gives `select`'s own parameters (`$name`);
    `inventory`: the snapshots the stored ones must be of (a session's: `stored_placed`)."""
    params = Params()
    since, until = params.bind(_naive(window.since), "since"), params.bind(_naive(window.until), "until")
    for name, value in (bind or {}).items():
        params.bind(value, name)
    within = f"hour >= {since} AND hour < {until}"
    columns = f"run, resource, hour, currency, category, kind, {cost} AS amount"
    stored = stored_placed(lake, config, snapshot, inventory)
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
    """(run folded, currency) → idle share of the instances its jobs' parts are on, over
    their hours that start in `window` (`placed_parts`, with the run dimension alone)."""
    instance_total: dict[tuple, Decimal] = defaultdict(Decimal)
    instance_idle: dict[tuple, Decimal] = defaultdict(Decimal)
    on: dict[tuple[str, str | None], set] = defaultdict(set)
    select = "SELECT run, resource, currency, kind, sum(amount) FROM parts GROUP BY ALL"
    for value, resource, currency, kind, amount in placed_parts(lake, session.con, session.snapshot, config, window, cost,
                                                                      select, inventory=session.inventory):
        instance_total[(resource, currency)] += amount or 0
        if kind == "idle":
            instance_idle[(resource, currency)] += amount or 0
        else:  # keyed as the rows are (Python's folding: SQL's lower() leaves a decomposed id decomposed)
            on[(folded(value), currency)].add(resource)
    shares = {}
    for (value, currency), instances in on.items():
        share = share_of(sum((instance_idle[(i, currency)] for i in instances), Decimal(0)),
                         sum((instance_total[(i, currency)] for i in instances), Decimal(0)), RATIO_QUANTUM)
        if share is not None:
            shares[(value, currency)] = share
    return shares
