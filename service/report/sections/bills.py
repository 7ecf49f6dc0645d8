"""The report's "Bills" section: each source's bill for the report's month and the month before,
per billing period and currency, as the ledger recorded it (the totals `spendlake status` shows
and `spendlake attribute --check` reconciles the attribution against).

An invoice counts a billing period; the spend tables count charges by when they were used
(ChargePeriod). The two differ by every line billed in one month for usage in another (a
provider's late line, a refund of a closed month), so finance ties out to this table.

A bill may be several invoices (two billing accounts in one export, a marketplace seller's
invoice beside the provider's): the second table splits each bill by billing account and
invoice id, as the lines carry them, and its rows of a bill add up to it. Each row is shown
rounded to the cent (the currency's minor unit), as its invoice shows it; when the rounded rows of a
bill do not add up to the bill rounded (EUR 10.25 and -2.125: 10.25 and -2.13, 8.12, against the
lines' 8.125, 8.13), a note under the table names the bill, both sums and the rounding between them,
so finance ties out to the cent. The CSV and JSON rows stay exact and add up to the bill exactly.
A third table splits each bill by charge category (a correction apart), with the same rounding note.

An export without invoice ids (gcp-billing, oci-cost: final_when "never") keeps its bills
estimated for good: the note and its invoice rows say so rather than await an invoice id.

Where the month's usage up to the day is billed in another period (the sandbox's Oracle line used on
30 September, billed in October), or the month's bill holds usage of another month, a note under the
table names it per source, period and currency; and so it does the part of the month's bill used after
the day (the next days' usage, the rest of AWS's monthly tax, which the month to date counts day by day),
by charge category, so finance ties the month to date to the bill. A bill the cloud delivered again with
other figures for the days it held is named with the figures before it, a restatement told from an
estimate's late usage (restated.py), so a copy of the report tied out earlier is seen to be stale.

A `gcp-billing` source's billed is Google's `cost`, before the credits on its lines (x_credits),
while Google's invoice nets them: its amount is the effective column (cost + credits), which a
note under the table names for each such bill, as Google's own FOCUS export writes BilledCost.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import date, timedelta
from decimal import Decimal

from connectors.base import CostConnector, cost_class
from service.attribution import prorate
from service.core.config import Config
from service.core.lake import READER_MEMORY_LIMIT, Lake
from service.core.registry import CONNECTORS
from service.core.timewindow import day_start, month_text
from service.core.units import cents, currency_text, shown_money
from service.report.model import Column, Section, Table
from service.report.rounding import Gap, gaps
from service.report.sections.restated import restated_notes

LABELS = {"billed_cost": "billed", "effective_cost": "effective"}  # the money columns a rounding note names


def sources_whose(config: Config, trait: Callable[[type[CostConnector]], bool]) -> dict[str, str]:
    """The configured billing sources whose connector has `trait` (a hook of CostConnector): name → kind."""
    return {s.name: s.kind for s in config.sources if trait(cost_class(CONNECTORS.get(s.kind)))}


def kinds_text(sources: Iterable[str], kinds: dict[str, str]) -> str:
    """The kinds of `sources` (`kinds`: name → kind), as said of their exports: "gcp-billing and oci-cost"."""
    return " and ".join(sorted({kinds[source] for source in sources}))


def bills_section(lake: Lake, day: date, before_credits: frozenset[str], no_invoice_ids: dict[str, str]) -> Section:
    """`before_credits`: the sources whose billed cost is before the credits their invoice nets;
    `no_invoice_ids`: those whose export carries no invoice id (name → kind), estimated for good."""
    month = day.replace(day=1)
    periods = (month_text(month - timedelta(days=1)), month_text(month))
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
    if not table.rows:
        return Section("bills", "Bills", note=f"No bill in the lake for {periods[0]} or {periods[1]}.")
    note = ("Each bill as delivered, by billing period: the spend above counts charges by the day they were "
            "used, so a line billed in another month than its usage (a late charge, a refund of a closed "
            "month) moves between the two.")
    never = [r["source"] for r in table.rows if r["source"] in no_invoice_ids]
    if never:
        note += (f" Exports of kind {kinds_text(never, no_invoice_ids)} carry no invoice id: their bills show as "
                 "estimated however long ago the provider closed the month; tie them to the provider's invoice.")
    if len(never) < len(table.rows):
        note += f" {'Any other' if never else 'An'} estimated bill has no invoice id yet and may still change."
    table.notes = (credits_notes(table.rows, before_credits) + restated_notes(entries) + moved_notes(lake, day)
                   + after_day_notes(lake, day))
    return Section("bills", "Bills", note=note, tables=[  # the split added last: report.json's tables keep their places
        table, invoices_table(lake, periods, no_invoice_ids),
        categories_table(lake, periods, {(r["billing_period"], r["source"]) for r in table.rows})])


def categories_table(lake: Lake, periods: tuple[str, str], bills: set[tuple[str, str]]) -> Table:
    """Each bill of `periods` (`bills`: its billing period and source, as the Bills table lists them)
    split by charge category, a correction (a refund, a restated line) apart from its category, so
    finance ties the invoice's Usage, Tax, Credit, Purchase... lines; the rows of a bill add up to it."""
    table = Table("bills_by_category", "Bills per charge category (each bill split as its invoice's lines)", [
        Column("billing_period", "billing period"), Column("source", "source"), Column("currency", "currency"),
        Column("charge_category", "charge category"), Column("charge_class", "charge class"),
        Column("rows", "lines", "count"), Column("billed_cost", "billed", "money"),
        Column("effective_cost", "effective (amortized)", "money"),
    ])
    with lake.query(memory_limit=READER_MEMORY_LIMIT) as con:  # a month of lines
        found = con.execute(
            "SELECT billing_period, source, BillingCurrency, coalesce(ChargeCategory, 'no category'), ChargeClass, "
            "count(*), sum(BilledCost), sum(EffectiveCost) FROM costs WHERE billing_period IN (SELECT unnest(?)) "
            "GROUP BY ALL ORDER BY billing_period, source, BillingCurrency NULLS FIRST, 4, ChargeClass NULLS FIRST",
            [list(periods)]).fetchall()
    table.rows = [{"billing_period": period, "source": source, "currency": currency, "charge_category": category,
                   "charge_class": charge_class, "rows": rows, "billed_cost": billed, "effective_cost": effective}
                  for period, source, currency, category, charge_class, rows, billed, effective in found
                  if (period, source) in bills]
    table.notes = rounding_notes(table.rows, "the charge categories above, each rounded to the cent",
                                 "rounding: the exact parts (bills_by_category.csv) add up to the bill")
    return table


