"""Runs on shared GPU clusters: one row per run, what `spendlake runs` and `/api/v1/runs` show.

    RunsQuery.parse(since=..., until=..., by=..., state=..., top=..., cost=...) -> RunsQuery
    runs(lake, config, query) -> RunsResult   (.rows: RunRow, .totals: RunTotal, .to_json())

A run is the `run` dimension of allocation (service/attribution/allocation.py): a job record's
`run_id` (its job id unless a label or column says), an EKS pod's run tag or workload. Per run and currency:
- cost, team, project, experiment, job_type, cluster, user: from the same attribution as
  `attribute --by run` (cluster_usage: the jobs' parts, summed in one statement where that is exact:
  run_sums.py; values shared by its jobs, `several` where they differ, but cluster: every cluster
  its jobs' parts and records are in, sorted, joined by `,`: a run moved from one cluster to another shows both,
  `--by cluster` groups it under that joined value, and `attribute --by run,cluster` splits its cost per cluster);
- jobs, restarts, GPUs, GPU-hours, state, start, end: from its job records (the newest snapshot of each) that held
  GPUs in the window: jobs = records, restarts = its jobs that started after one of its jobs doing the same work had
  ended in a state other than COMPLETED (a requeue, a resubmission after a failure, timeout or preemption; not after
  an end of no or UNKNOWN state; not after another benchmark of an eval suite or another task of a sweep failed: same
  work is the same job name and array task, where the record tells, core.job_states.work_of), GPUs = the most any
  held, GPU-hours = Σ GPUs × hours inside the window (a running job up to the window's end), state = its last job's
  (the one that ended last; a running one is last), start = the first start of those jobs (a job's own start, before
  the window if it began earlier; a run's jobs that ended before the window are not among them), end = their last end
  (None while one runs; with `until`, as of it: a job ended after it is RUNNING, as_of); EKS pods have no job record:
  jobs = its pods, the rest unknown;
- idle_share: of the instances its jobs ran on, the share of their cost in the window that was
  idle (hours starting in the window; pool jobs ran on their cluster's instances), None when
  credits make it no share (outside 0-100%: core.units.share_of);
- cost_per_gpu_hour = cost / the GPU-hours, up to the bill's end, of its jobs that have a part in
  that currency (a job in a cluster the bill does not hold, or an hour past the bill's end, has no
  price; None without a currency: nothing was billed).
`data_through` (and each billing source's): the bill's end, after which a run has no cost yet; a
lake without a bill gives the runs of its job records, without cost (`lake_empty`).
A run with job records in the window but no billed instance (its instances or nodes are not in the
bill, its cluster has no pool) shows cost 0, no currency, and the values its jobs state
(service/attribution/job_values.py: columns, labels and fields through the tag keys, rules, default).
`by` groups the rows (team, project, experiment, job_type, cluster, user, state), the costliest
group first, the costliest row first in each: `top` keeps the N costliest runs of each group and
folds the rest into one `other` row; totals are per group and currency (all runs, with or without `top`).
`run` keeps the rows of that one run (any case) and adds its story: its jobs, its cost by job type
and by state, the idle of its instances while it held them (service/attribution/run_story.py);
without `since` its window is its own span (`run_window`). A run `state` leaves out shows a note instead of its story.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from decimal import Decimal

from service.attribution.sessions import read_sessions
from service.attribution.clusters import ClusterCost, ClusterUsage, usage_dims, usage_in, with_clusters
from service.attribution.compute import RollupSession
from service.attribution.job_rules import IdleRule, idle_job_rules
from service.attribution.needs import Needs
from service.attribution.query import Naming, cli_option, listed_once, top_rows, window_at
from service.attribution.run_inputs import (SEVERAL, VALUES, JobSide, gpu_hours_of, held_key, idle_shares,
                                            job_records, joined_clusters, run_span)
from service.attribution.rollup_versions import READ_TABLES
from service.attribution.run_story import RunStory, run_story
from service.attribution.run_sums import run_sums
from service.attribution.sql import MEASURES
from service.core.config import Config
from service.core.config_attribution import AttributionConfig
from service.core.coverage import billing_periods, data_end
from service.core.errors import UsageError
from service.core.folding import folded
from service.core.job_states import STATE_SYNONYMS, STATES
from service.core.lake import Lake
from service.core.suggest import suggestion
from service.core.timewindow import Window, data_anchored, iso_utc, parse_window, past_the_data, utc_now

RUN_GROUPS = ("team", "project", "experiment", "job_type", "cluster", "user", "state")
OTHER = "other"
GPU_HOURS_QUANTUM = MONEY_QUANTUM = Decimal("1e-6")
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class RunsQuery:
    window: Window | None  # None: `run`'s own span (`runs` finds it: `run_window`)
    by: tuple[str, ...] = ()
    states: tuple[str, ...] = ()  # upper case; a run is kept when its last job's state is one of them
    top: int | None = None
    cost: str = "billed"
    run: str | None = None  # one run's rows and story
    # without `until`: the window at another data end (`window_at`); None when `until` fixed it
    anchored: Callable[..., Window] | None = field(default=None, compare=False, repr=False)
    naming: Naming = field(default=cli_option, compare=False, repr=False)  # how errors found later name parameters
    as_of: bool = False  # `until` given: a run's state and end as they stood at the window's end (job_records)

    @classmethod
    def parse(cls, *, since: str | None, until: str | None = None, by: str | None = None,
              state: str | None = None, top: str | int | None = None, cost: str | None = None,
              run: str | None = None, now: datetime | None = None, end: datetime | None = None,
              naming: Naming = cli_option) -> RunsQuery:
        """What the user typed, checked; a UsageError names the parameter as `naming` spells it.
        Without `until` the window ends at `end`, the data's end (service.core.coverage.data_end);
        without `since`, `run`'s window is its own span (`run_window`)."""
        if not since and not (run or "").strip():
            raise UsageError("the window needs a start", where=naming("since"),
                             hint=f"e.g. {naming('since')} 7d, 24h, 30d, mtd or 2026-11-01")
        if not since and until:
            raise UsageError("the window needs a start", where=naming("since"),
                             hint=f"give {naming('since')} too, or neither for the run's own span")
        groups = listed_once((by or "").split(","), naming("by"))
        for name in groups:
            if name not in RUN_GROUPS:
                raise UsageError(f"runs cannot be grouped by {name!r}", where=naming("by"),
                                 hint=f"use some of {', '.join(RUN_GROUPS)}")
        states = tuple(dict.fromkeys(_job_state(s, naming("state")) for s in (state or "").split(",") if s.strip()))
        top_n = top_rows(top, naming("top"))
        if (cost or "billed") not in MEASURES:
            raise UsageError(f"unknown cost {cost!r}", where=naming("cost"), hint=f"use one of {', '.join(MEASURES)}")
        if run is not None and not run.strip():
            raise UsageError("the run id is empty", where=naming("run"), hint="name a run, e.g. its run_id")
        if not since:  # one run: its own span, found in the lake by `runs`
            return cls(None, groups, states, top_n, cost or "billed", run.strip(), naming=naming)
        now = now or utc_now()
        return cls(parse_window(since, until, now=now, end=end, naming=naming), groups, states, top_n,
                   cost or "billed", run.strip() if run else None, data_anchored(since, until, now=now, naming=naming),
                   naming, bool(until))


