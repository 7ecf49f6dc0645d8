"""`spendlake plans`: the report's "Plans vs actual" rows (service.report.sections.plans), printed."""

from __future__ import annotations

import click

from service.cli.output import default_format, emit, format_option
from service.core.output import one_line
from service.core.units import money_text


@click.command("plans")
@click.option("--as-of", "day", metavar="YYYY-MM-DD",
              help="Plan and actual to the end of this day (UTC; default: the last whole day of data, as the report).")
@format_option
@click.pass_obj
def plans_command(obj, day: str | None, fmt: str | None) -> None:
    """Registered plans: planned spend to date (low, high) against attributed USD spend, as the report's plans.csv."""
    from service.report.sections.plans import COLUMNS, plans_as_of
    from service.report.write import report_day

    lake = obj.lake
    found = plans_as_of(obj.config, lake, report_day(day, lake=lake, option="--as-of"))
    fmt = fmt or default_format()
    if not found.registered and fmt == "table":
        click.echo(found.notes[0])
        return
    if fmt != "table":
        emit(found.rows, [column.key for column in COLUMNS], fmt)
    else:  # the page's headers (plan low, actual), shorter than the keys: more columns fit a terminal
        shown = [{column.label: money_text(row[column.key]) if column.kind == "money" else row[column.key]
                  for column in COLUMNS} for row in found.rows]
        money = [column.label for column in COLUMNS if column.kind == "money"]
        emit(shown, [column.label for column in COLUMNS], fmt, title=f"plans vs actual, to the end of {found.day} (USD)",
             right=money, whole=("plan low", "plan high", "actual", "status"))
    for note in found.notes:  # unknown values, spend in other currencies, past the data, no plans (CSV, JSON)
        click.echo(one_line(f"note: {note}"), err=True)
