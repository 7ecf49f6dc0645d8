"""`spendlake demo`: thin over service.cli.demo_org."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import click

from service.cli.output import Lines, emit
from service.cli.params import Day, SingleValueCommand, WholeNumber
from service.core.config_file import DEMO_CONFIG
from service.core.output import one_line
from service.core.units import currency_text, money_text, usd

SUMMARY_COLUMNS = ["source", "period", "currency", "rows", "billed", "effective", "final"]
TOP_FINDINGS = 8
TOP_OTHERS = 5  # per category
TOP_RUNS = 8
MODULE_MAIN = Path(__file__).resolve().parent.parent / "__main__.py"  # sys.argv[0] of `python -m service`
FINDINGS_IN_FULL = "`spendlake findings --format json` shows every finding in full"  # demo takes no --format


def program() -> str:
    """How to run spendlake again, as this run was started: the README's first command runs
    `.venv/bin/spendlake`, which a shell does not find as `spendlake` outside an activated venv;
    `python -m service` (no `spendlake` on the PATH at all) is named as the interpreter was."""
    started = Path(sys.argv[0])
    if started.resolve() == MODULE_MAIN:  # the interpreter as the shell was given it (`python`, `.venv/bin/python`)
        return f"{shlex.quote(sys.orig_argv[0])} -m service"
    on_path = shutil.which("spendlake")
    if started.name != "spendlake" or (on_path and started.exists() and Path(on_path).samefile(started)):
        return "spendlake"
    return shlex.quote(os.path.relpath(started) if started.absolute().is_relative_to(Path.cwd()) else str(started))


def _print_spend_and_findings(result) -> None:
    """Spend by team over the last 7 days of data (the window `attribute --since 7d` reads),
    and the biggest open findings."""
    from rules.base import CATEGORIES, finished_cost
    from service.attribution import AttributionQuery, attribute_query, commitments
    from service.cli.attribute import coverage_line
    from service.core.coverage import anchored_window, data_end
    from service.core.lake import Lake
    from service.core.timewindow import data_anchored

    lake = Lake.of(result.config)
    # each window ends where the data it reads ends (an ingest may commit in between)
    spend = attribute_query(lake, result.config,
                            AttributionQuery.parse(result.config, since="7d", by="team", end=data_end(lake)))
    rows = [{"team": r.values["team"], "currency": r.currency, "cost": money_text(r.cost, of=r.currency)}
            for r in spend.rows]
    footer = {"team": "total", "currency": Lines(currency_text(c) for c, _, _ in spend.totals),
              "cost": Lines(money_text(cost, of=c) for c, cost, _ in spend.totals)}
    emit(rows, ["team", "currency", "cost"], "table", title="spend by team, last 7 days", right=("cost",),
         footer=footer)
    click.echo(coverage_line(spend))
    for total in commitments(lake, result.config, anchored_window(lake, "30d"),
                             anchored=data_anchored("30d", None)).totals:
        click.echo(commitment_line(total))
    open_findings = [f for f in result.findings if f.status == "open"]
    waste = [f for f in open_findings if f.category == "waste"]
    once = {f.id for f in waste if finished_cost(f)}  # a failed attempt re-run, a Capacity Block: no month's
    monthly, finished = (sum((f.monthly_waste_usd for f in waste if (f.id in once) == done), Decimal(0))
                         for done in (False, True))
    rows = [{"rule": f.rule, "severity": f.severity, "team": f.team, "project": f.project,
             "resource": _short(f.resource_id),
             "waste": f"{usd(f.monthly_waste_usd)}{' once' if f.id in once else '/month'}"}
            for f in sorted(waste, key=lambda f: f.monthly_waste_usd, reverse=True)[:TOP_FINDINGS]]
    told: set[str] = set()  # both tables leave out the same columns on a narrow terminal: said once
    emit(rows, ["rule", "severity", "team", "project", "resource", "waste"], "table",
         title=f"top waste ({len(waste)} open findings: {usd(monthly)} a month"
               + (f", {usd(finished)} once" if once else "") + ")", right=("waste",), whole=("waste",),
         elsewhere=FINDINGS_IN_FULL, told=told)
    # overspend and ownership are not waste: their impact is an overrun, an excess or
    # unowned spend, never a monthly figure, so they get a table and a column of their own
    rows = [{"rule": f.rule, "category": f.category, "severity": f.severity, "team": f.team,
             "resource": _short(f.resource_id), "impact": usd(f.impact_usd)}
            for category in CATEGORIES[1:]
            for f in sorted((f for f in open_findings if f.category == category),
                            key=lambda f: f.impact_usd, reverse=True)[:TOP_OTHERS]]
    emit(rows, ["rule", "category", "severity", "team", "resource", "impact"], "table",
         title=f"top overspend and ownership ({len(open_findings) - len(waste)} open findings; impact: "
               "budget overrun, anomaly excess, unallocated spend of the window)", right=("impact",), whole=("impact",),
         elsewhere=FINDINGS_IN_FULL, told=told)


def commitment_line(total: dict) -> str:
    """One currency's commitments over 30 days, on one line: the currency is the bill's text,
    shown escaped (`service.core.output.one_line`), never run by the terminal."""
    currency = total["currency"]
    committed, used, unused = (money_text(total[k], of=currency) for k in ("commitment", "used", "unused"))
    return one_line(f"commitments, last 30 days ({currency}): {committed} committed, {used} used, "
                    f"{unused} unused ({total['unused_pct']}%), "
                    f"covering {total['coverage_pct']}% of eligible usage (`spendlake commitments`)")


def _short(resource_id: str) -> str:
    """An ARN's resource part (`capacity-reservation/cr-0…`, `savingsplan/…`): the table stays
    readable on a terminal; `spendlake findings` shows the whole id."""
    is_arn = resource_id.startswith("arn:") and resource_id.count(":") >= 5
    return resource_id.split(":", 5)[5] if is_arn else resource_id


def _print_cluster(result) -> str | None:
    """The Slurm cluster's last 7 days: its cost by job type (idle: GPUs no job held) and the top runs;
    the costliest run's id, whose story `next:` names (None: no cluster, no run)."""
    from datetime import timedelta

    from service.attribution import RunsQuery, attribute, runs
    from service.core.lake import Lake
    from service.core.timewindow import Window

    window = Window(result.as_of - timedelta(days=7), result.as_of)
    lake = Lake.of(result.config)
    clusters = sorted({c.name for c in result.generation.organisation.clusters})
    if not clusters:
        return None
    spend = attribute(lake, result.config, window, by=("job_type",), where={"cluster": clusters})
    rows = [{"job_type": r.values["job_type"], "currency": r.currency, "cost": money_text(r.cost, of=r.currency)}
            for r in sorted(spend.rows, key=lambda r: -r.cost)]
    emit(rows, ["job_type", "currency", "cost"], "table", right=("cost",),
         title=f"cluster {', '.join(clusters)} by job type, last 7 days (idle: GPUs no job held; "
               "unallocated: its other lines, the nodes' volumes and traffic)")
    top = runs(lake, result.config, RunsQuery(window, top=TOP_RUNS))
    # the rest as `spendlake runs --top` shows it: told from a run named other
    rows = [{"run": f"{r.run} ({r.folded_runs} runs)" if r.folded_runs else r.run,
             "job_type": r.values.get("job_type"), "jobs": r.jobs, "state": r.state,
             "cost": money_text(r.cost, of=r.currency),
             "eval cost": money_text(r.eval_cost, of=r.currency) if r.eval_cost else ""} for r in top.rows]
    # at 80 columns the state gives way (said on stderr), never the cost or the eval cost
    emit(rows, ["run", "job_type", "jobs", "state", "cost", "eval cost"], "table", right=("jobs", "cost", "eval cost"),
         whole=("cost", "eval cost"),
         title=f"top runs, last 7 days ({sum(t.runs for t in top.totals)} runs; eval cost: the eval jobs naming "
               "the run, beside its cost)")
    return next((r.run for r in top.rows if not r.folded_runs), None)