@dataclass(frozen=True)
class RunRow:
    run: str
    values: dict[str, str | None]  # team, project, experiment, job_type, cluster, user
    jobs: int
    restarts: int
    gpus: Decimal | None
    gpu_hours: Decimal | None
    cost: Decimal
    currency: str | None
    state: str | None
    start: datetime | None
    end: datetime | None
    idle_share: Decimal | None
    priced_hours: Decimal | None  # of gpu_hours, those of its jobs that cost: a job in no bill has no price
    folded_runs: int = 0  # `top`'s row of the rest (named `other`): the runs in it; a run may be named other too
    held_hours: Decimal | None = None  # gpu_hours before rounding: the rest and the totals sum these

    @property
    def exact_hours(self) -> Decimal:
        return self.held_hours if self.held_hours is not None else self.gpu_hours or Decimal(0)

    @property
    def exact_cost_per_gpu_hour(self) -> Decimal | None:
        """The exact cost ÷ the exact priced GPU-hours: each figure shown rounds it once (JSON and CSV
        to 6 decimals, tables to the cent), never its 6 decimals again (2.0149999 / 1 is $2.01, not 2.02)."""
        if not self.priced_hours or self.currency is None:  # no currency: nothing billed, no price
            return None
        return self.cost / self.priced_hours

    @property
    def cost_per_gpu_hour(self) -> Decimal | None:
        exact = self.exact_cost_per_gpu_hour
        return None if exact is None else exact.quantize(MONEY_QUANTUM)

    def group(self, by: tuple[str, ...]) -> tuple[str | None, ...]:
        return tuple(self.state if d == "state" else self.values.get(d) for d in by)

    def to_json(self) -> dict:
        return {"run": self.run, **{d: self.values.get(d) for d in VALUES}, "jobs": self.jobs, "restarts": self.restarts,
                "gpus": _text(self.gpus), "gpu_hours": _text(self.gpu_hours), "cost": _text(self.cost),
                "currency": self.currency, "cost_per_gpu_hour": _text(self.cost_per_gpu_hour),
                "idle_share": _text(self.idle_share), "state": self.state,
                "start": iso_utc(self.start) if self.start else None, "end": iso_utc(self.end) if self.end else None,
                **({"folded_runs": self.folded_runs} if self.folded_runs else {})}


