"""Report section of shared GPU clusters (README "Shared GPU clusters"): the month's top runs
(with the eval cost `spendlake runs` gives each, beside its cost), what failed, cancelled and
otherwise unfinished jobs cost, cost by job type per day, and each cluster's idle share.

Every number comes from the allocation that `spendlake attribute`, `spendlake runs` and
`cluster_usage` share, in the cost `report.clusters_cost` names: billed by default, as `spendlake
runs`, the demo's top runs and /metrics' run and cluster figures show it, so a run reads one cost
wherever it is read. A node on a Savings Plan or reservation is billed 0 for its hours (the
commitment's fee is its own line, on no run): where the clusters' instances' effective (amortized)
cost this month differs from their billed (their own parts, read at both costs beside the top
runs: service/attribution/run_cost_notes.py), the note gives both and names `report.clusters_cost: effective`, which
shows each run its share of the commitment (`spendlake runs --cost effective`); a bill holding
them without effective cost (an Azure actual-cost export) is named and left out of both figures.
Effective is
shown billed where a bill holding the clusters' instances over the days the section reads (the
month, and the chart's last TREND_DAYS days) delivered no effective cost (an Azure actual-cost
export, which would count as 0), the note naming those bills; a bill of other lines (an Azure
subscription without GPU nodes) keeps it effective. The report's headlines and spend tables are
billed (they tie to the invoice). A config without `clusters:` has no such section.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal

from service.attribution import UNFINISHED, RunsQuery, RunsResult, attribute, cluster_usage, lacking_cost, runs
from service.core.config import Config
from service.core.lake import Lake
from service.core.timewindow import Window, day_start
from service.core.units import titled
from service.report.chart_currency import chart_currency, left_out_note
from service.report.model import Chart, Column, Section, Table
from service.report.shares import share_notes, share_pct

ZERO = Decimal(0)
TREND_DAYS = 30
TITLE = "Shared GPU clusters"


def clusters_section(config: Config, lake: Lake, day: date, top: int) -> list[Section]:
    """The section, or none for a config without `clusters:` (nothing is allocated to jobs)."""
    if config.attribution.clusters is None:
        return []
    until = day_start(day) + timedelta(days=1)
    month, trend = Window(day_start(day.replace(day=1)), until), Window(until - timedelta(days=TREND_DAYS), until)
    cost = config.report.clusters_cost
    read = Window(min(month.since, trend.since), until)  # every day the section reads
    lacking = lacking_effective(config, lake, read) if cost == "effective" else []
    if lacking:  # an Azure actual-cost export holding the instances: their effective cost would count as 0
        cost = "billed"
    usage = cluster_usage(lake, config, month, cost=cost)
    if not usage.clusters:
        return [Section("clusters", TITLE, note="No cost of a shared cluster's instances this month.")]
    names = {c.cluster for c in usage.clusters}
    # shown billed as asked (the default): the clusters' own lines at both costs over the month, of the bills
    # holding them that have both (`without`: those lacking effective)
    asked = cost == "billed" and not lacking
    without = held_by(lacking_cost(lake, "effective", month), usage.partitions) if asked else []
    # the month's jobs (200k at 10M) are summed and let go before the runs allocate the month again
    unfinished, idle = unfinished_jobs(usage), idle_by_cluster(usage)
    del usage
    ranked = runs(lake, config, RunsQuery(month, top=top, cost=cost))
    # the clusters' instances' effective cost apart from their billed, of the bills that have both
    # (run_cost_notes.py: read beside the runs, whatever the bills' totals)
    amortized = ranked.amortized if asked else ""
    by_type, chart = job_type_days(config, lake, trend, names, cost)
    tables = [runs_table(ranked, top), unfinished, idle, by_type]
    note = (f"Billed cost of the clusters' instances: {', '.join(lacking)}, holding them, delivered no effective "
            f"(amortized) cost, which would count as 0, so billed is shown for all (a node on a Savings Plan or "
            f"reservation is billed $0 for its hours); placed on jobs by the GPU-seconds they held, what no job held "
            f"is the cluster's idle.") if lacking else COST_NOTES[cost]
    if amortized and without:  # the bills lacking it hold the clusters too: what they cost effective is not known
        note += (f" The clusters' instances' effective (amortized) cost this month, in the bills holding them that "
                 f"have it, {amortized}; {', '.join(without)}, holding them too, delivered no effective cost (not in "
                 f"these figures), so `report.clusters_cost: effective` would show billed.")
    elif amortized:
        note += (f" The clusters' instances' effective (amortized) cost this month {amortized}; "
                 f"`report.clusters_cost: effective` shows each run its share of the commitment.")
    return [Section("clusters", TITLE, tables=tables, charts=[chart] if chart else [], note=note)]


def lacking_effective(config: Config, lake: Lake, window: Window) -> list[str]:
    """`source period` of each delivery of the window's months that holds lines of the clusters'
    instances (jobs' or idle parts) and no effective cost; only read (allocated) when some delivery lacks it."""
    lacking = lacking_cost(lake, "effective", window)
    return held_by(lacking, cluster_usage(lake, config, window).partitions) if lacking else []


def held_by(deliveries: list[str], partitions: frozenset[tuple[str, str]]) -> list[str]:
    """Those of `deliveries` (`source period`) among the (source, billing period) `partitions`."""
    held = {f"{source} {period}" for source, period in partitions}
    return [delivery for delivery in deliveries if delivery in held]


# which cost the section shows, and how to ask for the other (module docstring)
COST_NOTES = {
    "effective": "Effective (amortized) cost of the clusters' instances (`report.clusters_cost: effective`): a node "
                 "on a Savings Plan or reservation costs its share of the commitment, not the $0 its hours are "
                 "billed (the headlines, spend tables, `spendlake runs` and /metrics are billed). Placed "
                 "on jobs by the GPU-seconds they held; what no job held is the cluster's idle (`spendlake runs "
                 "--cost effective`, `attribute --by job_type --cost effective`).",
    "billed": "Billed cost of the clusters' instances, as `spendlake runs` and /metrics show it (a node on a "
              "Savings Plan or reservation is billed $0 for its hours), placed on jobs by the GPU-seconds they "
              "held; what no job "
              "held is the cluster's idle (`spendlake runs`, `attribute --by job_type`).",
}


# a billed run without an idle share: its instances' idle lies outside 0-100% of their cost (shares.py)
# why a run's idle share can be none (service.core.units.share_of): the CLI's note says it too
WHY_NO_IDLE_SHARE = ("credits or negations make its instances' cost net (or 0), so their idle is no share of it "
                     "(`spendlake runs --run R --format json` gives each instance's window_cost and window_idle)")
NO_IDLE_SHARE = f"A run's idle share shows — where {WHY_NO_IDLE_SHARE}."


def top_runs(config: Config, lake: Lake, month: Window, top: int, cost: str = "billed") -> Table:
    return runs_table(runs(lake, config, RunsQuery(month, top=top, cost=cost)), top)


def runs_table(result: RunsResult, top: int) -> Table:
    rows = [{"run": r.run, "team": r.values.get("team"), "project": r.values.get("project"),
             "job_type": r.values.get("job_type"), "cluster": r.values.get("cluster"), "jobs": r.jobs,
             "gpu_hours": r.gpu_hours, "state": r.state, "currency": r.currency, "cost": r.cost,
             "idle_share_pct": None if r.idle_share is None else (r.idle_share * 100).quantize(Decimal("0.1")),
             "eval_cost": r.eval_cost}
            for r in result.rows if not r.folded_runs]
    return Table.top("top_runs", top, "runs, month to date", [
        Column("run", "run"), Column("team", "team"), Column("project", "project"), Column("job_type", "job type"),
        Column("cluster", "cluster"), Column("jobs", "jobs", "count"), Column("gpu_hours", "GPU-hours", "count"),
        Column("state", "last state"), Column("currency", "currency"), Column("cost", "month to date", "money"),
        Column("idle_share_pct", "idle of its instances", "percent"),
        # last, as in `spendlake runs`' CSV: what the eval jobs naming the run cost, beside its cost, not in it
        Column("eval_cost", "eval cost", "money")], rows=rows, markdown=(("run",), "cost"),
        notes=[NO_IDLE_SHARE] if any(r["currency"] and r["idle_share_pct"] is None for r in rows) else [])


def unfinished_jobs(usage) -> Table:
    """Cost of the month's jobs by final state, the unfinished ones (failed, cancelled, timed out...),
    and their attempts: each job record its parts name (a job requeued twice is two, as `runs --run`'s
    by_state counts them); a job whose parts name no record (an EKS pod) is one."""
    cost: dict[tuple[str, str | None], Decimal] = defaultdict(Decimal)
    jobs: dict[tuple[str, str | None], int] = defaultdict(int)
    totals: dict[str | None, Decimal] = defaultdict(Decimal)
    for job in usage.jobs:
        totals[job.currency] += job.cost
        state = (job.values.get("job_state") or "").upper()
        if state in UNFINISHED:
            cost[(state, job.currency)] += job.cost
            jobs[(state, job.currency)] += len(job.records) or 1
    rows = [{"state": state, "currency": currency, "jobs": jobs[(state, currency)], "cost": amount,
             "share_pct": share_pct(amount, totals[currency])}
            for (state, currency), amount in sorted(cost.items(), key=lambda kv: (str(kv[0][1]), -kv[1], kv[0][0]))]
    # each state of UNFINISHED the month holds (REQUEUED, OUT_OF_MEMORY...), not just those it names
    return Table("unfinished_jobs", "Unfinished jobs (failed, cancelled, timed out, requeued, preempted...), "
                 "month to date", [
        Column("state", "state"), Column("currency", "currency"), Column("jobs", "attempts", "count"),
        Column("cost", "cost", "money"), Column("share_pct", "share of jobs' cost", "percent")],
        rows=rows, markdown=(("state",), "cost"), notes=share_notes(rows, "cost", lambda row: totals[row["currency"]]))


def idle_by_cluster(usage) -> Table:
    rows = [{"cluster": c.cluster, "currency": c.currency, "cost": c.cost, "jobs_cost": c.cost - c.idle,
             "idle": c.idle,
             "idle_pct": share_pct(c.idle, c.cost)}
            for c in usage.clusters]
    return Table("cluster_idle", "Idle share per cluster, month to date", [
        Column("cluster", "cluster"), Column("currency", "currency"), Column("cost", "instances", "money"),
        Column("jobs_cost", "jobs", "money"), Column("idle", "idle", "money"),
        Column("idle_pct", "idle share", "percent", part="idle")], rows=rows, markdown=(("cluster",), "idle_pct"),
        notes=share_notes(rows, "idle", lambda row: row["cost"]))


def job_type_days(config: Config, lake: Lake, window: Window, clusters: set[str],
                  cost: str = "billed") -> tuple[Table, Chart | None]:
    """Cost of the clusters' instances per day and job type (`idle` the GPUs no job held)."""
    result = attribute(lake, config, window, by=("cluster", "job_type"), cost=cost, granularity="day")
    cells: dict[tuple[str, str, str | None], Decimal] = defaultdict(Decimal)
    for row in result.rows:
        if row.values["cluster"] in clusters:
            cells[(row.period.isoformat(), row.values["job_type"], row.currency)] += row.cost
    table = Table("cluster_cost_by_job_type", f"Cluster cost by job type per day, last {TREND_DAYS} days", [
        Column("period", "day"), Column("job_type", "job type"), Column("currency", "currency"),
        Column("cost", "cost", "money")], in_html=False)
    table.rows = [{"period": p, "job_type": t, "currency": c, "cost": v} for (p, t, c), v in sorted(
        cells.items(), key=lambda kv: (kv[0][0], str(kv[0][2]), kv[0][1]))]
    currency, why = chart_currency(config, [(c, amount) for (_, _, c), amount in cells.items()])
    if currency is None:
        return table, None
    days = [(window.since + timedelta(days=i)).date().isoformat() for i in range(TREND_DAYS)]
    types = sorted({t for (_, t, c) in cells if c == currency},
                   key=lambda t: (-sum(v for (_, k, c), v in cells.items() if k == t and c == currency), t))
    series = {t: [cells.get((d, t, currency), ZERO) for d in days] for t in types}
    note = left_out_note(currency, why, [(c, amount) for (_, _, c), amount in cells.items()], table.key)
    return table, Chart("stacked", titled(f"Cluster cost by job type per day, {cost}", currency), days, series,
                        currency or "", note=note)
