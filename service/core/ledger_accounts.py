"""Each ledger entry's sums per billing account (ledger.AccountTotals, what service.core.bill_overlap
compares) for entries committed before the ledger held them, or their sub-accounts (before session
49): read once from the partition file by the next ingest (Lake.restamp, under its lock), so a bill
two sources held before is told, and two member accounts' own exports are not, without waiting for
its period to be delivered again. A commit reads them with its other figures
(service.core.commit.ENTRY_FIGURES)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from decimal import Decimal, localcontext
from pathlib import Path

import duckdb

from service.core.integrity import quick_check
from service.core.ledger import AccountTotals, LedgerEntry
from service.core.units import MONEY_DIGITS

log = logging.getLogger(__name__)

ACCOUNT_SUMS = ("SELECT ProviderName, BillingAccountId, BillingCurrency, sum(BilledCost), sum(EffectiveCost), "
                "coalesce(list(DISTINCT SubAccountId ORDER BY SubAccountId) FILTER (WHERE SubAccountId IS NOT NULL), []) "
                "FROM read_parquet(?) GROUP BY ALL "
                "ORDER BY ProviderName NULLS FIRST, BillingAccountId NULLS FIRST, BillingCurrency NULLS FIRST")


def with_accounts(entries: Sequence[LedgerEntry], path_of: Callable[[LedgerEntry], Path],
                  connect: Callable[[], duckdb.DuckDBPyConnection]) -> list[LedgerEntry]:
    """`entries`, each without accounts (or their sub-accounts) given those of its file at
    `path_of(entry)` when that file is the one committed (quick_check) and its sums per currency are
    the entry's; else as it is."""
    lacking = [e for e in entries if e.accounts is None or any(a.sub_accounts is None for a in e.accounts)]
    if not lacking:
        return list(entries)
    found: dict[tuple[str, str], tuple[AccountTotals, ...]] = {}
    with connect() as con:
        for entry in lacking:
            path = path_of(entry)
            try:
                if quick_check(path, entry).ok:
                    accounts = tuple(AccountTotals(*row[:5], tuple(row[5])) for row in con.execute(
                        ACCOUNT_SUMS, [str(path)]).fetchall())
                    if _adds_up(entry, accounts):
                        found[entry.key] = accounts
            except (duckdb.Error, OSError) as exc:
                log.info("%s %s: its sums per billing account could not be read: %s", entry.source,
                         entry.billing_period, exc)
    return [replace(e, accounts=found[e.key]) if e.key in found else e for e in entries]


def _adds_up(entry: LedgerEntry, accounts: tuple[AccountTotals, ...]) -> bool:
    """The accounts' sums per currency are the entry's totals (the file holds what the entry describes)."""
    def total(cost: str, currency: str | None) -> Decimal | None:
        values = [getattr(a, cost) for a in accounts if a.currency == currency and getattr(a, cost) is not None]
        with localcontext() as context:
            context.prec = MONEY_DIGITS
            return sum(values[1:], values[0]) if values else None
    return all(total("billed_cost", t.currency) == t.billed_cost and total("effective_cost", t.currency)
               == t.effective_cost for t in entry.totals) and {a.currency for a in accounts} == {
                   t.currency for t in entry.totals}
