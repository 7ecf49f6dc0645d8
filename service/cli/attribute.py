"""`spendlake attribute`: thin over service.attribution (rendering only)."""

from __future__ import annotations

import logging
from collections import Counter
from decimal import Decimal

import click

from service.cli.output import Lines, default_format, echo_data, emit, format_option
from service.cli.params import SingleValueCommand, WholeNumber, given_once
from service.core.output import cut, to_json
from service.core.timewindow import fixed_end, minute_text
from service.core.units import currency_text, exact_text, is_tty, money_text, percent_change_text
from service.report.rounding import gaps
from service.report.shares import cli_money, share_notes, share_pct

log = logging.getLogger(__name__)

COSTS = ("billed", "effective", "list")
GRANULARITY = ("total", "day", "week", "month")


def _columns(result) -> list[str]:
    columns = list(result.by)
    if result.granularity != "total":
        columns.insert(0, "period")
    columns += ["currency", "cost"]
    if result.compare:
        columns += ["previous_cost", "change", "change_pct"]
    return columns


def _share(cost: Decimal, total: Decimal) -> str:
    share = share_pct(cost, total)
    return "—" if share is None else f"{share}%"


def render(result, fmt: str | None) -> None:
    """The answer in `fmt`; how much of the window lies before the lake's first bill
    (`result.unbilled`) or after the data's end (`result.unreached`) in the JSON's notes, the
    table's coverage line, else (CSV) on stderr."""
    data = result.to_json()
    if (fmt or "") == "json" or (fmt is None and not is_tty()):
        echo_data(to_json(data))  # `unbilled` is among its notes: a window reaching back 30 days says it often
        return
    columns = _columns(result)
    if fmt != "csv" and not data["rows"]:  # a table of nothing: the command's reason line says why
        if result.unreached:  # and where the data ends, of a window after it
            click.echo(coverage_line(result))
        return
    numbers = ("cost", "previous_cost", "change", "change_pct")
    exact = [{**row, **{k: Decimal(row[k]) for k in numbers if row.get(k) is not None}} for row in data["rows"]]
    if fmt == "csv":  # money as numbers, so a negative cost stays a number (not a neutralised "-")
        emit(exact, columns + (["explain"] if result.explain else []), "csv")
        if result.unbilled:
            click.echo(f"note: {result.unbilled}", err=True)
        if result.unreached:
            click.echo(f"note: {result.unreached} (data through {_utc(result.data_through)})", err=True)
        return
    totals = {t["currency"]: Decimal(t["cost"]) for t in data["totals"]}
    money = ("cost", "previous_cost", "change")
    rows = [{**row, **{k: money_text(row[k], of=row["currency"]) for k in money if k in row},
             "currency": currency_text(row["currency"]),
             **({"change_pct": percent_change_text(figures["change_pct"])} if "change_pct" in row else {}),
             "share": _share(Decimal(row["cost"]), totals[row["currency"]])} for row, figures in zip(data["rows"], exact)]
    footer = {columns[0]: "total", "currency": Lines(currency_text(c) for c in totals)}
    for key in money:
        if key in columns:
            footer[key] = Lines(money_text(t[key], of=t["currency"]) for t in data["totals"])
    title = f"{result.cost} cost by {', '.join(result.by)}, {data['since']} → {data['until']}"
    if result.previous:
        title += f" against {data['previous_since']} → {data['previous_until']}"
    emit(rows, columns + ["share"], "table", title=title, footer=footer,
         right=("cost", "share", "previous_cost", "change", "change_pct"), whole=("cost",))
    for line in rounding_notes(exact, tuple(key for key in money if key in columns)):
        click.echo(line)
    for line in share_notes(exact, "cost", lambda row: totals[row["currency"]], cli_money):
        click.echo(f"note: {line[0].lower()}{line[1:]}")
    click.echo(coverage_line(result, result.unbilled))
    if result.explain:
        detail = [{**{d: row[d] for d in columns if d not in ("cost", "previous_cost", "change", "change_pct")},
                   "dimension": part["dimension"], "placed by": part["how"],
                   "cost": money_text(part["cost"], of=row["currency"])}
                  for row in data["rows"] for part in _jobs_folded(row["explain"])]
        keys = [c for c in columns if c not in ("cost", "previous_cost", "change", "change_pct")]
        # which dimension `placed by` placed is what --explain answers: key columns give way first
        emit(detail, keys + ["dimension", "placed by", "cost"], "table", title="where each row's cost came from",
             right=("cost",), whole=("cost", "placed by", "dimension"))
        if any(part["placed by"].endswith(" more jobs") for part in detail):
            click.echo(f"note: each row lists its {SHOWN_JOBS} largest jobs per dimension; "
                       "--format csv or json lists each job")


