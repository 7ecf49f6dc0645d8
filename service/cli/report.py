"""`spendlake report`: thin over service.report.write."""

from __future__ import annotations

import click


@click.command("report")
@click.option("--date", "day", metavar="YYYY-MM-DD",
              help="The day to report on (UTC; default: the last whole day of data, else yesterday).")
@click.option("--out", metavar="DIR|s3://bucket/prefix",
              help="Where to write <date>/ (default: report.out in the config, else reports/ beside the lake).")
@click.pass_obj
def report_command(obj, day: str | None, out: str | None) -> None:
    """Write the daily report: HTML with charts, JSON, CSV per table and a Markdown summary."""
    from service.report.write import report_day, write_report

    result = write_report(obj.config, report_day(day, lake=obj.lake), out)
    click.echo(f"report for {result.day.isoformat()}: {result.html}")
