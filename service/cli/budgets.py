"""`spendlake budgets`: thin over service.findings.budgets."""

from __future__ import annotations

import click

from service.cli.output import emit, format_option

COLUMNS = ["budget", "dimension", "value", "currency", "amount", "actual", "used_pct", "forecast",
           "forecast_low", "forecast_high", "forecast_pct", "days_left", "status"]


@click.command("budgets")
@format_option
@click.pass_obj
def budgets_command(obj, fmt: str | None) -> None:
    """Every budget: month-to-date actual, month-end forecast (with its band), % used, status."""
    from service.core.coverage import data_end
    from service.core.timewindow import utc_now
    from service.findings.budgets import FIRST_DAYS, budget_status

    as_of = data_end(obj.lake) or utc_now()  # budgets as of the data's end, as the rules and metrics see them
    statuses = budget_status(obj.lake, obj.config, as_of)
    rows = [status.to_json() for status in statuses]
    if not rows and (fmt or "table") == "table":
        click.echo("no budgets configured: add a `budgets:` section to the config (see README \"Budgets\")")
        return
    columns = list(COLUMNS)
    if as_of.day <= FIRST_DAYS and (fmt or "table") != "json":  # early in a month: how the last one ended
        for row in rows:
            last = row["last_month"] or {}
            row["last_month"] = f"{last['month']}: {last['used_pct']}% {last['status']}" if last else ""
        columns.append("last_month")
    emit(rows, columns, fmt, title="spendlake budgets",
         right=("amount", "actual", "used_pct", "forecast", "forecast_low", "forecast_high", "forecast_pct"),
         whole=("amount", "actual", "forecast"))
    for status in statuses:
        if status.warning:
            click.echo(f"warning: {status.warning}", err=True)