@dataclass(frozen=True)
class RunTotal:
    group: tuple[str | None, ...]
    currency: str | None
    runs: int
    jobs: int
    gpu_hours: Decimal
    cost: Decimal


@dataclass(frozen=True)
class RunsResult:
    query: RunsQuery
    rows: tuple[RunRow, ...]
    totals: tuple[RunTotal, ...]
    lake_empty: bool = False  # no bill in the lake: the rows are what the job records show, without cost
    overbooked: int = 0
    sources: tuple[tuple[str, datetime | None], ...] = ()  # each billing source read and its data_through
    clusters: tuple[ClusterCost, ...] = ()  # each cluster's instance cost and idle part in the window
    states_left_out: tuple[str, ...] = ()  # the last jobs' states `--state` did not name (why it kept none)
    story: RunStory | None = None  # `run`: its jobs, splits and idle
    idle_rules: tuple[IdleRule, ...] = ()  # the job-field rules no job of the window meets (job_rules.py)

    @property
    def window(self) -> Window:
        return self.query.window

    @property
    def data_through(self) -> datetime | None:
        """The end of the bill in the lake: a run's hours after it have no cost yet."""
        return max((moment for _, moment in self.sources if moment is not None), default=None)

    @property
    def unreached(self) -> str | None:
        """How much of the window lies past the bill's end (service.core.timewindow.past_the_data)."""
        return past_the_data(self.window, self.data_through)

    def to_json(self) -> dict:
        by = self.query.by
        return {"since": iso_utc(self.query.window.since), "until": iso_utc(self.query.window.until),
                "cost": self.query.cost, "by": list(by), "rows": [row.to_json() for row in self.rows],
                "totals": [{**dict(zip(by, t.group)), "currency": t.currency, "runs": t.runs, "jobs": t.jobs,
                            "gpu_hours": _text(t.gpu_hours), "cost": _text(t.cost)} for t in self.totals],
                "data_through": iso_utc(self.data_through) if self.data_through else None,
                "sources": [{"source": name, "data_through": iso_utc(moment) if moment else None}
                            for name, moment in self.sources]} | (self.story.to_json() if self.story else {})


def _job_state(text: str, where: str) -> str:
    """A Slurm job state as the job sources store it (`failed`, `Canceled` read too); another
    word is a UsageError, never a filter that silently keeps nothing."""
    word = text.strip().upper()
    word = STATE_SYNONYMS.get(word, word)
    if word not in STATES:
        raise UsageError(f"no job state {word!r}", where=where, hint=suggestion(word, STATES, "states"))
    return word


def _text(value: Decimal | None) -> str | None:
    return None if value is None else format(value, "f")


def runs(lake: Lake, config: AttributionConfig | Config, query: RunsQuery) -> RunsResult:
    """One row per run of the shared GPU clusters in the query's window (module docstring)."""
    config = with_clusters(config)
    if query.window is None:
        query = replace(query, window=run_window(lake, query.run, query.naming))
    return read_sessions(lake, config, None, lambda session: _runs(lake, session, config, query),
                         Needs(usage_dims(config), (query.cost,), allocates=True))  # idle shares, a run's story


