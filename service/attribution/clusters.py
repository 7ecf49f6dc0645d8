"""Shared GPU clusters in a window: what each job, run and cluster's idle capacity cost, from
the same attribution as `attribute()` (service/attribution/allocation.py places the dollars).

    cluster_usage(lake, config, window, cost="billed") -> ClusterUsage
        .jobs      one JobCost per (cluster, job id, currency) and the job's dimension values, with
                   its cost per job record (each attempt of a requeued job is a record of its own)
        .runs()    cost per (run, currency), with the jobs' values where they agree
        .clusters  one ClusterCost per (cluster, currency): its instances' cost, the idle part
        .overbooked  instance-hours whose jobs held more GPU-seconds than the instance had

A dollar counts for a cluster when allocation placed it (`job:<id>` or `idle:<cluster>`):
jobs' parts and idle parts of the cluster's instances; EKS pods count as jobs, their id
`<namespace>/<pod>`. Values are shown as `attribute()` shows them (most common spelling).

    placed_totals(session, config, window, cost) -> PlacedTotals
        the same per run and per cluster without the per-job rows (the metric tops)
    cluster_totals(lake, config, window, cost) -> tuple[ClusterCost, ...]
        its clusters on a session of their own (the report's note on effective cost)
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from decimal import Decimal

from service.attribution.sessions import engine_of, read_sessions
from service.attribution.compute import ROLLUP_VIEW, RollupSession, attributed_sums
from service.attribution.job_how import job_how
from service.attribution.needs import Needs
from service.attribution.run_evals import DIMS as EVAL_DIMS
from service.attribution.run_evals import EvalCost, EvalCosts
from service.attribution.sql import how_col
from service.attribution.window_sql import INSIDE, OVERLAPS
from service.core.config import Config, attribution_of
from service.core.config_attribution import AttributionConfig
from service.core.errors import UsageError
from service.core.folding import folded
from service.core.lake import Lake
from service.core.timewindow import Window
from service.core.units import naive_utc

JOB_VALUES = ("team", "project", "experiment", "run", "job_type", "job_state", "user", "parent_run")


@dataclass(frozen=True)
class JobCost:
    cluster: str
    job: str  # the job id as the scheduler shows it (EKS pods: <namespace>/<pod>)
    values: dict[str, str]  # team, project, experiment, run, job_type, job_state, user, parent_run
    currency: str | None
    cost: Decimal
    # (record, its part of `cost`) of each attempt the parts name, by record; () where none does (a pod)
    records: tuple[tuple[str, Decimal], ...] = ()


@dataclass(frozen=True)
class ClusterCost:
    cluster: str
    currency: str | None
    cost: Decimal  # what its instances cost in the window: jobs' parts and idle
    idle: Decimal


@dataclass(frozen=True)
class ClusterUsage:
    window: Window
    cost: str
    jobs: tuple[JobCost, ...]
    clusters: tuple[ClusterCost, ...]
    overbooked: int = 0
    # (source, billing period) of the lines its jobs' and idle parts come from: the bills its figures read
    partitions: frozenset[tuple[str, str]] = frozenset()
    evals: tuple[EvalCost, ...] = ()  # what eval jobs naming a run cost (run_evals.py), every run's

    def runs(self) -> dict[tuple[str, str | None], tuple[Decimal, dict[str, str]]]:
        """(run, currency) → (cost, the values its jobs share; `several` where they differ)."""
        runs: dict[tuple[str, str | None], tuple[Decimal, dict[str, str]]] = {}
        for job in self.jobs:
            key = (job.values["run"], job.currency)
            cost, values = runs.get(key, (Decimal(0), dict(job.values)))
            runs[key] = (cost + job.cost, {d: v if v == job.values[d] else "several" for d, v in values.items()})
        return runs


@dataclass(frozen=True)
class PlacedTotals:
    runs: dict[tuple[str, str | None], Decimal]  # (run, currency) → its jobs' cost, as ClusterUsage.runs()
    clusters: tuple[ClusterCost, ...]
    evals: tuple[EvalCost, ...] = ()  # with `evals` (run_evals.py)


def with_clusters(config: AttributionConfig | Config) -> AttributionConfig:
    """The attribution config; a UsageError naming `attribution.clusters` when it has none."""
    config = attribution_of(config)
    if config.clusters is None:
        raise UsageError("no shared clusters are configured", where="attribution.clusters",
                         hint="add `clusters:` under `attribution:` (README: Shared GPU clusters)")
    return config


def cluster_usage(lake: Lake, config: AttributionConfig | Config, window: Window, *,
                  cost: str = "billed") -> ClusterUsage:
    """Per job, run and cluster of shared GPU clusters in `window` (module docstring)."""
    engine = engine_of(config)
    config = with_clusters(config)
    return read_sessions(lake, config, engine, lambda session: usage_in(session, config, window, cost),
                         Needs(usage_dims(config), (cost,)))


def cluster_totals(lake: Lake, config: AttributionConfig | Config, window: Window, *, cost: str = "billed",
                   partitions: Collection[tuple[str, str]] | None = None) -> tuple[ClusterCost, ...]:
    """`cluster_usage`'s clusters alone, summed in SQL (`placed_totals`): what the clusters' instances
    cost in `window`, without a row per job; of the lines of these (source, billing period) bills
    alone where `partitions` names them."""
    engine = engine_of(config)
    config = with_clusters(config)
    return read_sessions(lake, config, engine, lambda session: () if session is None else placed_totals(
        session, config, window, cost, partitions).clusters, Needs(usage_dims(config), (cost,)))


def usage_dims(config: AttributionConfig) -> tuple[str, ...]:
    """The dimensions `usage_in` reads."""
    return tuple(dict.fromkeys([*JOB_VALUES, "cluster", *(r.by for r in config.shared)]))


def _placed(session: RollupSession, config: AttributionConfig, dims: tuple[str, ...], window: Window, cost: str,
            by_job: bool, whole_runs: Sequence[str] = ()):
    """(kind `job` or `idle`, job id (None unless `by_job`), currency, values of `dims`, amount,
    (source, billing period) of its line, the job record it carries or None) of each part
    allocation placed in `window`; without
    `by_job` the window's rows are grouped by placement kind, not by job (a month of 200k jobs'
    parts is then a few hundred rows), but the rows of `whole_runs` (window_sql.window_sql) by
    job, with their job id."""
    at = dims.index("run")
    for (_, currency, partition, values, hows), amount in attributed_sums(
            session.con, config, dims, cost, "total", window, True, per_partition=True, placement=not by_job,
            whole_runs=whole_runs).items():
        shown, record = job_how(hows[at] or "")  # a job's part: its job, and its record apart
        kind, colon, name = shown.partition(":")
        if kind in ("job", "idle"):
            yield kind, name if by_job or colon else None, currency, values, amount, partition, record


def grouped_exactly(session: RollupSession, window: Window) -> bool:
    """Whether the job and idle parts in `window` add up alike grouped by job or by placement
    alone: no row of them is a shared rule's (split by the window's spend in Python, row by row)
    nor cut by the window (prorated row by row, each rounded)."""
    kind = f"split_part({how_col('run')}, ':', 1)"
    [(odd,)] = session.con.execute(
        f"SELECT count(*) FROM {ROLLUP_VIEW} WHERE {OVERLAPS} AND {kind} IN ('job', 'idle') "
        f"AND (shared IS NOT NULL OR NOT {INSIDE})",
        {"since": naive_utc(window.since), "until": naive_utc(window.until)}).fetchall()
    return not odd


def _cluster_rows(clusters: dict[tuple, list[Decimal]], spell: dict[tuple[str, str], str]) -> tuple[ClusterCost, ...]:
    return tuple(sorted(
        (ClusterCost(spell.get(("cluster", c), c), currency, total, idle)
         for (c, currency), (total, idle) in clusters.items()),
        key=lambda c: (c.currency or "", -c.cost, c.cluster)))


def placed_totals(session: RollupSession, config: AttributionConfig, window: Window, cost: str,
                  partitions: Collection[tuple[str, str]] | None = None, evals: bool = False) -> PlacedTotals:
    """`usage_in`'s runs() and clusters, summed by run and cluster in SQL (module docstring); of
    the lines of the (source, billing period) `partitions` alone where given; `evals`: with
    what eval jobs naming each run cost (run_evals.py)."""
    dims = tuple(dict.fromkeys(["run", "cluster", *(EVAL_DIMS if evals else ()), *(r.by for r in config.shared)]))
    runs: dict[tuple[str, str | None], Decimal] = defaultdict(Decimal)
    clusters: dict[tuple, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    spell = session.spellings(["run", "cluster", *(EVAL_DIMS if evals else ())])
    costs = EvalCosts(config, spell)
    for kind, _, currency, values, amount, partition, _ in _placed(session, config, dims, window, cost, by_job=False):
        if partitions is not None and partition not in partitions:
            continue
        if evals:
            costs.add(kind, values, dims, currency, amount)
        run, cluster = values[0], values[1]
        clusters[(cluster, currency)][0] += amount
        if kind == "idle":
            clusters[(cluster, currency)][1] += amount
        else:
            runs[(spell.get(("run", run), run), currency)] += amount
    return PlacedTotals(dict(runs), _cluster_rows(clusters, spell), costs.costs())


def usage_in(session: RollupSession | None, config: AttributionConfig, window: Window, cost: str,
             run: str | None = None) -> ClusterUsage:
    """`cluster_usage` on an open session (None: an empty lake); `run`: the jobs of that run
    alone (any case), the clusters' figures all the same: the other runs' parts are then summed
    in SQL, not read job by job, where that adds up alike (`grouped_exactly`)."""
    if session is None:
        return ClusterUsage(window, cost, (), ())
    dims = usage_dims(config)
    at = {d: i for i, d in enumerate(dims)}
    spell = session.spellings([*JOB_VALUES, "cluster"])
    ours = functools.cache(lambda value: run is None or folded(spell.get(("run", value), value)) == folded(run))
    by_job = run is None or not grouped_exactly(session, window)
    jobs: dict[tuple, Decimal] = defaultdict(Decimal)
    records: dict[tuple, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))  # job → record → cost
    clusters: dict[tuple, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    partitions = set()
    evals = EvalCosts(config, spell)
    for kind, name, currency, values, amount, partition, record in _placed(
            session, config, dims, window, cost, by_job, () if by_job else [folded(run)]):
        partitions.add(partition)
        evals.add(kind, values, dims, currency, amount)
        cluster = values[at["cluster"]]
        clusters[(cluster, currency)][0] += amount
        if kind == "idle":
            clusters[(cluster, currency)][1] += amount
        elif ours(values[at["run"]]):  # of another run: none but a name that is not ASCII has its job id
            key = (cluster, name, tuple(values[at[d]] for d in JOB_VALUES), currency)
            jobs[key] += amount
            if record is not None:
                records[key][record] += amount
    job_rows = tuple(sorted(
        (JobCost(spell.get(("cluster", c), c), job, {d: spell.get((d, v), v) for d, v in zip(JOB_VALUES, values)},
                 currency, amount, tuple(sorted(records.get((c, job, values, currency), {}).items())))
         for (c, job, values, currency), amount in jobs.items()),
        key=lambda j: (j.currency or "", -j.cost, j.cluster, j.job)))
    return ClusterUsage(window, cost, job_rows, _cluster_rows(clusters, spell), session.overbooked(window),
                        frozenset(partitions), evals.costs())
