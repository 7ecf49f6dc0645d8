"""`spendlake commitments`: thin over service.attribution.commitment_usage (rendering only)."""

from __future__ import annotations

from decimal import Decimal

import click

from service.attribution import COMMITMENTS_SINCE
from service.cli.output import Lines, default_format, echo_data, emit, format_option, wrapped_id
from service.cli.params import SingleValueCommand, given_once
from service.core.output import to_json
from service.core.units import currency_text, money_text

MONEY = ("commitment", "used", "unused", "covered_usage", "eligible_usage")
PERCENT = ("unused_pct", "utilization_pct", "coverage_pct")


def _pct(value: Decimal | None) -> str:
    return "" if value is None else f"{value:.1f}%"


@click.command("commitments", cls=SingleValueCommand)
@click.option("--since", default=COMMITMENTS_SINCE, show_default=True,
              help="Start of the window: 30d, 7d, 2026-11-01 or an ISO time (UTC).")
@click.option("--until", help="End of the window (default: the end of the data; 3d: 3 days before it).")
@click.option("--by", "by", multiple=True, default=[""], callback=given_once,
              help="Add each commitment's owner in these dimensions, e.g. team.")
@format_option
@click.pass_obj
def commitments_command(obj, since: str, until: str | None, by: str, fmt: str | None) -> None:
    """Savings Plans, reservations, committed use discounts: commitment, used, unused, coverage, expiry."""
    from service.attribution import commitments_asked

    result = commitments_asked(obj.lake, obj.config, since, until, by)
    dims = list(result.by)
    data = result.to_json()
    fmt = fmt or default_format()
    if fmt == "json":
        echo_data(to_json(data))
        return
    columns = ["commitment_id", "type", *dims, "account", "currency", "commitment", "used", "unused", "unused_pct",
               "utilization_pct", "coverage_pct", "expires"]
    if fmt == "csv":
        emit(data["rows"], columns + ["name", "category", "covered_usage", "eligible_usage"], "csv")
        return
    if not data["rows"]:
        click.echo(f"no commitment was used or left unused between {data['since']} and {data['until']}")
        return
    # an ARN wraps: the owner columns `--by` asks for show beside it at 120 columns
    rows = [{**row, **{k: money_text(row[k], of=row["currency"]) for k in MONEY}, **{k: _pct(row[k]) for k in PERCENT},
             "commitment_id": wrapped_id(row["commitment_id"]), "expires": (row["expires"] or "")[:10]}
            for row in data["rows"]]
    footer = {"commitment_id": "total", "currency": Lines(currency_text(t["currency"]) for t in data["totals"])}
    for key in MONEY:
        footer[key] = Lines(money_text(t[key], of=t["currency"]) for t in data["totals"])
    for key in PERCENT:
        footer[key] = Lines(_pct(t[key]) for t in data["totals"])
    emit(rows, columns, "table", title=f"commitments, {data['since']} → {data['until']}", footer=footer,
         right=MONEY + PERCENT, whole=(*dims, "commitment", "unused", "unused_pct"))
