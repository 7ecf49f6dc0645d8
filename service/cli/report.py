"""`spendlake report`: thin over service.report.write."""

from __future__ import annotations

import click

from service.cli.params import SingleValueCommand


@click.command("report", cls=SingleValueCommand)
@click.option("--date", "day", metavar="YYYY-MM-DD",
              help="The day to report on (UTC; default: the last whole day of data, or its only day "
                   "when the data is part of one, else yesterday).")
@click.option("--out", metavar="DIR|s3://bucket/prefix",
              help="Where to write <date>/ (default: report.out in the config, else reports/ beside the lake).")
@click.pass_obj
def report_command(obj, day: str | None, out: str | None) -> None:
    """Write the daily report: HTML with charts, JSON, CSV per table and a Markdown summary."""
    from service.core.config_paths import check_outside_lake
    from service.core.coverage import empty_lake_error
    from service.report.data import past_the_data
    from service.report.write import default_out, report_day, write_report

    lake = obj.lake
    check_outside_lake(obj.config, out or default_out(obj.config), "reports", where="--out")  # a bad --out first
    # no bill at all: the report would be all zeros, with nothing saying why (a lost ledger is
    # the snapshot's DataError naming the partitions, as for every read)
    if not lake.snapshot().checks:
        raise empty_lake_error(lake, nothing="no report written")
    result = write_report(obj.config, report_day(day, lake=lake), out)
    click.echo(f"report for {result.day.isoformat()}: {result.html}")
    # exit 0 all the same: the lake holds data before the day, the report is written and its intro says it
    if past := past_the_data(lake, result.day):
        click.echo(f"warning: {past}", err=True)
