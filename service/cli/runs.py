"""`spendlake runs`: thin over service.attribution.runs (rendering only)."""

from __future__ import annotations

import logging
from decimal import Decimal

import click

from service.attribution import NO_CLUSTERS, RUNS_SINCE
from service.cli.attribute import coverage_line
from service.cli.output import Lines, default_format, emit, format_option
from service.cli.params import SingleValueCommand, WholeNumber, given_once
from service.cli.run_story import eval_text, moment_text, number_text, render_story
from service.core.output import one_line
from service.core.timewindow import fixed_end
from service.core.units import currency_text, money_text
from service.report.sections.clusters import WHY_NO_IDLE_SHARE

log = logging.getLogger(__name__)
COSTS = ("billed", "effective", "list")
# a billed run without an idle share: its instances' idle lies outside 0-100% of their cost (core.units.share_of)
NO_IDLE_SHARE = f"note: a run's idle is empty where {WHY_NO_IDLE_SHARE}"
COLUMNS = ("run", "team", "project", "experiment", "job_type", "cluster", "user", "jobs", "restarts", "gpus",
           "gpu_hours", "cost", "currency", "cost_per_gpu_hour", "idle_share", "state", "start", "end", "eval_cost")
TABLE = {"run": "run", "team": "team", "project": "project", "experiment": "experiment", "job_type": "job type",
         "jobs": "jobs (restarts)", "gpus": "GPUs", "gpu_hours": "GPU-h", "cost": "cost", "eval_cost": "eval cost",
         "currency": "currency",
         "cost_per_gpu_hour": "$/GPU-h", "idle_share": "idle", "state": "state", "start": "start", "end": "end"}


def _trimmed(text: str | None, places: int) -> str:
    """At most `places` decimals, trailing zeros dropped: `8`, `0.5` GPUs."""
    return "" if text is None else f"{Decimal(text):,.{places}f}".rstrip("0").rstrip(".")


def render(result, fmt: str | None) -> None:
    data = result.to_json()
    fmt = fmt or default_format()  # a terminal gets this table, not the raw rows
    if fmt in ("json", "csv"):
        # with --top a CSV tells the folded rest (`other`) from a run of that name, as JSON does
        columns = (*COLUMNS, "folded_runs") if result.query.top is not None else COLUMNS
        emit(data["rows"], columns, fmt, json_data=data)
        return
    if not data["rows"]:  # a table of nothing: the command's reason line says why
        return
    rows = [{**row, "run": f"{row['run']} ({row['folded_runs']} runs)" if row.get("folded_runs") else row["run"],
             "jobs": f"{row['jobs']} ({row['restarts']})", "cost": money_text(row["cost"], of=row["currency"]),
             "eval_cost": eval_text(row),
             "gpus": _trimmed(row["gpus"], 2),
             "gpu_hours": number_text(row["gpu_hours"], 1),  # one decimal each, as the story shows them
             "cost_per_gpu_hour": money_text(held.exact_cost_per_gpu_hour, of=row["currency"]),
             "idle_share": f"{float(row['idle_share']) * 100:.1f}%" if row["idle_share"] else "",
             "start": moment_text(row["start"]), "end": moment_text(row["end"], running=bool(row["start"]))}
            for row, held in zip(data["rows"], result.rows)]
    rows = [{TABLE[k]: v for k, v in row.items() if k in TABLE} for row in rows]
    by = result.query.by
    names = ["total" + "".join(f" {t.get(d) or '-'}" for d in by) for t in data["totals"]]
    footer = {"run": Lines(names), "currency": Lines(currency_text(t["currency"]) for t in data["totals"]),
              "gpu_hours": Lines(number_text(t["gpu_hours"], 1) for t in data["totals"]),
              "cost": Lines(money_text(t["cost"], of=t["currency"]) for t in data["totals"])}
    title = f"{result.query.cost} cost per run, {data['since']} → {data['until']}"
    emit(rows, list(TABLE.values()), "table", title=title, footer={TABLE[k]: v for k, v in footer.items()},
         right=("jobs (restarts)", "GPUs", "GPU-h", "cost", "eval cost", "$/GPU-h", "idle"), whole=("cost", "eval cost"),
         late=("state", "idle"))  # what failed, and what it left idle, outlast the other columns
    click.echo(coverage_line(result))
    if any(row["currency"] and row["idle_share"] is None for row in data["rows"] if not row.get("folded_runs")):
        click.echo(NO_IDLE_SHARE, err=True)  # as the report's top runs say it: an empty cell reads as no idle


