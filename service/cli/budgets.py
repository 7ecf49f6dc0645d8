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
    from service.findings.budgets import budget_status

    rows = [status.to_json() for status in budget_status(obj.lake, obj.config)]
    if not rows and (fmt or "table") == "table":
        click.echo("no budgets configured: add a `budgets:` section to the config (see README)")
        return
    emit(rows, COLUMNS, fmt, title="spendlake budgets",
         right=("amount", "actual", "used_pct", "forecast", "forecast_low", "forecast_high", "forecast_pct"))
