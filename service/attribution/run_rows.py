"""Runs on shared GPU clusters: one row per run, what `spendlake runs` and `/api/v1/runs` show.

    RunsQuery.parse(since=..., until=..., by=..., state=..., top=..., cost=...) -> RunsQuery  (run_query.py)
    runs(lake, config, query) -> RunsResult   (run_result.py: .rows: RunRow, .totals: RunTotal, .to_json())

This module makes the rows; run_grouping.py filters, groups, folds and totals them.

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
- eval_cost: what the jobs of job type `eval` naming the run (their `parent_run`) cost in the window,
  in the row's currency (run_evals.py): beside `cost`, never in it, as those jobs are their own runs'
  rows and no total adds it; what no row holds is said (`warnings`, `notes`: run_evals.unshown): an eval
  in a currency its run has no row in, a parent_run that no run of the window is, an eval run naming itself;
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
and by state, the idle of its instances while it held them (service/attribution/run_story.py), the eval runs naming it,
what its unfinished attempts and failed re-runs cost (run_figures.py: with a Config, the
failed-reruns rule as its `rules:` set it; an AttributionConfig, the rule's defaults);
without `since` its window is its own span (`run_window`). A run `state` leaves out shows a note instead of its story.
A config without `clusters:` has no runs: no row, and NO_CLUSTERS in the JSON's `notes` (`no_clusters`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from decimal import Decimal

from service.attribution.sessions import held_sessions
from service.attribution.clusters import ClusterUsage, usage_dims, usage_in, with_clusters
from service.attribution.compute import RollupSession
from service.attribution.instance_checks import instance_warnings
from service.attribution.job_rules import idle_job_rules
from service.attribution.jobs import JOBS_TABLE
from service.attribution.needs import Needs
from service.attribution.query import Naming, cli_option, window_at
from service.attribution.run_cost_notes import asks_effective, run_cost_notes
from service.attribution.run_evals import by_parent, naming, unshown
from service.attribution.run_grouping import arranged, kept_by_state, state_noted
from service.attribution.run_inputs import (SEVERAL, VALUES, JobSide, gpu_hours_of, held_key, idle_shares,
                                            evals_span, job_records, joined_clusters, run_span)
from service.attribution.rollup_versions import READ_TABLES
from service.attribution.run_query import RUNS_SINCE, RunsQuery, hour_after
from service.attribution.run_result import GPU_HOURS_QUANTUM, RunRow, RunsResult
from service.attribution.run_story import run_story
from service.attribution.run_sums import run_sums
from service.core.config import Config, attribution_of
from service.core.config_attribution import AttributionConfig
from service.core.coverage import billing_data_through, billing_periods, data_end, snapshot_data_end
from service.core.errors import UsageError
from service.core.folding import folded
from service.core.lake import Lake
from service.core.snapshot import Snapshot
from service.core.timewindow import Window, parse_window, utc_now

HOUR = timedelta(hours=1)


def runs(lake: Lake, config: AttributionConfig | Config, query: RunsQuery) -> RunsResult:
    """One row per run of the shared GPU clusters in the query's window (module docstring), all
    read in one snapshot of the lake: the run's span, its job records and costs of one state."""
    rules = config.rules if isinstance(config, Config) else {}  # the failed-reruns rule's: a story's figures
    if attribution_of(config).clusters is None:  # nothing places GPU instances' cost on jobs: no run to show
        try:
            window = query.window or run_window(lake, query.run, query.naming)
        except UsageError:  # no job record nor bill names the run: `runs`' window, no error (still no row)
            window = parse_window(RUNS_SINCE, None, end=data_end(lake) or hour_after(utc_now()), naming=query.naming)
        return RunsResult(replace(query, window=window), (), (), sources=tuple(billing_data_through(lake).items()),
                          no_clusters=True)
    config = with_clusters(config)
    # a billed answer reads effective cost too: its note (run_cost_notes.py)
    measures = (query.cost, "effective") if asks_effective(config, query.cost) else (query.cost,)
    return held_sessions(lake, config, lambda snapshot, session: _runs(lake, snapshot, session, config, query, rules),
                         Needs(usage_dims(config), measures, allocates=True))  # idle shares, a run's story


