"""Gather the numbers of a daily report from the lake: one function per section.

Sections whose data source is not part of this build say so instead of showing numbers.
Nothing here reads the clock: every time is derived from the report day or read from the
lake, so the same lake and day give the same report.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime, timedelta
from decimal import Decimal

from service.attribution import prorate
from service.core.config import Config
from service.core.coverage import billing_data_through, data_end, last_whole_day, usage_begins
from service.core.lake import READER_MEMORY_LIMIT, Lake
from service.core.timewindow import day_start, iso_utc, minute_text, month_name, month_text
from service.core.units import cents, shown_money, titled
from service.ingest.freshness import SourceFreshness, source_freshness
from service.report.sections.bills import bills_section, kinds_text, sources_whose
from service.report.sections.budgets import budgets_section
from service.report.sections.commitments import commitments_section
from service.report.sections.clusters import clusters_section
from service.report.sections.findings import anomalies_section, unallocated_causes, waste_section
from service.report.model import Column, Headline, Report, Section, Table
from service.report.shares import share_pct
from service.report.sections.plans import plans_section
from service.report.sections.spend import SpendReport


def gather(config: Config, lake: Lake, day: date) -> Report:
    until = day_start(day) + timedelta(days=1)
    spend = SpendReport(config, lake, day)
    headlines, spend_by = spend.spend_section()
    unallocated = unallocated_section(spend, lake, day, config.report.top)
    headlines += [unallocated_headline(row) for row in unallocated.tables[0].rows
                  if row["dimension"] == "team" and row["total_cost"]]
    before_credits = frozenset(sources_whose(config, lambda connector: connector.billed_before_credits))
    no_invoice_ids = sources_whose(config, lambda connector: connector.final_when == "never")
    sections = [
        spend_by,
        bills_section(lake, day, before_credits, no_invoice_ids),
        spend.trend_section(),
        spend.experiments_section(),
        *clusters_section(config, lake, day, config.report.top),
        waste_section(lake, day, config.report.top),
        budgets_section(config, lake, day),
        commitments_section(config, lake, day),
        plans_section(config, lake, day),
        anomalies_section(lake, day, config.report.top),
        unallocated,
        freshness_section(config, lake, until),
    ]
    return Report(day=day, month_start=day.replace(day=1), headlines=headlines, sections=sections,
                  notes=coverage_notes(lake, day) + behind_notes(lake, day) + estimated_notes(lake, day, no_invoice_ids)
                  + unbilled_notes(lake, day) + gross_of_credits_notes(lake, day, before_credits))


def unallocated_headline(row: dict) -> Headline:
    """The team's unallocated share of the month, when it is one (0 to 100%). Credits make it
    none: an untagged credit alone (EUR -2.125 of 998.125) is a share of -0.2%, untagged charges
    against tagged credits one of over 100%; the headline then shows the amount, a net credit
    saying so, as finance reads it on the bill."""
    label = "Unallocated, team, month to date"
    share = share_pct(row["unallocated_cost"], row["total_cost"])
    if share is not None:
        return Headline(titled(label, row["currency"]), row["currency"] or "", share, None, None, kind="percent")
    credit = ", a net credit" if row["unallocated_cost"] < 0 else ""
    return Headline(titled(label + credit, row["currency"]), row["currency"] or "", row["unallocated_cost"],
                    None, None)


def coverage_notes(lake: Lake, day: date) -> list[str]:
    """A sentence when the day lies outside the lake's billing data: before its first billing
    period nothing is missing (no `ingest` would add it), and past its end the day's and the
    month's figures are not in yet, so a drop against the days before is no drop in spend."""
    periods = [e.billing_period for e in lake.ledger() if lake.counts(e.source) and e.totals]
    if periods and month_text(day) < min(periods):
        return [f"The lake's billing data starts with {min(periods)}: there is no bill for {month_name(day)} "
                "to report."]
    begins = usage_begins(lake)  # a first bill of half a month, as the ledger recorded it (no file read)
    if begins is not None and day_start(day) + timedelta(days=1) <= begins:
        return [f"The lake's usage data starts at {minute_text(begins)} UTC, in its first bill ({min(periods)}): "
                f"there is no usage on {day.isoformat()} to report (a charge of the whole month, a tax or a fee, "
                "counts its share of the day)."]
    end = data_end(lake)
    if end is not None and end <= day_start(day.replace(day=1)):  # the whole month to date: a month past the data
        later = charges_dated_after(lake, end, day)
        said = past_the_end(day, end) + (" (its latest usage charge)" if later else "")
        return [f"{said}, before {month_name(day)} begins: none of the month's usage is in the lake yet, so the "
                "day's and the month to date's figures hold none of it (where they read $0.00, that is data not in "
                "yet, not spend that stopped), and no change against earlier days is shown; "
                f"{last_day_text(lake)}. Run `spendlake ingest` once the month's bills are delivered."
                + (f" Charges dated after it, or the part after it of those running past it (a monthly tax or fee "
                   f"to this day's end), are in the bill and in these figures: {later}." if later else "")]
    if end is not None and end < day_start(day) + timedelta(days=1):
        later = charges_dated_after(lake, end, day)
        return [f"The lake's billing data ends at {minute_text(end)} UTC"
                + (" (its latest usage charge): usage" if later else ": spend")
                + " after it is not in yet, so this day's and this month's figures are incomplete, and no change "
                "against earlier days is shown (it would be no change in spend)."
                + (f" Charges dated after it, or the part after it of those running past it (a monthly tax or fee "
                   f"to this day's end), are in the bill and in these figures: {later}." if later else "")]
    return []