SHOWN_JOBS = 5  # job parts a row's explain table lists (a cluster's month has 200,000 jobs: 46,793 lines)


def _jobs_folded(parts: list[dict]) -> list[dict]:
    """A row's parts for the table: per dimension its SHOWN_JOBS largest job parts (the API
    sorts them largest first), the others summed on one line; CSV and JSON list each job. A
    `job:<id>` the row holds twice (two sources' same id, a requeued job's attempts) is told
    apart by its cluster and state after it, as the JSON tells them (`cluster`, `job_state`),
    and its record where those are the same (two attempts that ended alike: `record`)."""
    shown, listed, rest = [], Counter(), {}
    told = ("cluster", "job_state")  # those a part has: a job of no cluster says only its state
    twice = Counter((part["dimension"], part["how"]) for part in parts)
    alike = Counter((part["dimension"], part["how"], *(part.get(k) for k in told)) for part in parts)

    def said(part: dict) -> str:
        words = [str(part[k]) for k in told if part.get(k) is not None]
        if alike[(part["dimension"], part["how"], *(part.get(k) for k in told))] > 1 and part.get("record"):
            words.append(part["record"])
        return f"{part['how']} ({', '.join(words)})"

    parts = [{**part, "how": said(part)} if twice[(part["dimension"], part["how"])] > 1 else part for part in parts]
    for part in parts:
        dim = part["dimension"]
        if not part["how"].startswith("job:"):
            shown.append(part)
        elif listed[dim] < SHOWN_JOBS:
            listed[dim] += 1
            shown.append(part)
        else:
            count, cost = rest.get(dim, (0, Decimal(0)))
            rest[dim] = (count + 1, cost + Decimal(part["cost"]))
    return shown + [{"dimension": dim, "how": f"{count:,} more jobs", "cost": cost}
                    for dim, (count, cost) in rest.items()]


def rounding_notes(rows: list[dict], money: tuple[str, ...]) -> list[str]:
    """Per currency, the money columns whose rows, each shown rounded, add up to other than the
    total row (EUR 1,000.25 and -2.13 against 998.13, the whole being 998.125): finance adding up
    the table is told by how much, as under the report's spend tables."""
    return [f"note: the {currency_text(currency)} rows, each shown rounded, do not add up to the total row: " +
            "; ".join(f"{gap.column} {gap.amount(gap.rounded)} against {gap.amount(gap.whole)} ({gap.exact_text} exact)"
                      for gap in missed) + "; the difference is rounding (--format csv or json keep every decimal)"
            for (currency,), missed in gaps(rows, ("currency",), money).items()]


def coverage_line(result, unbilled: str | None = None) -> str:
    """`data through 2026-11-29 00:00 UTC`, with the sources that lag behind and how much of
    the window runs past the data, or before the lake's first bill (`unbilled`, with_notes')."""
    end = result.data_through
    if end is None:
        return "data through: no usage data in the lake"
    line = f"data through {_utc(end)}"
    lagging = [f"{name} {_utc(moment)}" if moment else f"{name} no usage data"
               for name, moment in result.sources if moment != end]
    if lagging:
        line += f" (behind: {', '.join(lagging)})"
    if result.unreached:
        line += f"; {result.unreached}"
    return line + (f"; {unbilled}" if unbilled else "")


def _utc(moment) -> str:
    return f"{minute_text(moment)} UTC"


CHECK_COLUMNS = ["source", "billing_period", "currency", "cost", "source_total", "attributed_total", "difference",
                 "rounding", "ok"]


def render_check(results, fmt: str | None) -> None:
    """One row per source, period, currency and cost; `rounding` is what the lake's 12
    decimals rounded away from the delivered values (the delivery's own sum is source_total
    + rounding), said once more under a table when it is not zero."""
    table = (fmt or default_format()) == "table"
    rows = [{"source": r.source, "billing_period": r.billing_period,
             "currency": currency_text(r.currency) if table else r.currency, "cost": r.cost,
             "source_total": r.source_total, "attributed_total": r.attributed_total, "difference": r.difference,
             "rounding": r.rounding, "ok": r.ok} for r in results]
    emit(rows, CHECK_COLUMNS, fmt, title="attributed vs source, per billing period",
         right=("source_total", "attributed_total", "difference", "rounding"), whole=("difference", "ok"))
    rounded = [r for r in results if r.rounding]
    if rounded and table:
        click.echo("rounding: values with more than 12 decimals are stored rounded half away from zero; "
                   "rounded away: " + "; ".join(f"{r.source} {r.billing_period} {r.cost} {exact_text(r.rounding)} "
                                                 f"{currency_text(r.currency)}" for r in rounded), err=True)


@click.command("attribute", cls=SingleValueCommand)
@click.option("--since", help="Start of the window: 7d, 24h, 30d, mtd, 2026-11-01 or an ISO time (UTC).")
@click.option("--until", help="End of the window (default: the end of the data, `data through`; "
              "3d: 3 days before it).")