def _why_no_run(result) -> str:
    """An empty answer says why: `--state` named no run's last state (and which there were), or
    no job held GPUs in the window (and what the clusters' instances cost, idle, meanwhile)."""
    window = result.window.shown()
    if result.states_left_out:
        return (f"note: no run in the window {window} ended {' or '.join(result.query.states)} (its last job's "
                f"state); the runs there ended {', '.join(result.states_left_out)}")
    line = f"note: no job held GPUs of the shared clusters in the window {window}"
    idle = [c for c in result.clusters if c.cost]
    if idle:
        line += "; the clusters' instances cost " + ", ".join(
            f"{c.cluster} {currency_text(c.currency)} {money_text(c.cost, of=c.currency)}, "
            f"of it idle {money_text(c.idle, of=c.currency)}" for c in idle)
        line += " (`spendlake attribute --by cluster,run`)"
    return line


@click.command("runs", cls=SingleValueCommand)
@click.option("--since", help=f"Start of the window: 7d, 24h, 30d, mtd, 2026-11-01 or an ISO time (UTC)  [default: "
              f"{RUNS_SINCE}; with --run: the run's own span (first start to the last end of its jobs or of the eval jobs "
              "naming it, whole hours)]")
@click.option("--until", help="End of the window (default: the end of the data, `data through`; "
              "3d: 3 days before it).")
@click.option("--by", "by", multiple=True, callback=given_once,
              help="Group the runs: team, project, experiment, job_type, cluster, user or state.")
@click.option("--state", help="Keep runs whose last job ended in this state (comma-separated), e.g. failed.")
@click.option("--top", type=WholeNumber(min=1), help="Keep the N costliest runs (of each group), fold the rest into `other`.")
@click.option("--run", help="One run's story: its jobs (each attempt), its cost by job type and by state, and the "
              "idle of its instances while it held them.")
@click.option("--cost", type=click.Choice(COSTS), default="billed", show_default=True)
@format_option
@click.pass_obj
def runs_command(obj, since, until, by, state, top, run, cost, fmt) -> None:
    """What each run on the shared GPU clusters cost: jobs, GPU-hours, state, idle."""
    from service.attribution import RunsQuery, no_bill_note, runs, runs_outside_the_data, runs_past_the_data
    from service.core.coverage import data_end

    query = RunsQuery.parse(since=since, until=until, by=by, state=state, top=top, cost=cost, run=run,
                            end=None if fixed_end(until) else data_end(obj.lake))
    result = runs(obj.lake, obj.config, query)
    if result.no_clusters:  # nothing to show, which is no error: the JSON's contract without a row, and why
        render(result, fmt)
        click.echo(f"note: {NO_CLUSTERS}", err=True)
        return
    idle_rules(result.idle_rules)
    if note := no_bill_note(obj.lake, result, obj.config.lake):
        click.echo(note, err=True)
    fmt = fmt or default_format()
    if result.story is None or fmt == "json":
        render(result, fmt)
    else:  # one run: its story (csv: its jobs, one line each)
        render_story(result, fmt)
    for warning in result.warnings:  # eval cost no row holds (run_evals.unshown), in the JSON's notes too
        click.echo(one_line(f"warning: {warning}"), err=True)
    for note in result.notes:
        click.echo(one_line(f"note: {note}"), err=True)
    if result.story is not None:
        for note in result.story.notes:
            click.echo(one_line(f"note: {note}"), err=True)
    elif not result.rows and not result.lake_empty:
        click.echo(one_line(_why_no_run(result)), err=True)  # it names states and clusters from job records
    elif note := runs_outside_the_data(obj.lake, result):  # runs with jobs and no cost: no bill reaches the window
        click.echo(f"note: {note}", err=True)
    elif fmt != "table" and (note := runs_past_the_data(result)):  # the table says it in its coverage line
        click.echo(f"note: {note}", err=True)
    if result.overbooked:
        click.echo(f"warning: {result.overbooked} instance-hour(s) in the window were over-booked (see "
                   "`spendlake attribute`)", err=True)
        overbooked_causes(obj.lake, result.window, result.read_in)


def idle_rules(rules) -> None:
    """The job-field rules no job meets (the answer's `idle_rules`): a warning for one no job ever
    met, an info line (-v) for one no job of this window met (a quiet day has no eval jobs)."""
    for rule in rules:
        if rule.ever:
            log.info("%s", rule.text())
        else:
            click.echo(f"warning: {rule.text()}", err=True)


def overbooked_causes(lake, window, snapshot=None) -> None:
    """What over-booked hours come from, where it can be named: nodes that two job sources share
    (in the job records `snapshot` holds: the answer's)."""
    from service.attribution import shared_nodes

    for shared in shared_nodes(lake, window, snapshot):
        click.echo(f"warning: {shared.text()}", err=True)
