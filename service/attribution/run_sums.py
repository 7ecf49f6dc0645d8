"""What each run's jobs cost in a window, summed in one statement over the rollups' job rows
(service/attribution/run_rows.py shows them): per run and currency its cost, the values its
jobs' parts share (`several` where they differ), their clusters and the (cluster, job id) keys.

    run_sums(session, config, window, cost) -> RunSums | None

The same figures as summing `clusters.usage_in`'s per-job parts (200k jobs of a month into
Python), as long as no job or idle row in the window is a shared rule's (split by the spend of
the window in Python) nor cut by the window (a charge period prorated in Python); where one
is, or two runs' ids fold to one (`folded` composes before lowering, DuckDB's lower() does not),
None: the caller sums the parts as before. The clusters' totals and the eval costs are `placed_totals`'.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from service.attribution.clusters import ClusterUsage, grouped_exactly, placed_totals
from service.attribution.compute import ROLLUP_VIEW, RollupSession
from service.attribution.job_how import job_id_sql
from service.attribution.run_inputs import SEVERAL, VALUES, held_key
from service.attribution.sql import dim_col, how_col
from service.attribution.window_sql import INSIDE
from service.core.config_attribution import AttributionConfig
from service.core.folding import folded
from service.core.timewindow import Window
from service.core.units import naive_utc

OWN_VALUES = tuple(d for d in VALUES if d != "cluster")  # team, project, experiment, job_type, user


@dataclass(frozen=True)
class RunSum:
    name: str  # the run as its parts spell it
    cost: Decimal
    values: dict[str, str | None]  # OWN_VALUES, spelled; `several` where its jobs' parts differ
    jobs: set[tuple[str, str]]  # run_inputs.held_key of each job with a part
    clusters: set[str | None]  # spelled


def run_sums(session: RollupSession, config: AttributionConfig, window: Window,
             cost: str) -> tuple[dict[tuple[str, str | None], RunSum], ClusterUsage] | None:
    """(run lower case, currency) → its RunSum, and the window's usage without its jobs (the
    clusters' cost and idle, the overbooked hours); None where the module docstring says."""
    if not grouped_exactly(session, window):
        return None
    kind = f"split_part({how_col('run')}, ':', 1)"
    bind = {"since": naive_utc(window.since), "until": naive_utc(window.until)}
    lowered = ", ".join(f"lower({dim_col(d)}) AS {d}" for d in OWN_VALUES)
    per_cluster = ", ".join(f"min({d}) AS {d}_lo, max({d}) AS {d}_hi, count({d}) AS {d}_n, "
                            f"bool_or({d} IS NULL) AS {d}_null" for d in OWN_VALUES)
    per_run = ", ".join(f"min({d}_lo), max({d}_hi), sum({d}_n), bool_or({d}_null)" for d in OWN_VALUES)
    rows = session.con.execute(
        f"WITH parts AS (SELECT lower({dim_col('run')}) AS run, currency, lower({dim_col('cluster')}) AS cluster, "
        f"{job_id_sql(how_col('run'))} AS job, {lowered}, {cost} AS amount "
        f"FROM {ROLLUP_VIEW} WHERE {INSIDE} AND {kind} = 'job' AND {cost} IS NOT NULL), "
        f"clusters AS (SELECT run, currency, cluster, sum(amount) AS cost, list(DISTINCT job) AS jobs, {per_cluster} "
        "FROM parts GROUP BY run, currency, cluster) "
        f"SELECT run, currency, sum(cost), list((cluster, jobs)), {per_run} FROM clusters GROUP BY run, currency",
        bind).fetchall()
    spell = session.spellings([*OWN_VALUES, "run", "cluster"])
    sums: dict[tuple[str, str | None], RunSum] = {}
    for run, currency, amount, clusters, *ranges in rows:
        name = spell.get(("run", run), run)
        key = (folded(name), currency)
        if key in sums:  # two ids one run: which spelling names it is the per-job order's
            return None
        values = {}
        for n, d in enumerate(OWN_VALUES):
            lo, hi, count, null = ranges[4 * n:4 * n + 4]
            values[d] = SEVERAL if lo != hi or (null and count) else spell.get((d, lo), lo)
        spelled = {c: spell.get(("cluster", c), c) for c, _ in clusters}
        keys = {c: held_key(spelled[c], "")[0] for c in spelled}  # each cluster folded once, not once a job
        sums[key] = RunSum(name, amount, values, {(keys[c], job) for c, jobs in clusters for job in jobs},
                           set(spelled.values()))
    totals = placed_totals(session, config, window, cost, evals=True)
    return sums, ClusterUsage(window, cost, (), totals.clusters, session.overbooked(window), evals=totals.evals)
