"""`spendlake export`: thin over service.export."""

from __future__ import annotations

import click

from service.cli.params import SingleValueCommand


@click.command("export", cls=SingleValueCommand)
@click.option("--format", "fmt", type=click.Choice(["focus"]), required=True,
              help="The dataset to write: focus, a FOCUS Cost and Usage dataset.")
@click.option("--focus-version", type=click.Choice(["1.2", "1.3"]), default="1.2", show_default=True,
              help="The FOCUS version the dataset follows (1.3 adds its columns, Allocated* among them).")
@click.option("--since", help="Lines whose charge period starts at or after this: 30d, 2026-11-01 or an ISO time "
                              "(UTC; default: the first line).")
@click.option("--until", help="... and before this (default: no end).")
@click.option("--source", "sources", multiple=True, help="Only this billing source (repeatable).")
@click.option("--with-attribution", is_flag=True,
              help="Add x_<dimension> per attribution dimension and split shared costs into allocated lines.")
@click.option("--out", required=True, metavar="DIR|s3://bucket/prefix", help="Where the dataset goes.")
@click.option("--csv", "csv", is_flag=True, help="Write CSV instead of Parquet.")
@click.option("--timeout-seconds", type=click.FloatRange(0, 600, min_open=True), default=30, show_default=True,
              help="To s3://: each attempt's connect and each read.")
@click.option("--deadline-seconds", type=click.FloatRange(0, 86400, min_open=True), default=3600, show_default=True,
              help="To s3://: all of the uploads, their attempts and backoffs; at least --timeout-seconds.")
@click.pass_obj
def export_command(obj, fmt: str, focus_version: str, since: str | None, until: str | None,
                   sources: tuple[str, ...], with_attribution: bool, out: str, csv: bool, timeout_seconds: float,
                   deadline_seconds: float) -> None:
    """Write the lake as a FOCUS dataset: one folder per billing period, with FOCUS metadata."""
    from service.core.coverage import data_end
    from service.core.errors import UsageError
    from service.core.timewindow import fixed_end
    from service.export import ExportOptions, export_focus, export_window

    if deadline_seconds < timeout_seconds:
        raise UsageError(f"{deadline_seconds:g} s is less than --timeout-seconds ({timeout_seconds:g} s), which no "
                         "upload would be given", where="--deadline-seconds",
                         hint="raise it, or lower --timeout-seconds")
    anchored = since or (until and not fixed_end(until))  # a span (or mtd) is read back from the data's end
    start, end = export_window(since, until, end=data_end(obj.lake) if anchored else None)
    result = export_focus(obj.config, ExportOptions(out, focus_version, start, end, sources, with_attribution, csv,
                                                      timeout_seconds, deadline_seconds))
    if not result.periods:
        click.echo(f"nothing to export: no cost lines in the window (the lake at {obj.config.lake})", err=True)
        return
    for period in result.periods:
        click.echo(f"{period.period}: {period.rows:,} lines → {period.location}")
    click.echo(f"FOCUS {result.version} dataset at {result.location} (schema {result.schema_id})")
