"""One run's story, what `spendlake runs --run X` (and `/api/v1/runs?run=X`) adds to its row:
its jobs (each attempt) with their cost, its cost split by job type and by final state, and
the idle of the instances while it held them.

    run_story(lake, session, config, window, cost, run, usage, where) -> RunStory   (.to_json())

- jobs: each job record of the run that held GPUs in the window (the newest snapshot of each
  attempt: a Slurm requeue keeps the job id, a new attempt is a new record), with its cluster,
  nodes and instance ids as the record states them, its GPUs, GPU-hours inside the window and
  its cost: the parts allocation placed on `job:<id>` with its job type and state. Each part
  carries its attempt's record (service/attribution/job_how.py), so each attempt's cost is its
  own parts' to the cent, attempts of one job id that ended in the same state (a job requeued
  twice) too; only parts naming no record of the run's (none is known) are shared by the
  attempts of their job id, type and state in proportion to their GPU-hours in the window
  (`shared`). Parts without a record (EKS pods) are jobs of their own without times.
- by_job_type, by_state: the jobs' cost summed; each sums exactly to the run's cost per currency,
  as `attribute --where run=X --by job_type` (or `job_state`) gives it. `unfinished` marks the
  states that bought no finished work (failed, cancelled, timed out, requeued...): the failed
  re-runs.
- instances: each billed instance its jobs' parts are on: the run's cost there, and over the
  instance-hours in which the run held part of it (hours starting in the window), the instance's
  cost and its idle part. The idle is shown beside the run's cost, never inside it: those dollars
  are the cluster's `idle`, not the run's (the row's `idle_share` is of the same instances over
  the whole window, held or not).
- notes: why the story is short (service/attribution/run_notes.py): a run with no job in the
  window (when its jobs ran), jobs that reached no billed instance. A run no record or part names is a UsageError with the closest run ids.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal

import duckdb

from rules.context import Owner
from service.attribution.clusters import ClusterUsage, JobCost
from service.attribution.compute import RollupSession
from service.attribution.job_values import job_values_ctes
from service.attribution.jobs import JOBS_TABLE, label_keys
from service.attribution.run_evals import EvalCost
from service.attribution.run_figures import UNFINISHED, StoryFigures, story_figures
from service.attribution.run_inputs import gpu_hours, job_gpus, placed_parts, running_until
from service.attribution.run_notes import story_notes
from service.attribution.sql import dim_col, held_records_cte
from service.attribution.statement import Params
from service.core.config_attribution import AttributionConfig
from service.core.config_clusters import IDLE
from service.core.errors import UsageError
from service.core.folding import folded, folded_forms
from service.core.job_states import Restarts, work_of
from service.core.lake import Lake
from service.core.suggest import suggestion
from service.core.timewindow import Window, iso_utc
from service.core.units import share_of

RECORD_VALUES = ("job_type", "job_state", "cluster")
GPU_HOURS_QUANTUM = Decimal("1e-6")
RATIO_QUANTUM = Decimal("1e-4")
KNOWN_SHOWN = 5  # run ids an unknown run's error lists when none is close


@dataclass(frozen=True)
class RunJob:
    job: str  # the job id as the scheduler shows it (EKS pods: <namespace>/<pod>)
    record: str | None  # the attempt's record id (None: a part without a job record)
    cluster: str | None
    job_type: str | None
    state: str | None
    start: datetime | None
    end: datetime | None  # None while it runs
    gpus: Decimal | None
    gpu_hours: Decimal | None  # inside the window
    nodes: tuple[str, ...]
    instance_ids: tuple[str, ...]
    cost: Decimal
    currency: str | None
    shared: bool = False  # its job id's cost in this state, shared with other attempts by GPU-hours
    # (only where its parts name no record of the run's: module docstring)
    work: tuple | None = None  # what it does (core.job_states.work_of): a re-run of a failed attempt does the same
    restart: bool = False  # it re-ran failed work: one of the run row's `restarts`
    relaunched: bool = False  # it failed (the failed-reruns rule's states) and was run again (run_figures.py)
    owner: Owner | None = None  # the team, project and experiment its cost carries (None: it reached no billed instance)

    def to_json(self) -> dict:
        return {"job": self.job, "record": self.record, "cluster": self.cluster, "job_type": self.job_type,
                "state": self.state, "start": _iso(self.start), "end": _iso(self.end), "gpus": _text(self.gpus),
                "gpu_hours": _text(self.gpu_hours), "nodes": list(self.nodes), "instance_ids": list(self.instance_ids),
                "cost": _text(self.cost), "currency": self.currency, "shared": self.shared, "restart": self.restart,
                "relaunched": self.relaunched}


@dataclass(frozen=True)
class RunInstance:
    instance: str
    currency: str | None
    cost: Decimal  # the run's parts on it
    held: Decimal  # the instance's cost in the hours the run held part of it
    idle: Decimal  # of `held`, the idle part
    window_cost: Decimal  # the instance's cost in the window, held by the run or not
    window_idle: Decimal  # of `window_cost`, the idle part (the row's idle share)

    def to_json(self) -> dict:
        return {"instance": self.instance, "currency": self.currency, "cost": _text(self.cost),
                "held_cost": _text(self.held), "idle": _text(self.idle), "window_cost": _text(self.window_cost),
                "window_idle": _text(self.window_idle)}


@dataclass(frozen=True)
class RunStory:
    run: str  # as asked
    jobs: tuple[RunJob, ...]
    instances: tuple[RunInstance, ...]
    notes: tuple[str, ...] = ()
    figures: StoryFigures = StoryFigures()  # what its unfinished attempts and failed re-runs cost
    evals: tuple[EvalCost, ...] = ()  # the eval runs whose jobs name it (parent_run), beside its cost

    def split(self, field: str) -> list[tuple[str | None, str | None, Decimal, int]]:
        """(value of `field`, currency, cost, jobs) per value and currency, costliest first."""
        sums: dict[tuple, list] = defaultdict(lambda: [Decimal(0), 0])
        for job in self.jobs:
            held = sums[(getattr(job, field), job.currency)]
            held[0] += job.cost
            held[1] += 1
        return sorted(((v, c, cost, n) for (v, c), (cost, n) in sums.items()),
                      key=lambda s: (s[1] or "~", -s[2], s[0] or ""))

    def idle(self) -> list[tuple[str | None, Decimal, Decimal]]:
        """(currency, idle, held) over its instances: the idle beside the run's cost."""
        sums: dict[str | None, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
        for instance in self.instances:
            sums[instance.currency][0] += instance.idle
            sums[instance.currency][1] += instance.held
        return [(c, idle, held) for c, (idle, held) in sorted(sums.items(), key=lambda s: s[0] or "~")]

    def idle_shares(self) -> dict[tuple[str, str | None], Decimal]:
        """(run lower case, currency) → the idle share of its instances over the window, as
        run_inputs.idle_shares gives every run's (the row's `idle_share`), from the same parts."""
        sums: dict[str | None, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
        for instance in self.instances:
            sums[instance.currency][0] += instance.window_idle
            sums[instance.currency][1] += instance.window_cost
        shares = {(folded(self.run), c): share_of(idle, total, RATIO_QUANTUM) for c, (idle, total) in sums.items()}
        return {key: share for key, share in shares.items() if share is not None}

    def to_json(self) -> dict:
        return {
            "jobs": [job.to_json() for job in self.jobs],
            "by_job_type": [{"job_type": v, "currency": c, "cost": _text(cost), "jobs": n}
                            for v, c, cost, n in self.split("job_type")],
            "by_state": [{"state": v, "currency": c, "cost": _text(cost), "jobs": n,
                          "unfinished": (v or "").upper() in UNFINISHED} for v, c, cost, n in self.split("state")],
            "idle": [{"currency": c, "cost": _text(idle), "held_cost": _text(held),
                      "share": _text(share_of(idle, held, RATIO_QUANTUM))}
                     for c, idle, held in self.idle()],
            "instances": [i.to_json() for i in self.instances],
            "evals": [cost.to_json() for cost in self.evals],
            "notes": list(self.notes), **self.figures.to_json()}


def _text(value: Decimal | None) -> str | None:
    return None if value is None else format(value, "f")


def _iso(moment: datetime | None) -> str | None:
    return iso_utc(moment) if moment else None


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(timezone.utc).replace(tzinfo=None)


def _utc(moment: datetime | None) -> datetime | None:
    return moment.replace(tzinfo=timezone.utc) if moment else None


@dataclass
class _Record:
    record: str
    job: str
    run: str  # folded
    key: tuple[str, str, str, str]  # folded cluster, job id, state, job type: how parts name it
    values: dict[str, str | None]
    start: datetime
    end: datetime | None
    gpus: Decimal
    gpu_hours: Decimal
    nodes: tuple[str, ...]
    instance_ids: tuple[str, ...]
    work: tuple | None  # core.job_states.work_of
    restart: bool  # core.job_states.Restarts: it re-ran failed work of its run
    spelled: str = ""  # SQL's lower(trim(run_id)): how its parts name the run (half composed: Python folds it)


def run_records(lake: Lake, con: duckdb.DuckDBPyConnection, config: AttributionConfig, window: Window,
                run: str | None) -> list[_Record]:
    """The job records of `run` (None: of every run) that held GPUs in `window` (the newest
    snapshot of each attempt), with the job type, state and cluster its parts take
    (service/attribution/job_values.py)."""
    if not lake.has_table(JOBS_TABLE):
        return []
    since, until = _naive(window.since), _naive(window.until)
    params = Params()
    records = held_records_cte(params, since, until, run, failed_before=True, not_ascii=run is not None)
    values, last = job_values_ctes(config, "j_records", label_keys(con), RECORD_VALUES, params)
    rows = con.execute(
        f"WITH {records}, {values} SELECT record_id, job_id, run_id, lower(trim(run_id)), start_time, end_time, gpus, "
        f"nodes, instance_ids, name, scheduler, state, {', '.join(dim_col(d) for d in RECORD_VALUES)} FROM {last} "
        "ORDER BY start_time, end_time NULLS LAST, record_id", params.values).fetchall()
    out, running = [], running_until(until)
    restarted: dict[str, Restarts] = defaultdict(Restarts)  # per run, its jobs in start order as the row counts
    for record, job, run_id, spelled, start, end, gpus, nodes, instance_ids, name, scheduler, state, *stated in rows:
        if run is not None and folded(run_id) != folded(run):  # another run whose id is not ASCII (not_ascii)
            continue
        work = work_of(job, name, scheduler)
        restart = restarted[folded(run_id)].told(start, end, state, work)
        if end is not None and end <= since:  # a failure before the window: its restarts count in it
            continue
        gpus = job_gpus(gpus)
        stated = dict(zip(RECORD_VALUES, stated))
        key = (folded(stated["cluster"] or ""), job, *(folded(stated[d] or "") for d in ("job_state", "job_type")))
        out.append(_Record(record, job, folded(run_id), key, stated, start, end, gpus,
                           gpu_hours(gpus, max(start, since), min(end or running, until)).quantize(GPU_HOURS_QUANTUM),
                           tuple(nodes or ()), tuple(instance_ids or ()), work, restart, spelled))
    return out


def _shares(total: Decimal, weights: list[Decimal]) -> list[Decimal]:
    """`total` in parts proportional to `weights` (equal when they are all 0), at `total`'s
    decimals; the last takes the remainder, so the parts add up to `total` exactly."""
    if sum(weights) == 0:
        weights = [Decimal(1)] * len(weights)
    quantum = Decimal(1).scaleb(min(total.as_tuple().exponent, 0))
    whole = sum(weights)
    parts = [(total * w / whole).quantize(quantum) for w in weights[:-1]]
    return [*parts, total - sum(parts, Decimal(0))]


def run_jobs(records: list[_Record], parts: list[JobCost]) -> list[RunJob]:
    """Each attempt of one run with its cost: `parts` (the run's in ClusterUsage.jobs) of its
    job id, type and state (module docstring)."""
    by_key: dict[tuple, list[_Record]] = defaultdict(list)
    by_job: dict[tuple, list[_Record]] = defaultdict(list)
    for record in records:
        by_key[record.key].append(record)
        by_job[record.key[:2]].append(record)
    by_record = {record.record: record for record in records}
    costed: set[str] = set()
    jobs: list[RunJob] = []
    for part in parts:
        if (part.records and all(record in by_record for record, _ in part.records)
                and sum(cost for _, cost in part.records) == part.cost):  # each attempt's own parts, all of them
            for record, cost in part.records:
                costed.add(record)
                jobs.append(_job(by_record[record], cost, part.currency, False, part.cluster,
                                 part.values["job_type"], part.values["job_state"], _owner(part)))
            continue
        key = (folded(part.cluster), part.job, folded(part.values["job_state"]), folded(part.values["job_type"]))
        attempts = by_key.get(key) or by_job.get(key[:2], [])
        if not attempts:  # an EKS pod: no job record
            jobs.append(RunJob(part.job, None, part.cluster, part.values["job_type"], part.values["job_state"], None,
                               None, None, None, (), (), part.cost, part.currency, owner=_owner(part)))
            continue
        for record, cost in zip(attempts, _shares(part.cost, [r.gpu_hours for r in attempts])):
            costed.add(record.record)
            jobs.append(_job(record, cost, part.currency, len(attempts) > 1, part.cluster,
                             part.values["job_type"], part.values["job_state"], _owner(part)))
    for record in records:
        if record.record not in costed:  # it reached no billed instance (or ran past the bill's end)
            jobs.append(_job(record, Decimal(0), None, False, record.values["cluster"], record.values["job_type"],
                             record.values["job_state"]))
    return sorted(jobs, key=lambda j: (j.start is None, j.start or datetime.min.replace(tzinfo=timezone.utc),
                                       j.record or "", j.job, j.currency or ""))


def _owner(part: JobCost) -> Owner:
    """What a job part's cost carries: a run's parts may carry several projects (run_costs._owner)."""
    return Owner(part.values["team"], part.values["project"], part.values["experiment"])


def _job(record: _Record, cost: Decimal, currency: str | None, shared: bool, cluster: str | None,
         job_type: str | None, state: str | None, owner: Owner | None = None) -> RunJob:
    return RunJob(record.job, record.record, cluster, job_type, state, _utc(record.start), _utc(record.end),
                  record.gpus, record.gpu_hours, record.nodes, record.instance_ids, cost, currency, shared,
                  record.work, record.restart, owner=owner)


def _instances(lake: Lake, session: RollupSession, config: AttributionConfig, window: Window, cost: str,
               spellings: list[str]) -> tuple[RunInstance, ...]:
    """Per instance the run's parts are on (`spellings`: the run id's forms as SQL lowers them):
    its parts, the instance's cost and idle in the hours it held part of it, and in the whole
    window (hours starting in the window)."""
    def same(alias: str) -> str:
        return f"{alias}.resource = p.resource AND {alias}.currency IS NOT DISTINCT FROM p.currency"

    ours = "kind = 'job' AND list_contains($run, run)"  # the run's id as its lines wrote it, composed or not
    select = ("SELECT p.resource, p.currency, sum(p.amount) FILTER (WHERE p.kind = 'job' AND list_contains($run, p.run)), "
              "sum(p.amount) FILTER (WHERE h.hour IS NOT NULL), "
              "sum(p.amount) FILTER (WHERE h.hour IS NOT NULL AND p.kind = 'idle'), "
              "sum(p.amount), sum(p.amount) FILTER (WHERE p.kind = 'idle') FROM parts AS p "
              f"SEMI JOIN (SELECT DISTINCT resource, currency FROM parts WHERE {ours}) AS o ON {same('o')} "
              f"LEFT JOIN (SELECT DISTINCT resource, hour, currency FROM parts WHERE {ours}) AS h "
              f"ON {same('h')} AND h.hour = p.hour GROUP BY ALL")
    rows = placed_parts(lake, session.con, session.snapshot, config, window, cost, select, {"run": spellings},
                        session.inventory)
    return tuple(sorted((RunInstance(resource, currency, *(amount or Decimal(0) for amount in amounts))
                         for resource, currency, *amounts in rows),
                        key=lambda i: (i.currency or "~", -i.cost, i.instance)))


def run_story(lake: Lake, session: RollupSession | None, con: duckdb.DuckDBPyConnection, config: AttributionConfig,
              window: Window, cost: str, run: str, usage: ClusterUsage, where: str, rules: Mapping) -> RunStory:
    """The story of `run` in `window` (module docstring); `session` None: a lake without a bill; `where`
    names the run in the UsageError of a run nothing names (`--run`, or the API's `run`); `rules`: the
    config's `rules:`, the failed-reruns rule's settings its figures read (run_figures.py)."""
    records = run_records(lake, con, config, window, run)
    jobs = run_jobs(records, [j for j in usage.jobs if folded(j.values["run"]) == folded(run)])
    if not jobs:
        _check_named(lake, session, con, config, run, where)
    spellings = sorted({*folded_forms(run), *(r.spelled for r in records)})
    instances = _instances(lake, session, config, window, cost, spellings) if session is not None and jobs else ()
    jobs, figures = story_figures(jobs, rules)
    return RunStory(run.strip(), tuple(jobs), instances,
                    _reserved(config, run) + story_notes(lake, session, con, run, window, jobs), figures)


def _reserved(config: AttributionConfig, run: str) -> tuple[str, ...]:
    """A run id that attribute's run dimension also gives other cost: the story counts the run's
    jobs alone, `attribute --where run=X` those and that cost."""
    run = run.strip()
    if folded(run) == IDLE:
        return (f"run id {run!r} is also what attribute's run dimension calls the clusters' idle: `attribute --where "
                f"run={run}` adds that idle to this run's cost",)
    if folded(run) == folded(config.dimensions["run"].default):
        return (f"run id {run!r} is also the run dimension's default: `attribute --where run={run}` adds the cost no "
                "run claims to this run's cost",)
    return ()


def _check_named(lake: Lake, session: RollupSession | None, con: duckdb.DuckDBPyConnection,
                 config: AttributionConfig, run: str, where: str) -> None:
    """A run asked for by name is an object, as a plan is (`plans remove NAME`): one no job record or
    cost names is a UsageError (exit 2, HTTP 400) with the closest run ids, where `attribute --where
    run=x` filters and warns; a reserved id (`idle`) says where attribute counts its cost."""
    named, known = _known_runs(lake, session, con)
    if folded(run) in {folded(k) for k in known}:
        return
    reserved = {IDLE: "the clusters' idle", folded(config.dimensions["run"].default): "the cost no run claims"}
    also = [f"`attribute --where run={run.strip()}` gives {reserved[folded(run)]}"] if folded(run) in reserved else []
    raise UsageError(f"no run {run.strip()!r} in the lake's job records or cost", where=where,
                     hint="; ".join([suggestion(run, known, "run ids", first=named, shown=KNOWN_SHOWN), *also]))


def _known_runs(lake: Lake, session: RollupSession | None,
                con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[str]]:
    """(named runs, every run id) of job records and job parts: not `idle` nor the run dimension's
    default, which name no run. Named: a record's run id that is not its job id (newest first), a
    part's run no record names (an EKS pod's run tag); a job's own id says little about the run."""
    parted = [] if session is None else [v for (d, _), v in session.spellings(["run"]).items() if d == "run"
                                         and folded(v) not in (IDLE, folded(session.config.dimensions["run"].default))]
    named, recorded = [], []
    if lake.has_table(JOBS_TABLE):
        rows = con.execute("SELECT trim(run_id) AS run, bool_or(run <> trim(job_id)) FROM jobs WHERE run_id IS NOT "
                           "NULL GROUP BY run ORDER BY max(start_time) DESC NULLS LAST, run").fetchall()
        recorded = [run for run, _ in rows]
        named = [run for run, own in rows if own]
    seen = {folded(run) for run in recorded}
    return named + [run for run in parted if folded(run) not in seen], parted + recorded

