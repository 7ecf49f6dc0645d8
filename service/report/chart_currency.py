"""Which currency a one-currency chart draws, and the note naming what it leaves out.

Currencies are never converted, so a chart of money draws one. It is chosen by a rule that
never compares amounts in different currencies (JPY 150,000 is not more than USD 1,000):

1. the currency of the config's budgets, the one most of them are in (ties: alphabetical), when
   the chart has spend in it: the organisation said which money it plans in;
2. else the currency with the most rows of spend in the chart's table (team-days, job-type-days):
   the one the most of the spend is billed in, counted, not summed;
3. ties alphabetical.

Only a currency with spend to draw (a positive total over the chart) is chosen; the others with
spend are named under the chart with their totals, which its table holds in full.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from decimal import Decimal

from service.core.config import Config
from service.core.units import currency_text, shown_money


def chart_currency(config: Config, cells: Iterable[tuple[str | None, Decimal]]) -> tuple[str | None, str]:
    """The currency to draw of `cells`, (currency, cost) per row of the chart's table, and why, as
    the note says it; None when no currency has spend to draw."""
    totals: dict[str | None, Decimal] = {}
    rows: Counter = Counter()
    for currency, cost in cells:
        totals[currency] = totals.get(currency, Decimal(0)) + cost
        rows[currency] += cost != 0
    drawable = sorted((c for c, total in totals.items() if total > 0), key=currency_text)
    if not drawable:
        return None, ""
    planned = Counter(b.currency for b in config.budgets)
    drawn = max(drawable, key=lambda c: (planned[c], rows[c]))  # the first of equals: alphabetical
    why = ("the budgets' currency" if planned[drawn] else
           "the currency most of its rows are in" if rows[drawn] > min(rows[c] for c in drawable) else
           "the first alphabetically of those with as many rows")
    return drawn, why


def left_out_note(drawn: str | None, why: str, cells: Iterable[tuple[str | None, Decimal]], table: str) -> str | None:
    """A sentence naming the currencies with spend that the chart of `drawn` leaves out, each with
    its total over the chart, and the table (`table`.csv) that holds them; None when none."""
    totals: dict[str | None, Decimal] = {}
    for currency, cost in cells:
        if currency != drawn:
            totals[currency] = totals.get(currency, Decimal(0)) + cost
    others = [shown_money(total, currency)
              for currency, total in sorted(totals.items(), key=lambda kv: currency_text(kv[0])) if total]
    if not others:
        return None
    return (f"The chart draws {currency_text(drawn)} only, {why} (currencies are never converted): "
            f"{', '.join(others)} over the same days {'is' if len(others) == 1 else 'are'} left out; "
            f"{table}.csv has {'it' if len(others) == 1 else 'them'}.")