def run_window(lake: Lake, run: str, naming: Naming = cli_option) -> Window:
    """The run's own span in whole hours (allocation places each instance-hour whole: a cut hour
    would show part of the run's cost): its job records' first start to their last end, or to the
    data's end while one runs (to now when it began after the data's end). A run no job record names (EKS pods) gets every month the bill holds.
    With neither, a UsageError names the window's start as `naming` spells it."""
    con = lake.query(tables=READ_TABLES)
    try:
        first, last, running = run_span(lake, con, run)
    finally:
        con.close()
    end = data_end(lake)
    if first is None:
        periods = billing_periods(lake)
        if not periods or end is None:
            raise UsageError(f"no job record or bill in the lake names run {run!r}", where=naming("since"),
                             hint=f"check the run id, or give a window, e.g. {naming('since')} 30d")
        first, last = datetime.strptime(min(periods), "%Y-%m").replace(tzinfo=timezone.utc), end
    elif running or last is None:  # to the data's end; a run begun after it (cost pending): to now, its real hours
        last = max(moment for moment in (last, end if end and end > first else utc_now(), first) if moment is not None)
    since = first.replace(minute=0, second=0, microsecond=0)
    until = last.replace(minute=0, second=0, microsecond=0)
    return Window(since, until + HOUR if until < last or until == since else until)


def _runs(lake: Lake, session: RollupSession | None, config: AttributionConfig, query: RunsQuery) -> RunsResult:
    if session is None:  # no bill in the lake: the runs of its job records, without cost
        con = lake.query(tables=READ_TABLES)
        try:
            records = job_records(lake, con, config, query.window, None, query.run, query.as_of)
            idle_rules = tuple(idle_job_rules(lake, config, query.window, con=con))
            story = run_story(lake, None, con, config, query.window, query.cost, query.run,
                              ClusterUsage(query.window, query.cost, (), ()), query.naming("run")) if query.run else None
        finally:
            con.close()
        rows = [_row(side.name, side.stated, Decimal(0), None, side, set(), None) for run, side in records.items()
                if _wanted(query, run)]
        kept, left_out = _kept(query, rows)
        return replace(_arrange(query, kept, 0), lake_empty=True, states_left_out=left_out,
                       story=_state_noted(story, query, rows, kept), idle_rules=idle_rules)
    through = session.data_through()
    query = window_at(query, through)
    # every run's idle share first (one run's comes from the parts its story reads): its allocation's
    # DuckDB memory and the 200k jobs' rows of a month in Python then do not add up (bench/README)
    idle = None if query.run else idle_shares(lake, session, config, query.window, query.cost)
    summed = None if query.run else run_sums(session, config, query.window, query.cost)
    if summed is None:  # one run's story reads its jobs' parts; so do windows run_sums cannot sum
        usage = usage_in(session, config, query.window, query.cost, query.run)  # `run`: its jobs alone
        costs = _summed(query, usage)
        usage = replace(usage, jobs=usage.jobs if query.run else ())  # summed: only one run's story reads its jobs
    else:
        sums, usage = summed
        costs = {key: [s.name, s.cost, s.values, s.jobs, s.clusters] for key, s in sums.items()}
    records = job_records(lake, session.con, config, query.window,
                          max((end for end in through.values() if end), default=None), query.run, query.as_of)
    story = None
    if query.run:
        story = run_story(lake, session, session.con, config, query.window, query.cost, query.run, usage, query.naming("run"))
        idle = story.idle_shares()  # one pass over the window's parts, not two
    rows = []
    for (run, currency), (name, cost, values, jobs, clusters) in costs.items():
        side = records.get(run)  # its jobs in a cluster that bills nothing ran there too
        values = {**values, "cluster": joined_clusters(clusters | (side.clusters if side else set()))}
        rows.append(_row(name, values, cost, currency, side, jobs, idle.get((run, currency))))
    costed = {run for run, _ in costs}
    for run, side in records.items():
        if run not in costed and _wanted(query, run):
            rows.append(_row(side.name, side.stated, Decimal(0), None, side, set(), None))
    kept, left_out = _kept(query, rows)
    return replace(_arrange(query, kept, usage.overbooked), sources=tuple(through.items()), clusters=usage.clusters,
                   states_left_out=left_out, story=_state_noted(story, query, rows, kept),
                   idle_rules=tuple(idle_job_rules(lake, config, query.window, con=session.con)))


def _summed(query: RunsQuery, usage: ClusterUsage) -> dict[tuple[str, str | None], list]:
    """(run lower case, currency) → [its name, cost, the values its jobs share (`several` where they
    differ), the (cluster, id) keys of its jobs, their clusters], of the runs the query shows."""
    costs: dict[tuple[str, str | None], list] = {}
    for job in usage.jobs:
        if not _wanted(query, folded(job.values["run"])):
            continue
        key = (folded(job.values["run"]), job.currency)
        values = {d: job.values.get(d) for d in VALUES if d != "cluster"}
        held = costs.setdefault(key, [job.values["run"], Decimal(0), values, set(), set()])
        held[1] += job.cost
        held[2] = {d: v if v == values[d] else SEVERAL for d, v in held[2].items()}
        held[3].add(held_key(job.cluster, job.job))
        held[4].add(job.cluster)
    return costs