def past_the_data(lake: Lake, day: date) -> str | None:
    """What the report of a `day` wholly past the lake's billing data lacks, as `spendlake report`
    says it on stderr (the report's intro at length: coverage_notes); None for a day the data
    reaches into, or a lake without usage data (an empty lake writes no report)."""
    end = data_end(lake)
    if end is None or end > day_start(day):
        return None
    if end <= day_start(day.replace(day=1)):
        lacks = (f", before {month_name(day)} begins: the report's figures hold none of the day's or the month's usage "
                 "(where they read $0.00, that is data not in yet)")
    else:
        lacks = ": the report's figures hold none of the day's usage, and the month's only up to then"
    return f"{past_the_end(day, end)}{lacks}; {last_day_text(lake)}"


def past_the_end(day: date, end: datetime) -> str:
    """`2027-01-05 is past the lake's billing data, which ends at 2026-12-06 11:00 UTC`."""
    return f"{day.isoformat()} is past the lake's billing data, which ends at {minute_text(end)} UTC"


def last_day_text(lake: Lake) -> str:
    """Which day to report instead: the default day (report_day's), the data's last whole one."""
    last = last_whole_day(lake)
    return f"the last whole day of data is {last.isoformat()} (`spendlake report --date {last.isoformat()}`)"


def charges_dated_after(lake: Lake, end: datetime, day: date) -> str:
    """The part of the charges the report's month to `day` holds that lies at or after `end` (the
    latest usage line's end: a purchase, a fee, a tax dated later is in the bill all the same,
    and a monthly tax or credit counts its share of every day it runs, as the figures prorate
    it), by charge category and currency: `Purchase USD 5,000.00`; "" when there are none."""
    since = max(end, day_start(day.replace(day=1))).replace(tzinfo=None)
    until = (day_start(day) + timedelta(days=1)).replace(tzinfo=None)
    with lake.query(memory_limit=READER_MEMORY_LIMIT) as con:  # the month's lines
        found = con.execute(
            "SELECT ChargeCategory, BillingCurrency, ChargePeriodStart, ChargePeriodEnd, sum(BilledCost) FROM costs "
            "WHERE ChargePeriodStart < $until AND (ChargePeriodEnd > $since OR (ChargePeriodEnd <= ChargePeriodStart "
            "AND ChargePeriodStart >= $since)) GROUP BY ALL", {"since": since, "until": until}).fetchall()
    after: dict[tuple[str, str | None], Decimal] = defaultdict(Decimal)
    for category, currency, start, stop, total in found:
        if stop > start:  # an instant is all in; a span for its overlap
            total = prorate(total, start, stop, max(start, since), min(stop, until), "total")[0][1]
        after[(category or "no category", currency)] += total
    return "; ".join(f"{category} {shown_money(total, currency)}"  # what rounds to no cent is none
                     for (category, currency), total in sorted(after.items(), key=lambda i: (i[0][0], i[0][1] or ""))
                     if cents(total, currency))


def behind_notes(lake: Lake, day: date) -> list[str]:
    """A sentence per billing source whose data ends before the report day does while the
    lake's goes on (an export that stopped, or lags a day): its spend is in the days compared
    with (the day before, last month) but not all in this day's and month's figures, so their
    changes are partly missing data, not spend."""
    until = day_start(day) + timedelta(days=1)
    end = data_end(lake)
    if end is None or end < until:
        return []  # coverage_notes says it of the whole lake
    compared_from = (day_start(day).replace(day=1) - timedelta(days=1)).replace(day=1)
    return [f"{source}'s billing data ends at {minute_text(through)} UTC: its spend after it is not in yet, so "
            "this day's and this month's changes against earlier days count it only in those days (part of a drop "
            "is that source's missing data, not less spend)."
            for source, through in sorted(billing_data_through(lake).items())
            if through is not None and compared_from < through < until]


def estimated_notes(lake: Lake, day: date, no_invoice_ids: dict[str, str]) -> list[str]:
    """A sentence naming the sources whose bill for the report's month has no invoice id yet: its
    figures are estimates that may still change until the provider closes the month; and one
    naming those whose export carries no invoice id at all (`no_invoice_ids`: name → kind),
    whose months stay estimated however long ago the provider closed them."""
    period = month_text(day)
    sources = sorted(e.source for e in lake.ledger() if lake.counts(e.source) and e.billing_period == period
                     and e.totals and not e.final)
    pending, never = [s for s in sources if s not in no_invoice_ids], [s for s in sources if s in no_invoice_ids]
    return ([f"{month_name(day)} is still estimated for {', '.join(pending)}: the bill has no invoice id yet, "
             "so these figures may change until the provider closes the month."] if pending else []) + (
        [f"{month_name(day)} shows as estimated for {', '.join(never)}: {kinds_text(never, no_invoice_ids)} exports "
         "carry no invoice id, so spendlake cannot tell whether the provider has closed the month; tie these "
         "figures to the provider's invoice."] if never else [])


