"""`spendlake runs --run X`: one run's story as tables, CSV (its jobs) or JSON (rendering only;
service/attribution/run_story.py computes it)."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

import click

from service.cli.attribute import coverage_line
from service.cli.output import Lines, emit
from service.core.output import one_line
from service.core.units import amounts_text, money_text

JOB_COLUMNS = ("run", "job", "record", "cluster", "job_type", "state", "start", "end", "gpus", "gpu_hours", "nodes",
               "instance_ids", "cost", "currency", "shared", "restart", "relaunched")
# The row's idle share (of its instances over the whole window, held by the run or not), named so
# apart from the idle line's, of the hours the run held them (break49b: 11.3% beside 1.4%)
IDLE_SHARE = "idle share, whole window (its instances)"
IDLE_LINE = ("idle in the hours it held its instances, beside the run, not in its cost: {cost}{share} of the {held} "
             "those instance-hours cost (the cluster's idle){row}")
# What the eval jobs naming the run cost (their parent_run), beside its cost, not in it
EVAL_COST = "eval cost (eval jobs naming it, beside its cost)"
# The run's row, one field a line: a row of 18 columns does not fit a terminal.
SUMMARY = (("team", "team"), ("project", "project"), ("experiment", "experiment"), ("job_type", "job type"),
           ("cluster", "cluster"), ("user", "user"), ("jobs", "jobs (restarts)"), ("gpus", "GPUs (most held)"),
           ("gpu_hours", "GPU-hours"), ("cost", "cost"), ("eval_cost", EVAL_COST), ("cost_per_gpu_hour", "$/GPU-hour"),
           ("idle_share", IDLE_SHARE), ("state", "state (last job)"), ("start", "start"),
           ("end", "end"))
NODES_SHOWN = 3


def number_text(text: str | None, places: int) -> str:
    """`1,234.5` for `places` 1: every value of a column with as many decimals."""
    return "" if text is None else f"{Decimal(text):,.{places}f}"


def moment_text(text: str | None, running: bool = False) -> str:
    """`2026-11-30 20:02` (UTC, as the window says); no end while it runs: `running`."""
    return text[:16].replace("T", " ") if text else ("running" if running else "")


def eval_text(row: dict, named: bool = False) -> str:
    """A row's eval cost as money (`named`: with its currency, `USD 30.00`), blank when no eval job names the run."""
    if not Decimal(row["eval_cost"]):
        return ""
    return money_text(row["eval_cost"], row["currency"]) if named else money_text(row["eval_cost"], of=row["currency"])


def _summary(row: dict, price: Decimal | None) -> dict[str, str]:
    """`price`: the exact cost per GPU-hour, rounded once here (RunRow.exact_cost_per_gpu_hour)."""
    cost = money_text(row["cost"], row["currency"]) if row["currency"] else f"{money_text(row['cost'])} (none billed)"
    shown = {**row, "jobs": f"{row['jobs']} ({row['restarts']})",
             "gpus": number_text(row["gpus"], 0) if row["gpus"] else "", "gpu_hours": number_text(row["gpu_hours"], 1),
             "cost": cost, "eval_cost": eval_text(row, named=True),
             "cost_per_gpu_hour": money_text(price, of=row["currency"]),
             "idle_share": f"{Decimal(row['idle_share']) * 100:.1f}%" if row["idle_share"] else "",
             "start": moment_text(row["start"]), "end": moment_text(row["end"], running=bool(row["start"]))}
    return {label: str(shown.get(key) or "") for key, label in SUMMARY}


def _nodes(job: dict) -> str:
    names = job["instance_ids"] or job["nodes"]
    if len(names) <= NODES_SHOWN:
        return ",".join(names)
    return f"{names[0]} … {names[-1]} ({len(names)})"


def _jobs_table(data: dict, run: str, total: Lines) -> None:
    jobs = data["jobs"]
    rows = [{"job": job["job"], "restart": "yes" if job["restart"] else "", "job type": job["job_type"],
             "state": job["state"], "start": moment_text(job["start"]),
             "end": moment_text(job["end"], running=bool(job["start"])),
             "GPUs": number_text(job["gpus"], 0) if job["gpus"] else "", "GPU-h": number_text(job["gpu_hours"], 1),
             "cost": money_text(job["cost"], of=job["currency"]) + (" *" if job["shared"] else ""),
             "currency": job["currency"] or "", "cluster": job["cluster"], "nodes": _nodes(job)} for job in jobs]
    columns = ["job", "restart", "job type", "state", "start", "end", "GPUs", "GPU-h", "cost", "currency", "cluster",
               "nodes"]
    if not any(job["restart"] for job in jobs):  # none re-ran failed work: no column of blanks
        columns.remove("restart")
    if len({job["currency"] for job in jobs}) == 1:  # one currency: the summary names it
        columns.remove("currency")
    window = f"{moment_text(data['since'])} → {moment_text(data['until'])} UTC"  # a run's own span starts mid-day
    emit(rows, columns, "table", title=f"jobs of {run} (each attempt), {window}",
         footer={"job": "total", "cost": total}, right=("GPUs", "GPU-h", "cost"), whole=("cost",))
    if any(job["shared"] for job in jobs):
        click.echo("* attempts of one job id that ended in one state share its cost by their GPU-hours")


