"""The delivery ledger's entries: what each committed (source, billing period) came from.

The ledger itself is one JSON file in the lake (`_ledger/deliveries.json`), written only by
service.core.lake; service.core.ledger_file is its JSON form. Besides the committed `entries` it
may hold `pending` ones: a commit in flight writes them before it moves its files into place and
drops them when it records the entries, so a reader that finds a partition already replaced
still finds the entry that describes it (service.core.snapshot).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Literal

from service.core.units import currency_text, exact_text

# When an entry is `final` rather than estimated (RELIABILITY 8), per currency: "any" of its
# lines carries an invoice id (AWS: `bill/InvoiceId` is blank until the month's bill is
# finalized, then on its lines), or "every" line does (FOCUS: InvoiceId is null on each charge
# not yet on an issued or provisional invoice, so a blank line is still an estimate); "never":
# the export carries no invoice id at all (Cloud Billing, OCI), so no month of it can be told final.
FinalWhen = Literal["any", "every", "never"]


@dataclass(frozen=True)
class CurrencyTotals:
    currency: str | None
    rows: int
    billed_cost: Decimal | None
    effective_cost: Decimal | None
    # (cost column, Σ value as delivered − as stored): what the lake's 12 decimals rounded away
    # from BilledCost, EffectiveCost, ListCost; only the columns where that is not zero
    rounding: tuple[tuple[str, Decimal], ...] = ()


@dataclass(frozen=True)
class AccountTotals:
    """A delivery's lines of one provider's billing account (BillingAccountId: AWS's payer, Azure's
    billing account, Google's billing account) in one currency: what service.core.bill_overlap
    compares across sources. A cost None: no line of them holds it (an Azure actual-cost export's
    effective cost). `sub_accounts`: the SubAccountIds those lines carry (AWS's member accounts,
    Azure's subscriptions), sorted; () where none carries one, None where not read (an entry of
    session 48, until service.core.ledger_accounts reads them)."""

    provider: str | None
    account: str | None
    currency: str | None
    billed_cost: Decimal | None
    effective_cost: Decimal | None
    sub_accounts: tuple[str, ...] | None = None


# Per currency, UTC day (YYYY-MM-DD) → (billed, effective) summed over the usage lines charged within
# that day, corrections (refunds) apart: what a later delivery reaching further is compared with over the days both hold, so
# a change of days already billed is told from the month growing (report/sections/bills.py).
DaySums = tuple[tuple[str | None, tuple[tuple[str, Decimal | None, Decimal | None], ...]], ...]
# How the day sums were summed: 1 (unwritten, before 2026-12-06) counted corrections in their day;
# sums of two versions are not compared (report/sections/restated.py): a refund would read as a day's change.
DAYS_VERSION = 2


@dataclass(frozen=True)
class Replaced:
    """What the committed entry of a period held when a delivery with other figures replaced it
    (a restated bill): when it was committed, how far its data reached, final or not, its totals,
    its day sums (None: recorded before 2026-12)."""

    ingested_at: str
    data_through: str | None
    final: bool
    totals: tuple[CurrencyTotals, ...]
    days: DaySums | None = None
    days_version: int = DAYS_VERSION
    data_through_bounded: bool = True  # as LedgerEntry's
    delivered_at: str | None = None  # as LedgerEntry's
    delivered_by: str | None = None
    delivery_id: str | None = None  # as LedgerEntry's (None: recorded before session 51)


@dataclass(frozen=True)
class LedgerEntry:
    """One committed delivery of one (source, billing period)."""

    source: str
    billing_period: str
    delivery_id: str
    rows: int
    totals: tuple[CurrencyTotals, ...]
    final: bool
    ingested_at: str
    files: tuple[str, ...] = field(default=())  # the delivery's source files
    size: int | None = None  # bytes of the committed partition file; None in ledgers before 2026-12
    sha256: str | None = None  # hex digest of that file
    # That file's modification time (ns) as committed: a read re-hashes a file whose time differs
    # (written since its commit, e.g. bytes flipped in place, same size and rows). None before 2026-12-06.
    mtime_ns: int | None = None
    # End of the partition's latest usage charge period (max ChargePeriodEnd of its
    # ChargeCategory = 'Usage' lines, ISO UTC): how far its data reaches. None: no usage line.
    data_through: str | None = None
    data_through_recorded: bool = True  # False in ledgers before 2026-12 (service.core.coverage reads the file)
    # data_through as the commit bounded it (service/core/usage_end.py, by the file's own BillingPeriodEnd);
    # False in ledgers before 2026-12-06 (5f947de), whose end a reader bounds again (usage_end.ledger_bound)
    data_through_bounded: bool = True
    # The distinct keys of the partition's Tags, sorted: attribution reads them here instead of
    # decoding every line's Tags map per query. None in ledgers before 2026-12 (it scans the file).
    tag_keys: tuple[str, ...] | None = None
    # The connector's reader_version that read it (connectors.base.CostConnector); 0, and not
    # written, for a reader never changed and in ledgers before 2026-12.
    reader_version: int = 0
    # The delivery of the period its latest change of figures replaced (with_replaced); None: never.
    replaced: Replaced | None = None
    # Those the changes before it replaced, newest first (at most KEPT_REPLACED - 1): a bill restated
    # twice keeps the figures of both (the invoice's among them), each change told from the one before.
    earlier: tuple[Replaced, ...] = ()
    # Its usage lines' sums per day (DaySums) and the start of its earliest usage charge period (ISO
    # UTC); None in ledgers before 2026-12, and data_from None for a delivery without usage line.
    days: DaySums | None = None
    data_from: str | None = None
    days_version: int = DAYS_VERSION
    # Its lines' totals per billing account (AccountTotals, sorted); None in ledgers before 2026-12-06
    # (session 48): such an entry's accounts are not known until its period is committed again.
    accounts: tuple[AccountTotals, ...] | None = None
    # When the cloud delivered it (ISO UTC), as its source tells it, and by what (DELIVERED_BY): an
    # export's execution id's time, else its files' latest write time as listed (S3 LastModified, a
    # local file's mtime); None: not told (ledgers before session 51, a source listing no times).
    delivered_at: str | None = None
    delivered_by: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return self.source, self.billing_period

    @property
    def days_outdated(self) -> bool:
        """No day sums, or sums of an earlier DAYS_VERSION: a commit replacing it reads them again."""
        return self.days is None or self.days_version < DAYS_VERSION

    def lacks(self, cost: str) -> bool:
        """True when no line of the delivery has this cost (`billed` or `effective`): an Azure
        actual-cost export has no amortized cost, an amortized one no billed cost. Queries of
        that cost count its lines as 0, which is no spend only if this is said."""
        return bool(self.totals) and all(getattr(t, f"{cost}_cost") is None for t in self.totals)

# What told a delivery's time (LedgerEntry.delivered_by): its export's execution id, which AWS Data
# Exports (CUR 2.0, FOCUS) begin with the time of the export's run; its files' latest write time;
# FILES_REMOVED: no delivery, the period read again only because files of its last one are gone
# from the location (service.ingest.removed; delivered_at None).
FILES_REMOVED = "files removed"
DELIVERED_BY = ("execution id", "files", FILES_REMOVED)

# The deliveries of a period an entry keeps, `replaced` and `earlier`: a final bill's later changes
# (AWS's refunds, credits and support fees after the invoice) stay told from the invoice's figures;
# a month to date delivered three times a day keeps about its last day's.
KEPT_REPLACED = 4


def with_replaced(committed: Sequence[LedgerEntry], new: Sequence[LedgerEntry]) -> list[LedgerEntry]:
    """The `new` entries, each carrying what the `committed` entry of its period held when their
    billed or effective totals differ (the bill restated), before what that entry had replaced
    (at most KEPT_REPLACED deliveries), else that entry's own `replaced` and `earlier`."""
    before = {e.key: e for e in committed}

    def figures(entry: LedgerEntry) -> set[tuple]:
        return {(t.currency, t.billed_cost, t.effective_cost) for t in entry.totals}

    def kept(entry: LedgerEntry, prior: LedgerEntry) -> LedgerEntry:
        if figures(prior) == figures(entry):
            return replace(entry, replaced=prior.replaced, earlier=prior.earlier)
        older = ((prior.replaced,) if prior.replaced else ()) + prior.earlier
        return replace(entry, replaced=Replaced(prior.ingested_at, prior.data_through, prior.final, prior.totals,
                                                prior.days, prior.days_version, prior.data_through_bounded,
                                                prior.delivered_at, prior.delivered_by, prior.delivery_id),
                       earlier=older[:KEPT_REPLACED - 1])
    return [entry if (prior := before.get(entry.key)) is None else kept(entry, prior) for entry in new]


@dataclass(frozen=True)
class LedgerState:
    """The ledger as one reader saw it: committed entries, the entries of a commit in flight,
    and `stamp`, which changes with every write of the file (each write is a new file)."""

    entries: tuple[LedgerEntry, ...] = ()
    pending: tuple[LedgerEntry, ...] = ()
    stamp: tuple[int, ...] = ()
    pending_by: str = ""  # the writer whose commit announced them: `holder()` of service/core/locks.py


def totals_text(totals: Sequence[CurrencyTotals]) -> str:
    """Each currency's billed cost as an ingest line says it; for an export that carries only the
    effective cost (Azure amortized), that."""
    return ", ".join(f"{currency_text(t.currency)} {exact_text(t.effective_cost)} effective"
                     if t.billed_cost is None and t.effective_cost is not None
                     else f"{currency_text(t.currency)} {exact_text(t.billed_cost)}"  # a zero sum is 0E-12 as str()
                     for t in totals)
