"""The report's "Bills" section: each source's bill for the report's month and the month before,
per billing period and currency, as the ledger recorded it (the totals `spendlake status` shows
and `spendlake attribute --check` reconciles the attribution against).

An invoice counts a billing period; the spend tables count charges by when they were used
(ChargePeriod). The two differ by every line billed in one month for usage in another (a
provider's late line, a refund of a closed month), so finance ties out to this table.

A bill may be several invoices (two billing accounts in one export, a marketplace seller's
invoice beside the provider's): the second table splits each bill by billing account and
invoice id, as the lines carry them, and its rows of a bill add up to it.
"""

from __future__ import annotations

from datetime import date, timedelta

from service.core.lake import Lake
from service.report.model import Column, Section, Table


def bills_section(lake: Lake, day: date) -> Section:
    month = day.replace(day=1)
    periods = (f"{(month - timedelta(days=1)):%Y-%m}", f"{month:%Y-%m}")
    table = Table("bills", "Bills per source, billing period and currency (as `spendlake status`)", [
        Column("billing_period", "billing period"), Column("source", "source"), Column("invoice", "invoice"),
        Column("currency", "currency"), Column("rows", "lines", "count"),
        Column("billed_cost", "billed", "money"), Column("effective_cost", "effective (amortized)", "money"),
    ], markdown=(("billing_period", "source", "currency"), "billed_cost"), markdown_whole=True)
    entries = sorted((e for e in lake.ledger() if e.billing_period in periods and lake.counts(e.source)),
                     key=lambda e: (e.billing_period, e.source))
    for entry in entries:
        for totals in sorted(entry.totals, key=lambda t: t.currency or ""):
            table.rows.append({
                "billing_period": entry.billing_period, "source": entry.source,
                "invoice": "final" if entry.final else "estimated", "currency": totals.currency, "rows": totals.rows,
                "billed_cost": totals.billed_cost, "effective_cost": totals.effective_cost,
            })
    note = ("Each bill as delivered, by billing period: the spend above counts charges by the day they were "
            "used, so a line billed in another month than its usage (a late charge, a refund of a closed "
            "month) moves between the two. An estimated bill has no invoice id yet and may still change.")
    if not table.rows:
        note = f"No bill in the lake for {periods[0]} or {periods[1]}."
        return Section("bills", "Bills", note=note)
    return Section("bills", "Bills", tables=[table, invoices_table(lake, periods)], note=note)


def invoices_table(lake: Lake, periods: tuple[str, str]) -> Table:
    """Each bill of `periods` per billing account and invoice id; lines without an invoice id
    (not on an issued invoice yet) are their account's estimated part."""
    table = Table("invoices", "Invoices per billing account (each bill split by the invoice ids of its lines)", [
        Column("billing_period", "billing period"), Column("source", "source"),
        Column("billing_account", "billing account"), Column("invoice", "invoice"), Column("currency", "currency"),
        Column("rows", "lines", "count"), Column("billed_cost", "billed", "money"),
        Column("effective_cost", "effective (amortized)", "money"),
    ], markdown=(("billing_period", "source", "billing_account", "invoice", "currency"), "billed_cost"),
        markdown_whole=True)
    with lake.query() as con:
        found = con.execute(
            "SELECT billing_period, source, BillingAccountId, InvoiceId, BillingCurrency, count(*), sum(BilledCost), "
            "sum(EffectiveCost) FROM costs WHERE billing_period IN (SELECT unnest(?)) GROUP BY ALL "
            "ORDER BY billing_period, source, BillingAccountId NULLS LAST, InvoiceId NULLS LAST, BillingCurrency",
            [list(periods)]).fetchall()
    table.rows = [{"billing_period": period, "source": source, "billing_account": account,
                   "invoice": invoice or "estimated (no invoice id yet)", "currency": currency, "rows": rows,
                   "billed_cost": billed, "effective_cost": effective}
                  for period, source, account, invoice, currency, rows, billed, effective in found]
    return table
