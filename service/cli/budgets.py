"""`spendlake budgets`: thin over service.findings.budgets."""

from __future__ import annotations

import click

from service.cli.output import default_format, emit, format_option
from service.cli.params import SingleValueCommand
from service.core.output import one_line
from service.core.units import money_text

COLUMNS = ["budget", "dimension", "value", "currency", "amount", "actual", "used_pct", "forecast",
           "forecast_low", "forecast_high", "forecast_pct", "days_left", "status"]
MONEY = ("amount", "actual", "forecast", "forecast_low", "forecast_high")


@click.command("budgets", cls=SingleValueCommand)
@format_option
@click.pass_obj
def budgets_command(obj, fmt: str | None) -> None:
    """Every budget: month-to-date actual, month-end forecast (with its band), % used, status."""
    from service.core.coverage import data_end
    from service.core.timewindow import iso_utc, utc_now
    from service.findings.budgets import budget_status, early_in_month, judged_month

    as_of = data_end(obj.lake) or utc_now()  # budgets as of the data's end, as the rules and metrics see them
    statuses = budget_status(obj.lake, obj.config, as_of)
    rows = [status.to_json() for status in statuses]
    fmt = fmt or default_format()  # JSON when piped: the same contract as --format json
    if not rows and fmt == "table":
        click.echo("no budgets configured: add a `budgets:` section to the config (see README \"Budgets\")")
        return
    columns = list(COLUMNS)
    if early_in_month(as_of) and fmt != "json":  # early in a month: how the last one ended
        for row in rows:
            last = row["last_month"] or {}
            row["last_month"] = f"{last['month']}: {last['used_pct']}% {last['status']}" if last else ""
        columns.append("last_month")
    if fmt == "table":  # money with thousands separators, as every other table shows it
        rows = [{**row, **{k: money_text(row[k], of=row["currency"]) for k in MONEY}} for row in rows]
    emit(rows, columns, fmt, title=f"spendlake budgets: {judged_month(as_of)}, data through {iso_utc(as_of)}",
         right=(*MONEY, "used_pct", "forecast_pct", "days_left"),
         whole=("amount", "actual", "forecast"), late=("status",))  # exceeded, forecast to exceed: what it comes to
    for status in statuses:
        if status.unmatched_warning:
            click.echo(one_line(f"warning: {status.unmatched_warning}"), err=True)  # the value is the config's text
        if status.warning:
            click.echo(f"warning: {status.warning}", err=True)
        for note in (status.no_spend_note, status.left_out_note):
            if note:
                click.echo(one_line(f"note: {note}"), err=True)
