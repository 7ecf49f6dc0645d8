"""`spendlake budgets`: thin over service.findings.budgets."""

from __future__ import annotations

import click

from service.cli.output import default_format, emit, format_option
from service.cli.params import SingleValueCommand
from service.core.output import one_line
from service.core.units import money_text

COLUMNS = ["budget", "dimension", "value", "currency", "amount", "actual", "used_pct", "forecast",
           "forecast_low", "forecast_high", "forecast_pct", "days_left", "status"]
ADDED = ["cost"]  # columns added since: last, after last_month too, so a reader by position keeps its columns
MONEY = ("amount", "actual", "forecast", "forecast_low", "forecast_high")


@click.command("budgets", cls=SingleValueCommand)
@format_option
@click.pass_obj
def budgets_command(obj, fmt: str | None) -> None:
    """Every budget: month-to-date actual, month-end forecast (with its band), % used, status."""
    from service.core.timewindow import iso_utc
    from service.findings.budgets import NO_BUDGETS, budgets_as_of, early_in_month, judged_month

    found = budgets_as_of(obj.lake, obj.config)
    as_of = found.as_of
    rows = [status.to_json() for status in found.statuses]
    fmt = fmt or default_format()  # JSON when piped: the same contract as --format json
    if not rows and fmt == "table":
        click.echo(NO_BUDGETS)
        return
    columns = list(COLUMNS)
    if early_in_month(as_of) and fmt != "json":  # early in a month: how the last one ended
        for row in rows:
            last = row["last_month"] or {}
            row["last_month"] = f"{last['month']}: {last['used_pct']}% {last['status']}" if last else ""
        columns.append("last_month")
    columns += ADDED
    if fmt == "table":  # money with thousands separators, as every other table shows it
        rows = [{**row, **{k: money_text(row[k], of=row["currency"]) for k in MONEY}} for row in rows]
    through = f"data through {iso_utc(as_of)}" if found.has_data else f"no data in the lake as of {iso_utc(as_of)}"
    emit(rows, columns, fmt, title=f"spendlake budgets: {judged_month(as_of)}, {through}",
         right=(*MONEY, "used_pct", "forecast_pct", "days_left"),
         whole=("amount", "actual", "forecast"), late=("status",))  # exceeded, forecast to exceed: what it comes to
    for kind, text in found.said:  # a value is the config's text: on one line
        click.echo(one_line(f"{kind}: {text}"), err=True)