def unbilled_notes(lake: Lake, day: date) -> list[str]:
    """A sentence naming the sources whose bill for the report's month has no billed cost (an
    amortized export): the headlines and spend tables, billed cost, show none of it."""
    period = month_text(day)
    sources = sorted(e.source for e in lake.ledger() if lake.counts(e.source) and e.billing_period == period
                     and e.lacks("billed"))
    if not sources:
        return []
    return [f"{', '.join(sources)} delivered no billed cost for {month_name(day)}, only amortized (effective) cost: "
            "the headlines and spend tables, billed cost as on the invoice, leave it out; Bills shows it. Point "
            "a source at the actual-cost export for the invoice's figures."]


def gross_of_credits_notes(lake: Lake, day: date, before_credits: frozenset[str]) -> list[str]:
    """A sentence per source in `before_credits` (gcp-billing: billed is Google's `cost`) whose
    lines charged in the month to date carry credits that change a cent: the headlines and
    spend tables show the spend before them, while Google's invoice nets them."""
    sources = sorted(s for s in before_credits if lake.counts(s))
    if not sources:
        return []
    month, until = day_start(day.replace(day=1)), day_start(day) + timedelta(days=1)
    with lake.query(memory_limit=READER_MEMORY_LIMIT) as con:
        found = con.execute(
            "SELECT source, BillingCurrency, sum(x_credits) FROM costs WHERE source IN (SELECT unnest(?)) "
            "AND ChargePeriodStart >= ? AND ChargePeriodStart < ? GROUP BY ALL ORDER BY ALL",
            [sources, month.replace(tzinfo=None), until.replace(tzinfo=None)]).fetchall()
    return [f"{source}'s spend in the headlines and spend tables is Google's cost before the credits on its lines "
            f"({shown_money(credits, currency)} charged this month to date); Google's invoice nets "
            "them (Bills: the effective column)."
            for source, currency, credits in found if cents(credits, currency)]


def unallocated_section(spend: SpendReport, lake: Lake, day: date, top: int) -> Section:
    section = Section("unallocated", "Unallocated spend", tables=[spend.unallocated_table()])
    causes = unallocated_causes(lake, day, top)
    if isinstance(causes, Table):
        section.tables.append(causes)
    else:
        section.note = causes
    return section


def freshness_section(config: Config, lake: Lake, until: datetime) -> Section:
    """Per configured source, billing and inventory (service/ingest/freshness.py): how far its
    data reaches, how far that lags the day's end, and whether within its freshness_hours.
    Data past the day's end shows as the day's end, and ingest runs that changed nothing
    leave no trace, so a later snapshot or an unchanged re-run leaves a past day's report as it was.
    A delivery stamped after this machine's clock is told by `status` and /api/v1/status, not
    here: that would make the report depend on when it is written."""
    month = month_text(until - timedelta(days=1))
    latest: dict[str, tuple[str, str]] = {}
    billing = {entry.source for entry in lake.ledger()}
    shown = [entry for entry in lake.ledger() if entry.billing_period <= month]  # a later month's was not there
    for entry in shown:
        period, ingested = latest.get(entry.source, ("", ""))
        latest[entry.source] = (max(period, entry.billing_period), max(ingested, entry.ingested_at))
    table = Table("freshness", "Data freshness per source", [
        Column("source", "source"), Column("kind", "kind"), Column("status", "status"),
        Column("latest_period", "latest period"), Column("data_through", "data through", "time"),
        Column("hours_behind", "hours behind", "count"), Column("freshness_hours", "limit (h)", "count"),
        Column("last_delivery", "last delivery committed", "time"), Column("last_error", "last error"),
    ], markdown=(("source",), "status"))
    for row in source_freshness(config, lake, until):
        period, ingested = latest.get(row.source, (None, None))
        through = None if row.data_through is None else min(row.data_through, until)
        before_its_data = row.source in billing and period is None  # its first bill is of a later month
        table.rows.append({
            "source": row.source, "kind": row.kind, "status": "no data" if before_its_data and row.state != "failing" else _status(row),
            "latest_period": period, "data_through": iso_utc(through) if through and not before_its_data else None,
            "hours_behind": None if before_its_data else row.hours_behind, "freshness_hours": row.freshness_hours,
            "last_delivery": ingested, "last_error": row.last_error,
        })
    note = None if table.rows else "No sources configured."
    return Section("freshness", "Data freshness", tables=[table] if table.rows else [], note=note)


def _status(row: SourceFreshness) -> str:
    """The source's state at the day's end, judged by its data alone (when it last ingested
    changes with every unchanged re-run and says nothing about the day)."""
    if row.state in ("failing", "no data", "not ingested"):
        return row.state
    return "stale" if row.data_stale else "ok"