def _wanted(query: RunsQuery, run: str) -> bool:
    """Whether the run (lower case) is one the query shows: every run, or the one `run` names."""
    return query.run is None or run == folded(query.run)


def _kept(query: RunsQuery, rows: list[RunRow]) -> tuple[list[RunRow], tuple[str, ...]]:
    """The rows whose last job's state `--state` names (all without it), and the last states it did not name."""
    left_out = tuple(sorted({r.state.upper() for r in rows if r.state} - set(query.states))) if query.states else ()
    return [r for r in rows if not query.states or (r.state or "").upper() in query.states], left_out


def _state_noted(story: RunStory | None, query: RunsQuery, rows: list[RunRow], kept: list[RunRow]) -> RunStory | None:
    """One run that `state` leaves out says so and how its last job ended (an empty answer alone
    reads as a run without jobs), and shows none of its jobs, as it shows no row."""
    if story is None or kept or not rows:
        return story
    ended = " and ".join(sorted({r.state or "no state" for r in rows}))
    return replace(story, jobs=(), instances=(), notes=(*story.notes, f"run {rows[0].run!r} is left out by the state "
                                                        f"filter ({' or '.join(query.states)}): its last job ended {ended}"))


def _row(name: str, values: dict, cost: Decimal, currency: str | None, side: JobSide | None, jobs: set[str],
         idle: Decimal | None) -> RunRow:
    """`jobs`: the (cluster, id) keys of its jobs with a part (a cost) in `currency`."""
    if side is None:  # EKS pods: no job record
        return RunRow(name, values, len(jobs), 0, None, None, cost, currency, None, None, None, idle, None)
    priced = gpu_hours_of(sum((micros for key, micros in side.held.items() if key in jobs), Decimal(0)))
    return RunRow(name, values, side.jobs, side.restarts, side.gpus, side.gpu_hours.quantize(GPU_HOURS_QUANTUM),
                  cost, currency, side.state, side.start, None if side.running else side.end, idle,
                  priced, held_hours=side.gpu_hours)  # the price of the hours as held, not as rounded


def _arrange(query: RunsQuery, rows: list[RunRow], overbooked: int) -> RunsResult:
    """Groups costliest first, the rows in each too; `top` per group with the rest as `other`; totals."""
    groups: dict[tuple, list[RunRow]] = defaultdict(list)
    for row in rows:
        groups[row.group(query.by)].append(row)
    kept, totals = [], []
    for group in sorted(groups, key=lambda g: (_costliest(groups[g]), tuple(v or "" for v in g))):
        members = sorted(groups[group], key=lambda r: (r.currency or "~", -r.cost, r.run))
        per_currency: dict[str | None, list[RunRow]] = defaultdict(list)
        for row in members:
            per_currency[row.currency].append(row)
        for currency, these in per_currency.items():
            totals.append(RunTotal(group, currency, len(these), sum(r.jobs for r in these),
                                   sum((r.exact_hours for r in these), Decimal(0)).quantize(GPU_HOURS_QUANTUM),
                                   sum((r.cost for r in these), Decimal(0))))
            if query.top is None or len(these) <= query.top:
                kept += these
                continue
            kept += these[:query.top]
            rest = these[query.top:]
            values = {d: None for d in VALUES} | {d: v for d, v in zip(query.by, group) if d != "state"}
            held = sum((r.exact_hours for r in rest), Decimal(0))
            kept.append(RunRow(OTHER, values, sum(r.jobs for r in rest), sum(r.restarts for r in rest), None,
                               held.quantize(GPU_HOURS_QUANTUM),
                               sum((r.cost for r in rest), Decimal(0)), currency,
                               group[query.by.index("state")] if "state" in query.by else None, None, None, None,
                               sum((r.priced_hours or Decimal(0) for r in rest), Decimal(0)), len(rest), held))
    return RunsResult(query, tuple(kept), tuple(totals), overbooked=overbooked)


def _costliest(rows: list[RunRow]) -> tuple[str, Decimal]:
    """A group's place: its cost in its first currency (as its rows come, those without one last),
    the larger first; amounts of two currencies are not compared."""
    sums: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        sums[row.currency or "~"] += row.cost
    return min((currency, -cost) for currency, cost in sums.items())
