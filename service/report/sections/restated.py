"""The Bills section's notes on a bill the cloud delivered again with other figures (bills.py).

An estimated bill (no invoice id yet) is the cloud's month to date: AWS rewrites it up to three
times a day until it finalizes the month, and usage metered late (its data lags a day or two)
fills in the last days it held. A change of those days is the estimate updated with late usage,
said for the latest delivery only; a change of days well before its data's end (LATE_DAYS), or of
a bill whose replaced delivery was final (the invoice's figures changed: a refund, a credit, a
support fee after the month closed), is a restatement, said for every change the ledger keeps
(`replaced`, `earlier`), oldest first, so a copy tied out to any of them is seen to be stale; once
the invoice is in, the estimate's changes before it are not said again. A delivery's time is the one
its source tells (LedgerEntry.delivered_at: its export's execution id, else its files' write time),
and which it is; one recorded before those were is said by when it was ingested.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from service.core.coverage import parse_utc
from service.core.ledger import FILES_REMOVED, CurrencyTotals, DaySums, LedgerEntry, Replaced
from service.core.timewindow import minute_text
from service.core.usage_end import capped_through
from service.core.units import cents, currency_text, shown_money

# The days before an estimate's data end's day that late usage still fills in: AWS's cost data
# lags its usage by 24 to 48 hours, so a delivery's last two whole days are not yet whole.
LATE_DAYS = 2


def restated_notes(entries: list[LedgerEntry]) -> list[str]:
    """Per bill and currency, a sentence for each delivery the ledger keeps that changed the figures
    of the days the one before it held: its whole bill when its data reaches no further (or that one
    was final), else those days, by the day sums both recorded (a delivery reaching further with those
    days as they were is the month growing: AWS delivers the month to date each day)."""
    notes = []
    for entry in entries:
        if entry.replaced is None:
            continue
        chain = [capped(entry, delivery) for delivery in (
            Replaced(entry.ingested_at, entry.data_through, entry.final, entry.totals, entry.days,
                     entry.days_version, entry.data_through_bounded, entry.delivered_at, entry.delivered_by,
                     entry.delivery_id),
            entry.replaced, *entry.earlier)]
        # once the invoice is in (the oldest final delivery), the estimate's changes before it are past
        invoice = max((i for i, delivery in enumerate(chain) if delivery.final), default=len(chain))
        for new, old in reversed(list(zip(chain, chain[1:]))[:invoice + 1]):
            notes += change_notes(entry, new, old, latest=new is chain[0])
    return notes


def capped(entry: LedgerEntry, delivery: Replaced) -> Replaced:
    """`delivery` of `entry`'s bill with its data's end as a reader takes it (usage_end.capped_through): one
    recorded before commits bounded it (a line's 2099) no later than a day after its month and its commit."""
    return replace(delivery, data_through=capped_through(delivery.data_through, entry.billing_period,
                                                         delivery.ingested_at, delivery.data_through_bounded))


def change_notes(entry: LedgerEntry, new: Replaced, old: Replaced, latest: bool) -> list[str]:
    """What `new` changed of `old`, per currency: restated, or (`latest` only) updated with late usage."""
    if new.days_version != old.days_version:  # summed otherwise (a refund in its day or not): not compared
        new, old = replace(new, days=None), replace(old, days=None)
    grown = bool(new.data_through and old.data_through) and parse_utc(new.data_through) > parse_utc(old.data_through)
    if old.final or new.data_through is None or old.data_through is not None and not grown:
        if old.final or None in (new.days, old.days, new.data_through, old.data_through):
            return [whole_bill_restated(entry, new, old, *change) for change in bill_changes(new, old)]
        cut = late_start(old.data_through)
        early = day_changes(new, old, lambda day: day < cut)
        late = day_changes(new, old, lambda day: day >= cut)
        outside = {} if new.final else outside_changes(new, old)  # an invoice's own figures: finalized
        notes = []
        for change in bill_changes(new, old):
            currency = change[0].currency
            if currency in early:
                notes.append(whole_bill_restated(entry, new, old, *change))
                continue
            if latest and (currency in late or currency not in outside):
                notes.append(late_usage(entry, new, old, cut, *change))
            if currency in outside:
                notes.append(outside_restated(entry, new, old, *outside[currency]))
        return notes
    if new.days is None or old.days is None or old.data_through is None:
        return []  # recorded before 2026-12 without day sums: nothing to compare, read as growth
    held, cut = parse_utc(old.data_through).date().isoformat(), late_start(old.data_through)
    early = day_changes(new, old, lambda day: day < cut)
    late = day_changes(new, old, lambda day: cut <= day < held) if latest else {}
    outside = outside_changes(new, old)
    notes = []
    for currency in sorted(early.keys() | late.keys() | outside.keys(), key=lambda c: c or ""):
        if currency in early:
            notes.append(days_restated(entry, new, old, cut, *early[currency]))
        elif currency in late:
            notes.append(late_usage(entry, new, old, cut, *late[currency]))
        if currency in outside:
            notes.append(outside_restated(entry, new, old, *outside[currency]))
    return notes


def late_start(data_through: str) -> str:
    """The first day late usage may still fill in, for a delivery whose data ends at `data_through`."""
    return (parse_utc(data_through).date() - timedelta(days=LATE_DAYS)).isoformat()


Change = tuple[CurrencyTotals, int, Decimal, Decimal]  # new totals, 0 billed / 1 effective, new, was


def currencies(new: Replaced, old: Replaced) -> list[CurrencyTotals]:
    """Per currency either delivery bills, its totals: the new delivery's, else the old one's (a
    currency the bill no longer holds went to nothing, which a copy tied out to it must be told)."""
    totals = {t.currency: t for t in old.totals} | {t.currency: t for t in new.totals}
    return sorted(totals.values(), key=lambda t: t.currency or "")


def bill_changes(new: Replaced, old: Replaced) -> Iterator[Change]:
    """Per currency, the bills whose figure (billed, else effective) changed by a cent or more."""
    before, after = {t.currency: t for t in old.totals}, {t.currency: t for t in new.totals}
    for totals in currencies(new, old):
        index = 0 if totals.billed_cost is not None else 1
        cost = ("billed_cost", "effective_cost")[index]
        prior, now = before.get(totals.currency), after.get(totals.currency)
        now, was = Decimal(0) if now is None else getattr(now, cost), None if prior is None else getattr(prior, cost)
        if was is None or cents(now, totals.currency) != cents(was, totals.currency):
            yield totals, index, now, was or Decimal(0)


def day_changes(new: Replaced, old: Replaced, counted) -> dict[str | None, Change]:
    """Per currency, the usage of the days `counted` (YYYY-MM-DD → bool) when it changed by a cent or
    more: under the cent (a late line's fraction) every figure shows the same."""
    now, was = day_sums(new.days, counted), day_sums(old.days, counted)
    changes = {}
    for totals in currencies(new, old):
        index = 0 if totals.billed_cost is not None else 1
        key = totals.currency or ""
        after, before = now.get(key, (Decimal(0),) * 2)[index], was.get(key, (Decimal(0),) * 2)[index]
        if cents(after, totals.currency) != cents(before, totals.currency):
            changes[totals.currency] = (totals, index, after, before)
    return changes


def outside_changes(new: Replaced, old: Replaced) -> dict[str | None, Change]:
    """Per currency, the part of the bill outside its usage lines' days (a credit, a refund, tax: the
    bill less its day sums) when it changed by a cent or more."""
    now_days, was_days = day_sums(new.days, lambda day: True), day_sums(old.days, lambda day: True)
    before, after = {t.currency: t for t in old.totals}, {t.currency: t for t in new.totals}
    changes = {}
    for totals in currencies(new, old):
        index = 0 if totals.billed_cost is not None else 1
        cost, key = ("billed_cost", "effective_cost")[index], totals.currency or ""

        def beside_days(bill: CurrencyTotals | None, days: dict) -> Decimal:
            return Decimal(0) if bill is None else (
                (getattr(bill, cost) or Decimal(0)) - days.get(key, (Decimal(0),) * 2)[index])
        now, was = beside_days(after.get(totals.currency), now_days), beside_days(before.get(totals.currency), was_days)
        if cents(now, totals.currency) != cents(was, totals.currency):
            changes[totals.currency] = (totals, index, now, was)
    return changes


def day_sums(days: DaySums | None, counted) -> dict[str, tuple[Decimal, Decimal]]:
    """Per currency ("" for none), the (billed, effective) sums of the days `counted`."""
    return {currency or "": (sum((b or 0 for day, b, _ in sums if counted(day)), Decimal(0)),
                             sum((e or 0 for day, _, e in sums if counted(day)), Decimal(0)))
            for currency, sums in days or ()}


def at(moment: str) -> str:
    return f"{minute_text(parse_utc(moment))} UTC"


# what told a delivery's time (LedgerEntry.delivered_by; service/ingest/delivered.py), as a note says it
TOLD_BY = {"execution id": "its export's execution time", "files": "its files' write time"}


def again(delivery: Replaced, old: Replaced) -> str:
    """'delivered again at … UTC (its files' write time)', as its source told it; where it told none
    (a ledger before session 51), when spendlake ingested it, said so; the delivery `old` was, read
    again (`same`), said so; the period read again only because files of it were gone, that."""
    if delivery.delivered_by == FILES_REMOVED:  # no delivery: the rest of the last one, read again
        return f"files removed from the location, the rest read again at {at(delivery.ingested_at)}"
    told = f"{at(delivery.delivered_at)} ({TOLD_BY[delivery.delivered_by or 'files']})" if delivery.delivered_at else ""
    if same(delivery, old):
        return f"read again (same delivery, of {told})" if told else "read again (same delivery)"
    if told:
        return f"delivered again at {told}"
    return f"delivered again, ingested at {at(delivery.ingested_at)}"


def of(delivery: Replaced, new: Replaced) -> str:
    """'of … UTC (its export's execution time)', or 'ingested at … UTC': the delivery a note compares
    with; 'as ingested at … UTC' where `new` is that delivery read again (`same`)."""
    if same(new, delivery):
        return f"as ingested at {at(delivery.ingested_at)}"
    if delivery.delivered_at:
        return f"of {at(delivery.delivered_at)} ({TOLD_BY[delivery.delivered_by or 'files']})"
    return f"ingested at {at(delivery.ingested_at)}"


def same(new: Replaced, old: Replaced) -> bool:
    """Whether `new` is the delivery `old` was, read again under its delivery id (a reader's fix
    read it with other figures), not a delivery of its own; unknown (False) where the ledger kept
    no id of the delivery replaced (before session 51)."""
    return new.delivery_id is not None and new.delivery_id == old.delivery_id


# what a bill's day sums leave out (the ledger sums a day's usage lines, corrections apart): the
# invoice nets them, so the note names them beside its figures
APART = " (credits, refunds and taxes apart)"


def verbs(index: int) -> tuple[str, str]:
    return ("bills", "billed") if index == 0 else ("has an effective cost of", "had")


def difference(totals: CurrencyTotals, now: Decimal, was: Decimal) -> str:
    return f"{shown_money(abs(now - was), totals.currency)} {'more' if now > was else 'less'}"


def head(entry: LedgerEntry, totals: CurrencyTotals, what: str, new: Replaced, old: Replaced) -> str:
    return (f"Bill {entry.billing_period} / {entry.source} / {currency_text(totals.currency)} {what}: "
            f"{again(new, old)}")


def whole_bill_restated(entry: LedgerEntry, new: Replaced, old: Replaced, totals: CurrencyTotals, index: int,
                        now: Decimal, was: Decimal) -> str:
    through = f", its data still through {at(new.data_through)}" if new.data_through else ""
    return restated(entry, new, old, totals, index, now, was, f"{through}, it", final=old.final)


def outside_restated(entry: LedgerEntry, new: Replaced, old: Replaced, totals: CurrencyTotals, index: int,
                     now: Decimal, was: Decimal) -> str:
    """The part of a bill outside its usage lines' days changed: a restatement, whatever the days did."""
    grown = bool(new.data_through and old.data_through) and parse_utc(new.data_through) > parse_utc(old.data_through)
    through = f", its data {'now' if grown else 'still'} through {at(new.data_through)}" if new.data_through else ""
    return restated(entry, new, old, totals, index, now, was,
                    f"{through}, outside its usage lines (credits, refunds, taxes) it", final=False)


def restated(entry: LedgerEntry, new: Replaced, old: Replaced, totals: CurrencyTotals, index: int,
             now: Decimal, was: Decimal, lead: str, *, final: bool) -> str:
    """'Bill … restated: delivered again at … (…){lead} bills X where the delivery of … (…) billed Y (Z more)'."""
    verb, had = verbs(index)
    return (f"{head(entry, totals, 'restated', new, old)}{lead} {verb} {shown_money(now, totals.currency)} where the "
            f"{'final ' if final else ''}delivery {of(old, new)} {had} {shown_money(was, totals.currency)} "
            f"({difference(totals, now, was)}): the figures above that count its lines changed with it.")


def days_restated(entry: LedgerEntry, new: Replaced, old: Replaced, cut: str, totals: CurrencyTotals,
                  index: int, now: Decimal, was: Decimal) -> str:
    """The usage of the days before `cut` an estimate reaching further changed: restated beside the
    days it adds and the late usage of its last days."""
    verb, had = verbs(index)
    return (f"{head(entry, totals, 'restated', new, old)}, its data now through {at(new.data_through)}, for its usage "
            f"lines of the days before {cut}{APART} it {verb} {shown_money(now, totals.currency)} where the "
            f"delivery {of(old, new)}, its data through {at(old.data_through)}, {had} "
            f"{shown_money(was, totals.currency)} "
            f"({difference(totals, now, was)}, besides the days it adds): the figures above that count those days "
            "changed with it.")


def late_usage(entry: LedgerEntry, new: Replaced, old: Replaced, cut: str, totals: CurrencyTotals, index: int,
               now: Decimal, was: Decimal) -> str:
    """An estimate whose days before `cut` are as they were: its last days filled in with late
    usage (or its invoice's figures, when it is final now), no restatement."""
    verb, had = verbs(index)
    what, why = (("finalized", "the invoice's figures replace the estimate's") if new.final else
                 ("updated with late usage", "an estimated bill's last days grow as the cloud meters late usage, "
                                             "until its invoice"))
    if old.data_through and new.data_through and parse_utc(new.data_through) > parse_utc(old.data_through):
        last = (parse_utc(old.data_through).date() - timedelta(days=1)).isoformat()
        return (f"{head(entry, totals, what, new, old)}, its data now through {at(new.data_through)}, for its usage "
                f"lines of {cut} to {last}{APART} it {verb} {shown_money(now, totals.currency)} where the estimate "
                f"{of(old, new)}, its data through {at(old.data_through)}, {had} "
                f"{shown_money(was, totals.currency)} ({difference(totals, now, was)}, besides the days it adds), its "
                f"usage before {cut} as it was: {why}; the figures above that count those days changed with it.")
    return (f"{head(entry, totals, what, new, old)}, its data still through {at(new.data_through)}, it {verb} "
            f"{shown_money(now, totals.currency)} where the estimate {of(old, new)} {had} "
            f"{shown_money(was, totals.currency)} ({difference(totals, now, was)}), its usage before {cut} as it was: "
            f"{why}; the figures above that count its lines changed with it.")
