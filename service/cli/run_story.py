"""`spendlake runs --run X`: one run's story as tables, CSV (its jobs) or JSON (rendering only;
service/attribution/run_story.py computes it)."""

from __future__ import annotations

from decimal import Decimal

import click

from service.cli.output import emit
from service.core.units import money_text

JOB_COLUMNS = ("run", "job", "record", "cluster", "job_type", "state", "start", "end", "gpus", "gpu_hours", "nodes",
               "instance_ids", "cost", "currency", "shared")
JOB_TABLE = {"job": "job", "cluster": "cluster", "job_type": "job type", "state": "state", "start": "start",
             "end": "end", "gpus": "GPUs", "gpu_hours": "GPU-h", "cost": "cost", "currency": "currency",
             "nodes": "nodes"}
NODES_SHOWN = 3


def _nodes(job: dict) -> str:
    names = job["instance_ids"] or job["nodes"]
    if len(names) <= NODES_SHOWN:
        return ",".join(names)
    return f"{names[0]} … {names[-1]} ({len(names)})"


def _split_table(data: dict, key: str, title: str, total: str) -> None:
    rows = [{key: f"{s[key] or '-'}{' (unfinished)' if s.get('unfinished') else ''}", "currency": s["currency"] or "",
             "jobs": s["jobs"], "cost": money_text(s["cost"])} for s in data[f"by_{key}"]]
    emit(rows, [key, "jobs", "currency", "cost"], "table", title=title, right=("jobs", "cost"), whole=("cost",),
         footer={key: "total", "cost": total})


def render_story(result, fmt: str) -> None:
    """Print the story of `result.query.run`: as CSV its jobs, one line per attempt; as tables
    (after the run's row) its jobs, its cost by job type and by state, and the idle beside it."""
    data = result.to_json()
    run = data["rows"][0]["run"] if data["rows"] else result.query.run  # as the lake spells it
    if fmt == "csv":
        emit([{"run": run, **job, "nodes": ";".join(job["nodes"]), "instance_ids": ";".join(job["instance_ids"])}
              for job in data["jobs"]], JOB_COLUMNS, "csv")
        return
    if not data["jobs"]:  # no job in the window: the notes on stderr say why
        return
    rows = [{JOB_TABLE[k]: v for k, v in job.items() if k in JOB_TABLE}
            | {"cost": money_text(job["cost"]) + (" *" if job["shared"] else ""),
               "GPUs": format(Decimal(job["gpus"]), ",f") if job["gpus"] else "",
               "GPU-h": f"{Decimal(job['gpu_hours']):,.1f}" if job["gpu_hours"] else "",
               "start": (job["start"] or "")[:16], "end": (job["end"] or ("running" if job["start"] else ""))[:16],
               "currency": job["currency"] or "", "nodes": _nodes(job)}
            for job in data["jobs"]]
    totals = data["totals"]
    total = "\n".join(money_text(t["cost"]) for t in totals)
    emit(rows, list(JOB_TABLE.values()), "table", title=f"jobs of run {run} (each attempt)",
         footer={"job": "total", "currency": "\n".join(t["currency"] or "" for t in totals), "cost": total},
         right=("GPUs", "GPU-h", "cost"), whole=("cost",))
    if any(job["shared"] for job in data["jobs"]):
        click.echo("* attempts of one job id that ended in one state share its cost by their GPU-hours")
    _split_table(data, "job_type", f"run {run} by job type", total)
    _split_table(data, "state", f"run {run} by final state (unfinished: the failed re-runs)", total)
    for idle in data["idle"]:
        share = f" ({Decimal(idle['share']) * 100:.1f}%)" if idle["share"] else ""
        click.echo(f"idle beside the run, not in its cost: {idle['currency']} {money_text(idle['cost'])}{share} of the "
                   f"{money_text(idle['held_cost'])} its instances cost in the hours it held them (the cluster's idle; "
                   "the row's idle share is of those instances over the whole window)")
