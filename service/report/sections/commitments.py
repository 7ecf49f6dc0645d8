"""The report's commitments section: what each Savings Plan, reservation and committed use
discount cost over the 30 days ending with the report day, used and unused, coverage and
expiry (service.attribution.commitment_usage, the numbers `spendlake commitments --since 30d` shows).
Its chart draws one currency (service/report/chart_currency.py), the others named under it."""

from __future__ import annotations

from datetime import date, timedelta

from service.core.config import Config
from service.core.lake import Lake
from service.core.timewindow import Window, day_start, day_text
from service.attribution import commitments
from service.core.units import currency_text
from service.report.chart_currency import chart_currency, left_out_note
from service.report.model import Chart, Column, Section, Table

DAYS = 30


def commitments_section(config: Config, lake: Lake, day: date) -> Section:
    until = day_start(day) + timedelta(days=1)
    result = commitments(lake, config, Window(until - timedelta(days=DAYS), until))
    if not result.rows:
        return Section("commitments", "Commitments",
                       note=f"No Savings Plan, reservation or committed use discount was used or left unused "
                            f"in the {DAYS} days to {day_text(day)}.")
    # an arn breaks anywhere rather than widening the table past the page (its 32-character runs did)
    columns = [Column("commitment_id", "commitment", css="long"), Column("type", "type"),
               Column("account", "account"),
               Column("currency", "currency"), Column("commitment", "commitment", "money"),
               Column("used", "used", "money"), Column("unused", "unused", "money"),
               Column("unused_pct", "unused", "percent"), Column("utilization_pct", "utilization", "percent"),
               Column("coverage_pct", "coverage", "percent"), Column("expires", "expires", "time")]
    table = Table("commitments", f"Commitments, {DAYS} days to {day_text(day)}: commitment, used, unused, "
                  "coverage of eligible usage and expiry", columns, markdown=(("commitment_id",), "unused"))
    table.rows = [{c.key: row.get(c.key) for c in columns} for row in result.to_json()["rows"]]
    if any(row["expires"] is None for row in table.rows):  # a blank date reads as "never" otherwise
        table.notes.append("An empty expires: the bill names no end date for that commitment (AWS exports give "
                           "savingsPlan/EndTime and reservation/EndTime; other providers' cost rows carry none).")
    if len(result.totals) == 1:
        total = result.totals[0]
        table.total = {"commitment_id": "total", "currency": total["currency"], **{
            k: total[k] for k in ("commitment", "used", "unused", "unused_pct", "utilization_pct", "coverage_pct")}}
    # one currency drawn, by service/report/chart_currency.py's rule (it drew USD alone, EUR or JPY commitments
    # left out unsaid, or no chart at all); the others named under it
    cells = [(row.currency, row.used + row.unused) for row in result.rows]
    currency, why = chart_currency(config, cells)
    shown = [row for row in result.rows if row.currency == currency]
    chart = Chart("stacked", f"Commitments ({currency_text(currency)}): used and unused",
                  [row.name or row.commitment_id for row in shown],
                  {"used": [row.used for row in shown], "unused": [row.unused for row in shown]}, currency or "",
                  note=left_out_note(currency, why, cells, table.key))
    return Section("commitments", "Commitments", tables=[table], charts=[chart] if shown else [])