RERUN_LINE = "failed and run again (the failed-reruns rule's count: {states}, then an attempt of the same work)"
UNFINISHED_LINE = "unfinished attempts (failed, cancelled, timed out, preempted, requeued, ...)"


def _split_table(data: dict, key: str, title: str, total: Lines) -> None:
    rows = [{key: f"{s[key] or '-'}{' (unfinished)' if s.get('unfinished') else ''}", "currency": s["currency"] or "",
             "jobs": s["jobs"], "cost": money_text(s["cost"], of=s["currency"])} for s in data[f"by_{key}"]]
    columns = [key, "jobs", "currency", "cost"] if len({s["currency"] for s in data[f"by_{key}"]}) > 1 else \
        [key, "jobs", "cost"]
    emit(rows, columns, "table", title=title, right=("jobs", "cost"), whole=("cost",),
         footer={key: "total", "cost": total})


def _part_text(part: dict) -> str:
    """`USD 100.00 of 160.00 (62.5%)`: a figure of the story's (run_figures.Part.to_json), its
    percentage from the exact sums, rounded once."""
    cost, of = Decimal(part["cost"]), Decimal(part["run_cost"])
    share = f" of {money_text(of, of=part['currency'])} ({cost / of * 100:.1f}%)" if of else ""
    return f"{money_text(cost, part['currency'])}{share}"


def render_story(result, fmt: str) -> None:
    """Print the story of `result.query.run`: as CSV its jobs, one line per attempt; as tables
    its row (one field a line), its jobs, its cost by job type and by final state, what of it did
    not finish and what failed and was run again (its figures, service/attribution/run_figures.py),
    the idle beside it."""
    data = result.to_json()
    run = data["rows"][0]["run"] if data["rows"] else result.query.run  # as the lake spells it
    if fmt == "csv":
        emit([{"run": run, **job, "nodes": ";".join(job["nodes"]), "instance_ids": ";".join(job["instance_ids"])}
              for job in data["jobs"]], JOB_COLUMNS, "csv")
        return
    if not data["rows"]:  # no job in the window: the notes on stderr say why
        return
    summaries = [_summary(row, held.exact_cost_per_gpu_hour) for row, held in zip(data["rows"], result.rows)]
    apart: dict[str | None, Decimal] = defaultdict(Decimal)  # eval runs in a currency no row is in (a note says it)
    for cost in data["evals"]:
        if cost["currency"] not in {row["currency"] for row in data["rows"]}:
            apart[cost["currency"]] += Decimal(cost["cost"])
    if apart:  # the summary's eval cost is the sum of the eval runs listed, per currency
        summaries[0][EVAL_COST] = ", ".join(filter(None, (summaries[0][EVAL_COST], amounts_text(apart.items()))))
    emit([{"": label, **{f"run {run}" + (f" ({i + 1})" if i else ""): s[label] for i, s in enumerate(summaries)}}
          for _, label in SUMMARY], ["", *(f"run {run}" + (f" ({i + 1})" if i else "") for i in range(len(summaries)))],
         "table", title=f"{result.query.cost} cost, {data['since']} → {data['until']}", whole=(f"run {run}",))
    total = Lines(money_text(t["cost"], of=t["currency"]) for t in data["totals"])
    if data["jobs"]:
        _jobs_table(data, run, total)
        _split_table(data, "job_type", "by job type", total)
        _split_table(data, "state", "by final state", total)
        reruns = data["failed_reruns"]
        for part in data["unfinished"]:
            if not part["jobs"]:  # every attempt in this currency finished
                continue
            click.echo(one_line(f"{UNFINISHED_LINE}: {_part_text(part)}"))
            if reruns and reruns["currency"] == part["currency"]:
                click.echo(one_line(f"{RERUN_LINE.format(states=', '.join(reruns['states']))}: {_part_text(reruns)}"))
    if data["evals"]:  # their own runs' cost: beside the run's, not in it
        columns = ["eval run", "currency", "cost"] if len({e["currency"] for e in data["evals"]}) > 1 else \
            ["eval run", "cost"]
        emit([{"eval run": e["run"], "currency": e["currency"] or "", "cost": money_text(e["cost"], of=e["currency"])}
              for e in data["evals"]], columns, "table", right=("cost",), whole=("cost",),
             title=f"eval runs naming {run}")
    shares = {row["currency"]: row["idle_share"] for row in data["rows"] if row["idle_share"]}
    for idle in data["idle"]:
        share = f" ({Decimal(idle['share']) * 100:.1f}%)" if idle["share"] else ""
        held = money_text(idle["held_cost"], of=idle["currency"])
        row = (f"; the row's {IDLE_SHARE!r}, {Decimal(shares[idle['currency']]) * 100:.1f}%, is of the same instances "
               "over the whole window, held by the run or not") if idle["currency"] in shares else ""
        click.echo(one_line(IDLE_LINE.format(cost=money_text(idle["cost"], idle["currency"]), share=share,
                                             held=held, row=row)))
    click.echo(coverage_line(result))