def invoices_table(lake: Lake, periods: tuple[str, str], no_invoice_ids: dict[str, str]) -> Table:
    """Each bill of `periods` per billing account and invoice id; lines without an invoice id
    (not on an issued invoice yet) are their account's estimated part, and a source whose
    export carries none (`no_invoice_ids`: name → kind) says so."""
    table = Table("invoices", "Invoices per billing account (each bill split by the invoice ids of its lines)", [
        Column("billing_period", "billing period"), Column("source", "source"),
        Column("billing_account", "billing account"), Column("invoice", "invoice"), Column("currency", "currency"),
        Column("rows", "lines", "count"), Column("billed_cost", "billed", "money"),
        Column("effective_cost", "effective (amortized)", "money"),
    ], markdown=(("billing_period", "source", "billing_account", "invoice", "currency"), "billed_cost"),
        markdown_whole=True)
    with lake.query(memory_limit=READER_MEMORY_LIMIT) as con:  # a month of lines
        found = con.execute(
            "SELECT billing_period, source, BillingAccountId, InvoiceId, BillingCurrency, count(*), sum(BilledCost), "
            "sum(EffectiveCost) FROM costs WHERE billing_period IN (SELECT unnest(?)) GROUP BY ALL "
            "ORDER BY billing_period, source, BillingAccountId NULLS LAST, InvoiceId NULLS LAST, BillingCurrency",
            [list(periods)]).fetchall()
    table.rows = [{"billing_period": period, "source": source, "billing_account": account,
                   "invoice": invoice or (f"estimated (no invoice id in {no_invoice_ids[source]} exports)"
                                          if source in no_invoice_ids else "estimated (no invoice id yet)"),
                   "currency": currency, "rows": rows,
                   "billed_cost": billed, "effective_cost": effective}
                  for period, source, account, invoice, currency, rows, billed, effective in found]
    table.notes = rounding_notes(table.rows)
    return table


def moved_notes(lake: Lake, day: date) -> list[str]:
    """The usage of `day`'s month up to the day billed in another period, and the usage of other
    months billed in its period: each per source, period and currency (lines billing 0 left out)."""
    start = day.replace(day=1)
    month, after = month_text(start), (start + timedelta(days=32)).replace(day=1)
    query = ("SELECT source, {period}, BillingCurrency, count(*), sum(BilledCost) FROM costs WHERE {where} "
             "GROUP BY ALL HAVING sum(BilledCost) <> 0 ORDER BY ALL")
    with lake.query(memory_limit=READER_MEMORY_LIMIT) as con:  # a month of lines
        later = con.execute(query.format(period="billing_period", where=(
            "ChargePeriodStart >= ? AND ChargePeriodStart < ? AND billing_period <> ?")),
            [start, day + timedelta(days=1), month]).fetchall()
        earlier = con.execute(query.format(period="strftime(ChargePeriodStart, '%Y-%m')", where=(
            "billing_period = ? AND (ChargePeriodStart < ? OR ChargePeriodStart >= ?)")),
            [month, start, after]).fetchall()

    def parts(found: list[tuple], verb: str) -> str:
        return "; ".join(f"{source}, {verb} {period}: {shown_money(billed, currency)} "
                         f"({rows} line{'s' if rows != 1 else ''})"
                         for source, period, currency, rows, billed in found if lake.counts(source))
    notes = []
    if text := parts(later, "billed in"):
        notes.append(f"Usage of {month} up to {day.isoformat()} billed in another period, so in the month to date "
                     f"above but not in the {month} bill: {text}.")
    if text := parts(earlier, "used in"):
        notes.append(f"Billed in {month} but used in another month, so in the {month} bill but not in its month "
                     f"to date: {text}.")
    return notes


