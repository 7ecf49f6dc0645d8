"""`spendlake plans`: the report's "Plans vs actual" rows (service.report.sections.plans), printed;
`spendlake plans remove NAME` removes a registered plan."""

from __future__ import annotations

import shlex

import click

from service.cli.output import Lines, confirmed, default_format, emit, format_option
from service.cli.params import SingleValueGroup
from service.cli.run_story import moment_text
from service.core.errors import UsageError
from service.core.output import one_line
from service.core.timewindow import minute_text
from service.core.units import money_text


@click.group("plans", cls=SingleValueGroup, invoke_without_command=True)
@click.option("--as-of", "day", metavar="YYYY-MM-DD",
              help="Plan and actual to the end of this day (UTC; default: the last whole day of data, as the report).")
@format_option
@click.pass_context
def plans_command(ctx: click.Context, day: str | None, fmt: str | None) -> None:
    """Registered plans: planned spend to date (low, high) against attributed USD spend, as the report's
    plans.csv; `plans remove NAME` removes one."""
    if ctx.invoked_subcommand is not None:
        return
    from service.report.sections.plans import COLUMNS, plans_as_of
    from service.report.write import report_day

    lake = ctx.obj.lake
    found = plans_as_of(ctx.obj.config, lake, report_day(day, lake=lake, option="--as-of"))
    fmt = fmt or default_format()
    if not found.registered and fmt == "table":
        click.echo(found.notes[0])
        return
    if fmt != "table":
        emit(found.rows, [column.key for column in COLUMNS], fmt)
    else:  # the page's columns, headers (actual) and times (2026-11-20 00:00, UTC as the title says), shorter
        # than the keys and ISO times: more columns fit a terminal (plan total at 150); each low and high as one range
        shown = [column for column in COLUMNS if column.in_html]
        ranges = tuple(column.label for column in shown if column.to)
        emit([_shown(row, shown) for row in found.rows], [column.label for column in shown], fmt,
             title=f"plans vs actual, to the end of {found.day} (USD; times UTC; plan to date: both MFU scenarios "
                   "spend the GPUs' price an hour until the faster run ends)",
             right=(*ranges, "actual"), whole=(*ranges, "actual", "status"))
    for note in found.notes:  # unknown values, spend in other currencies, past the data, no plans (CSV, JSON)
        click.echo(one_line(f"note: {note}"), err=True)


def _shown(row: dict, columns: list) -> dict:
    """A row of plans.csv as the table shows it: by the page's labels, each low and high as one range."""
    return {column.label: _range(row[column.key], row[column.to]) if column.to else _cell(row[column.key], column.kind)
            for column in columns}


def _range(low, high) -> str | Lines:
    """One figure where the scenarios agree (a plan to date before its faster run ends, but for storage's
    cents), else `low to` over `high` on the next line (narrower than the two figures side by side: start
    and end still fit 150 columns), as the report's page shows them (service.report.render.display)."""
    return money_text(low) if low == high else Lines((f"{money_text(low)} to", money_text(high)))


def _cell(value, kind: str):
    return money_text(value) if kind == "money" else moment_text(value) if kind == "time" else value


@plans_command.command("remove")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def plans_remove(obj, name: str, yes: bool) -> None:
    """Remove the registered plan NAME (the report and `spendlake plans` no longer show it)."""
    from service.planning.plans import check_registered, remove_plan

    check_registered(obj.lake, name)  # before asking: a name that is not there needs no answer
    if not yes and not confirmed(one_line(f"remove plan {name!r} from the lake at {obj.lake.root}?")):
        raise UsageError("not confirmed: nothing was removed", where="plans remove",
                         hint=f"answer y, or run `spendlake plans remove {shlex.quote(name)} --yes` (where no one can answer)")
    removed = remove_plan(obj.lake, name)
    what = f" ({removed.project}, from {minute_text(removed.start)} UTC)" if removed else ""
    click.echo(one_line(f"removed plan {name!r}{what}"))