@click.command("demo", cls=SingleValueCommand)
@click.option("--dir", "directory", default=str(DEMO_CONFIG.parents[1]), show_default=True,
              type=click.Path(file_okay=False), help="Where the export, the demo config and the lake go.")
@click.option("--days", default=60, show_default=True, type=WholeNumber(1, 400),
              help="Days of billing to generate.")
@click.option("--seed", default=7, show_default=True, type=WholeNumber(min=0), help="Same seed and window, same bill.")
# the organisation reaches back over a year before its window and a month past it: a bill of
# year 1 or 9999 overflowed into a traceback
@click.option("--start", type=Day(datetime(2000, 1, 1), datetime(9000, 12, 31)),
              help="First day (UTC) of the window [default: the DAYS ending yesterday].")
def demo_command(directory: str, days: int, seed: int, start: datetime | None) -> None:
    """Generate a synthetic ML organisation's AWS bill (CUR 2.0), ingest it, show the lake."""
    from service.core.lake import Lake
    from service.cli.demo_org import run_demo
    from service.ingest.status import status

    result = run_demo(directory, days=days, seed=seed, start=start.date() if start else None)
    generation = result.generation
    if result.afresh:
        click.echo(f"note: {result.afresh}", err=True)
    first, last = generation.periods[0].billing_period, generation.periods[-1].billing_period
    click.echo(f"generated {generation.rows:,} line items ({first} to {last}) of a synthetic ML organisation "
               f"in {generation.exports['parquet']}")
    for outcome in result.ingest.outcomes:
        for line in outcome.lines():
            click.echo(line, err=outcome.status == "failed")
    for snapshot in result.inventory:
        for line in snapshot.lines():
            click.echo(line, err=snapshot.failed)
    # whole cents on screen; `spendlake status` shows every decimal
    rows = [{"source": r["source"], "period": r["billing_period"], "currency": r["currency"], "rows": r["rows"],
             "billed": money_text(r["billed_cost"] or 0, of=r["currency"]),
             "effective": money_text(r["effective_cost"] or 0, of=r["currency"]),
             "final": r["final"]} for r in status(Lake.of(result.config))]
    emit(rows, SUMMARY_COLUMNS, "table", title="spendlake status", right=("rows", "billed", "effective"))
    config = shlex.quote(str(Path(os.path.relpath(result.config_path)) if result.config_path.is_relative_to(Path.cwd())
                             else result.config_path))  # a command line to paste, whatever the path holds
    report = Path(result.report.html)
    report = os.path.relpath(report) if report.is_relative_to(Path.cwd()) else report
    _print_spend_and_findings(result)
    top_run = _print_cluster(result)
    click.echo(f"report: {report}")
    click.echo(f"config: {config}")
    # a research lead's questions too: the runs, the costliest one's story (failures, idle), the plan against its actual
    runs = ("runs --since 7d", f"runs --run {shlex.quote(top_run)}") if top_run else ()
    click.echo("next:\n" + "\n".join(f"  {program()} --config {config} {command}" for command in (
        "attribute --since 7d --by project", *runs, "plans", "findings", "commitments --since 30d --by team", "budgets",
        "serve")))
    if result.ingest.failed or any(snapshot.failed for snapshot in result.inventory):
        sys.exit(3)