def after_day_notes(lake: Lake, day: date) -> list[str]:
    """The part of the month's bill used after `day`: lines charged later in the month (the next
    days' usage) and the rest of those running past it (AWS's monthly tax, which the month to date
    counts day by day as it prorates every line), per source, currency and charge category."""
    start = day.replace(day=1)
    after = (start + timedelta(days=32)).replace(day=1)
    until = (day_start(day) + timedelta(days=1)).replace(tzinfo=None)
    with lake.query(memory_limit=READER_MEMORY_LIMIT) as con:  # a month of lines
        found = con.execute(
            "SELECT source, BillingCurrency, ChargeCategory, ChargePeriodStart, ChargePeriodEnd, sum(BilledCost) "
            "FROM costs WHERE billing_period = ? AND BilledCost IS NOT NULL AND ChargePeriodStart >= ? "
            "AND ChargePeriodStart < ? AND (ChargePeriodEnd > ? OR ChargePeriodStart >= ?) GROUP BY ALL",
            [month_text(start), start, after, until, until]).fetchall()
    parts: dict[tuple[str, str], dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for source, currency, category, begins, ends, billed in found:
        if begins < until:  # a span over the day's end: what the month to date leaves of it
            billed -= prorate(billed, begins, ends, begins, until, "total")[0][1]
        parts[(source, currency)][category or "no category"] += billed
    text = "; ".join(
        f"{source}: {shown_money(sum(by.values()), currency)} (" + ", ".join(
            f"{category} {shown_money(part, currency)}" for category, part in sorted(by.items()))
        + parts_rounding(list(by.values()), currency) + ")"
        for (source, currency), by in sorted(parts.items(), key=lambda item: (item[0][0], item[0][1] or ""))
        if lake.counts(source) and cents(sum(by.values()), currency))
    return [f"Used after {day.isoformat()}, so in the {month_text(start)} bill but not in the month to date "
            f"above: {text}."] if text else []


def parts_rounding(parts: list[Decimal], currency: str | None) -> str:
    """"; each rounded..." when `parts`, each rounded to the cent, add up to other than their
    exact sum rounded (Tax 0.045 and Usage 0.009: 0.05 + 0.01 against 0.05), as Bills' notes say it."""
    gap = Gap("billed_cost", currency, sum((cents(p, currency) for p in parts), Decimal(0)), sum(parts, Decimal(0)))
    if gap.rounded == gap.whole:
        return ""
    return (f"; each rounded to the cent, the parts add up to {gap.shown(gap.rounded)}; their exact sum, "
            f"{gap.shown_exact}, rounds to {gap.shown(gap.whole)}: the {gap.shown(abs(gap.whole - gap.rounded))} "
            "between them is rounding")


def credits_notes(rows: list[dict], before_credits: frozenset[str]) -> list[str]:
    """One sentence per bill of a source whose billed is before its credits, when they differ as
    the table shows them (to the cent: credits under half a cent change no invoice)."""
    return [f"Bill {r['billing_period']} / {r['source']} / {currency_text(r['currency'])}: billed is Google's cost "
            f"before the credits on its lines ({shown_money(r['effective_cost'] - r['billed_cost'], r['currency'])}); "
            f"Google's invoice nets them: {shown_money(r['effective_cost'], r['currency'])}, the effective column."
            for r in rows if r["source"] in before_credits and None not in (r["billed_cost"], r["effective_cost"])
            and shown_money(r["billed_cost"], r["currency"]) != shown_money(r["effective_cost"], r["currency"])]


def rounding_notes(rows: list[dict], parts: str = "the rows above, each rounded as its invoice shows it",
                   between: str = "rounding, on no invoice") -> list[str]:
    """One sentence per bill (billing period, source, currency) whose rows, each rounded as the page
    shows it, add up to other than the bill's exact total rounded, in billed and/or effective cost
    (`parts`: what the rows are; `between`: what the difference is)."""
    notes = []
    for (period, source, currency), missed in gaps(rows, ("billing_period", "source", "currency"),
                                                   tuple(LABELS)).items():
        said: dict[str, list[str]] = defaultdict(list)  # what is said → the columns it is true of
        for gap in missed:
            said[f"{parts}, add up to {gap.shown(gap.rounded)}; the "
                 f"bill's lines add up to {gap.shown_exact}, which the bill rounds to {gap.shown(gap.whole)}: the "
                 f"{gap.shown(abs(gap.whole - gap.rounded))} between them is {between}"
                 ].append(LABELS[gap.column])
        notes += [f"Bill {period} / {source} / {currency_text(currency)}, {' and '.join(labels)}: {text}."
                  for text, labels in said.items()]
    return notes