def run_window(lake: Lake, run: str, naming: Naming = cli_option, snapshot: Snapshot | None = None,
               config: AttributionConfig | None = None) -> Window:
    """The run's own span in whole hours (allocation places each instance-hour whole: a cut hour
    would show part of the run's cost): its job records' first start to their last end, or the last
    end of the eval jobs naming it (with `config`'s clusters: evals_span; its eval_cost was cut at its
    last job), or to the data's end while one runs (to now when it began after the data's end). A run no job record names (EKS pods) gets every month the bill holds.
    With neither, a UsageError names the window's start as `naming` spells it. `snapshot`: the
    job records it holds (Snapshot.tables) and the bill's end and months its ledger held, not those there now."""
    con = lake.query(snapshot, tables=READ_TABLES)
    try:
        first, last, running = run_span(lake, con, run)
        if first is not None and config is not None:
            evaluated, evaluating = evals_span(lake, con, config, run, first)
            last, running = max((m for m in (last, evaluated) if m is not None), default=None), running or evaluating
    finally:
        con.close()
    end = data_end(lake) if snapshot is None else snapshot_data_end(lake, snapshot)
    if first is None:
        periods = billing_periods(lake) if snapshot is None else sorted(
            {check.entry.billing_period for check in snapshot.checks if check.entry})
        if not periods or end is None:
            raise UsageError(f"no job record or bill in the lake names run {run!r}", where=naming("since"),
                             hint=f"check the run id, or give a window, e.g. {naming('since')} 30d")
        first, last = datetime.strptime(min(periods), "%Y-%m").replace(tzinfo=timezone.utc), end
    elif running or last is None:  # to the data's end; a run begun after it (cost pending): to now, its real hours
        last = max(moment for moment in (last, end if end and end > first else utc_now(), first) if moment is not None)
    since = first.replace(minute=0, second=0, microsecond=0)
    until = last.replace(minute=0, second=0, microsecond=0)
    return Window(since, until + HOUR if until < last or until == since else until)


def _runs(lake: Lake, snapshot: Snapshot, session: RollupSession | None, config: AttributionConfig,
          query: RunsQuery, rules: Mapping) -> RunsResult:
    if query.window is None:
        query = replace(query, window=run_window(lake, query.run, query.naming, snapshot, config))
    if session is None:  # no bill in the lake: the runs of its job records, without cost
        con = lake.query(snapshot, tables=READ_TABLES)
        try:
            records = job_records(lake, con, config, query.window, None, query.run, query.as_of)
            idle_rules = tuple(idle_job_rules(lake, config, query.window, con=con, snapshot=snapshot))
            story = run_story(lake, None, con, config, query.window, query.cost, query.run,
                              ClusterUsage(query.window, query.cost, (), ()), query.naming("run"),
                              rules) if query.run else None
        finally:
            con.close()
        rows = [_row(side.name, side.stated, Decimal(0), None, side, set(), None) for run, side in records.items()
                if _wanted(query, run)]
        kept, left_out = kept_by_state(query, rows)
        return replace(arranged(query, kept, 0), lake_empty=True, states_left_out=left_out,
                       story=state_noted(story, query, rows, kept), idle_rules=idle_rules, read_in=snapshot)
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
    ends = [end for end in through.values() if end]
    records = job_records(lake, session.con, config, query.window, max(ends, default=None), query.run, query.as_of)
    story = None
    if query.run:
        story = run_story(lake, session, session.con, config, query.window, query.cost, query.run, usage,
                          query.naming("run"), rules)
        story = replace(story, evals=naming(usage.evals, query.run))
        idle = story.idle_shares()  # one pass over the window's parts, not two
    evals = by_parent(usage.evals)
    rows = []
    for (run, currency), (name, cost, values, jobs, clusters) in costs.items():
        side = records.get(run)  # its jobs in a cluster that bills nothing ran there too
        values = {**values, "cluster": joined_clusters(clusters | (side.clusters if side else set()))}
        rows.append(replace(_row(name, values, cost, currency, side, jobs, idle.get((run, currency))),
                            eval_cost=evals.get((run, currency), Decimal(0))))
    costed = {run for run, _ in costs}
    for run, side in records.items():
        if run not in costed and _wanted(query, run):
            rows.append(_row(side.name, side.stated, Decimal(0), None, side, set(), None))
    kept, left_out = kept_by_state(query, rows)
    shown: dict[str, set[str | None]] = defaultdict(set)
    for row in kept:
        shown[folded(row.run)].add(row.currency)
    warned, noted = unshown(usage.evals, {folded(row.run): row.run for row in rows}, shown, query.run is None)
    said, amortized = run_cost_notes(session, config, query.window, query.cost, query.naming)
    return replace(arranged(query, kept, usage.overbooked), sources=tuple(through.items()), clusters=usage.clusters,
                   states_left_out=left_out, story=state_noted(story, query, rows, kept), read_in=snapshot,
                   warnings=(*warned, *instance_warnings(session.con, config.clusters, lake.has_table(JOBS_TABLE),
                                                         query.window, query.cost, max(ends, default=None), snapshot,
                                                         query.run)),
                   notes=noted + said, amortized=amortized,
                   idle_rules=tuple(idle_job_rules(lake, config, query.window, con=session.con, snapshot=snapshot)))


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


def _row(name: str, values: dict, cost: Decimal, currency: str | None, side: JobSide | None, jobs: set[str],
         idle: Decimal | None) -> RunRow:
    """`jobs`: the (cluster, id) keys of its jobs with a part (a cost) in `currency`."""
    if side is None:  # EKS pods: no job record
        return RunRow(name, values, len(jobs), 0, None, None, cost, currency, None, None, None, idle, None)
    priced = gpu_hours_of(sum((micros for key, micros in side.held.items() if key in jobs), Decimal(0)))
    return RunRow(name, values, side.jobs, side.restarts, side.gpus, side.gpu_hours.quantize(GPU_HOURS_QUANTUM),
                  cost, currency, side.state, side.start, None if side.running else side.end, idle,
                  priced, held_hours=side.gpu_hours)  # the price of the hours as held, not as rounded