@click.option("--by", "by", multiple=True, default=["team"], show_default=True, callback=given_once,
              help="Dimensions, comma-separated.")
@click.option("--where", "where", multiple=True, metavar="DIM=VALUE", help="Keep rows with this value (repeatable).")
@click.option("--cost", type=click.Choice(COSTS), default="billed", show_default=True)
@click.option("--granularity", type=click.Choice(GRANULARITY), default="total", show_default=True)
@click.option("--compare", is_flag=True, help="Add the previous window of the same length and the change.")
@click.option("--top", type=WholeNumber(min=1), help="Keep the N largest rows, fold the rest into `other`.")
@click.option("--explain", is_flag=True, help="Show how much each tag key, rule, shared split or default placed.")
@click.option("--check", is_flag=True, help="Reconcile: Σ attributed = Σ source per billing period and currency; exit 3 if not.")
@click.option("--engine", type=click.Choice(["duckdb", "spark"]),
              help="What runs the attribution SQL (default: config `engine.kind`, else duckdb).")
@format_option
@click.pass_obj
def attribute(obj, since, until, by, where, cost, granularity, compare, top, explain, check, engine, fmt) -> None:
    """Who spent what: cost per team, project, experiment (or any declared dimension)."""
    from service.attribution import AttributionQuery, attribute_query, lacking_cost, no_bill_note, reconcile, with_notes
    from service.core import bill_overlap
    from service.core.coverage import data_end, empty_lake_error
    from service.core.errors import ReconciliationError

    config, lake = obj.config, obj.lake
    engine_config = config.engine.model_copy(update={"kind": engine}) if engine else config.engine
    read_from = engine_config.lake if engine_config.kind == "spark" and engine_config.lake else config.lake
    if check:
        unused = [f"--{name}" for name, value in (("since", since), ("until", until), ("where", where),
                                                    ("granularity", granularity != "total"), ("compare", compare),
                                                    ("top", top), ("explain", explain)) if value]
        if unused:  # the check is per whole billing period, never of a window
            click.echo(f"warning: --check reconciles every billing period in whole; {', '.join(unused)} "
                       "left out", err=True)
        results = reconcile(lake, config, engine=engine_config)
        render_check(results, fmt)
        if not results:  # no bill ties out to nothing: a check that passed would say it did (report: exit 3 too)
            raise empty_lake_error(lake, "nothing to reconcile", read_from)
        for cost in ("billed", "effective"):
            lacking = lacking_cost(lake, cost)
            if lacking:
                click.echo(f"note: {', '.join(lacking)} delivered no {cost} cost: the {cost} rows for these "
                           "compare 0 with 0 (status shows null)", err=True)
        for overlap in bill_overlap.lake_overlaps(lake):  # a warning: the tie-out holds, and one payer's
            click.echo(f"warning: {overlap.sentence()}", err=True)  # member accounts may export apart (README)
        bad = [r for r in results if not r.ok]
        if bad:
            raise ReconciliationError(
                "attributed cost differs from source cost: " + "; ".join(
                    f"{r.source} {r.billing_period} {currency_text(r.currency)} {r.cost}: {format(r.difference, 'f')}"
                    for r in bad),
                hint="this is a bug in attribution; please report it with the config")
        return
    query = AttributionQuery.parse(config, since=since, until=until, by=by, where=where, cost=cost,
                                   granularity=granularity, top=top, compare=compare, explain=explain,
                                   end=None if fixed_end(until) else data_end(lake))
    answer = attribute_query(lake, config, query, engine=engine_config, job_rules=True)  # the job rules on its connection
    result = with_notes(lake, config, query, answer, engine=engine_config)
    for dim, value, hint in result.unmatched[:MAX_WARNINGS]:
        click.echo(f"warning: --where {dim}={cut(value)} matches nothing in the lake; {hint}", err=True)
    if len(result.unmatched) > MAX_WARNINGS:  # a pasted list of thousands: a screenful, not thousands of lines
        click.echo(f"warning: {len(result.unmatched) - MAX_WARNINGS:,} more --where values match nothing", err=True)
    for note in result.reserved:
        click.echo(f"warning: --where {note}", err=True)
    if note := no_bill_note(lake, result, read_from):
        click.echo(note, err=True)
        if (fmt or ("table" if is_tty() else "json")) == "table":
            return
    render(result, fmt)
    # the periods the window cuts, why it or the previous window has no cost, a cost deliveries lack
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    for warning in result.warnings:  # job rules no job meets, over-booked hours and what they come from
        click.echo(f"warning: {warning}", err=True)
    for line in result.quiet:  # a rule no job of this window met, though others did: a quiet day
        log.info("%s", line)


MAX_WARNINGS = 10
