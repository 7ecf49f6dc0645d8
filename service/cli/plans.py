"""`spendlake plans`: the report's "Plans vs actual" rows (service.report.sections.plans), printed."""

from __future__ import annotations

from datetime import timedelta

import click

from service.cli.output import default_format, emit, empty_lake_line, format_option
from service.core.output import one_line
from service.core.units import money_text


@click.command("plans")
@click.option("--as-of", "day", metavar="YYYY-MM-DD",
              help="Plan and actual to the end of this day (UTC; default: the last whole day of data, as the report).")
@format_option
@click.pass_obj
def plans_command(obj, day: str | None, fmt: str | None) -> None:
    """Registered plans: planned spend to date (low, high) against attributed USD spend, as the report's plans.csv."""
    from service.core.coverage import data_end
    from service.core.errors import DataError
    from service.core.timewindow import day_start
    from service.report.sections.plans import COLUMNS, plans_section
    from service.report.write import report_day

    lake = obj.lake
    as_of = report_day(day, lake=lake, option="--as-of")
    section = plans_section(obj.config, lake, as_of)
    fmt = fmt or default_format()
    if not section.tables and fmt == "table":
        click.echo(section.note)
        return
    if section.tables and not lake.snapshot().checks:  # every actual $0, "under plan", with no bill read
        raise DataError(empty_lake_line(lake, nothing="no actual spend to set against the plans"))
    rows = [{column.key: row.get(column.key) for column in COLUMNS} for table in section.tables for row in table.rows]
    if fmt != "table":
        emit(rows, [column.key for column in COLUMNS], fmt)
    else:  # the page's headers (plan low, actual), shorter than the keys: more columns fit a terminal
        shown = [{column.label: money_text(row[column.key]) if column.kind == "money" else row[column.key]
                  for column in COLUMNS} for row in rows]
        money = [column.label for column in COLUMNS if column.kind == "money"]
        emit(shown, [column.label for column in COLUMNS], fmt, title=f"plans vs actual, to the end of {as_of} (USD)",
             right=money, whole=("plan low", "plan high", "actual", "status"))
    # the section's: values no cost line carries, spend in other currencies, no plans (CSV, JSON)
    notes = [section.note] if section.note else []
    end = data_end(lake)
    if section.tables and end is not None and end < day_start(as_of) + timedelta(days=1):
        notes.append(f"the lake's billing data ends at {end:%Y-%m-%d %H:%M} UTC: spend after it is not in the "
                     "actual yet")
    for note in notes:
        click.echo(one_line(f"note: {note}"), err=True)
