"""Shares of a total, shown only where they are one.

A bill's credits make a total net: an untagged EUR -2.125 credit read "-0.2%" of EUR 998.125, and
a team whose usage outweighs the credits on others "100.2%"; neither is a share finance can
read. A share is shown only between 0 and 100% of a positive total; elsewhere it is null (— on
the page, empty in a CSV) and a note under the table says why, the amounts standing as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from service.core.units import currency_text, money_text, share_of, shown_money

PERCENT = Decimal("0.1")


def cli_money(value: Decimal, currency: str | None) -> str:
    """`EUR -2.13`: an amount as the CLI's notes write it."""
    return money_text(value, currency_text(currency), of=currency)


def share_pct(part: Decimal | None, total: Decimal | None) -> Decimal | None:
    """`part` as a percentage of `total` to 0.1, or None when it is no share of it."""
    share = share_of(part, total, PERCENT / 100)
    return None if share is None else (share * 100).quantize(PERCENT)


def share_notes(rows: list[dict[str, Any]], part: str, total: Callable[[dict[str, Any]], Decimal | None],
                amount: Callable[[Decimal, str | None], str] = shown_money) -> list[str]:
    """One sentence per table naming, per currency, the total of the rows whose share is left out
    (a credit, or more than a total that credits elsewhere lowered); none when every share shows.
    `amount` writes a total: as the report's tables (`−EUR 2.13`), or as the CLI's (`EUR -2.13`)."""
    left_out: dict[str | None, Decimal] = {}
    for row in rows:
        whole = total(row)
        if whole is not None and (whole or row[part]) and share_pct(row[part], whole) is None:  # 0 of 0 says nothing
            left_out.setdefault(row["currency"], whole)
    if not left_out:
        return []
    totals = ", ".join(amount(whole, currency) for currency, whole in left_out.items())
    return [f"A share is shown only between 0 and 100% of its total: credits make the total net ({totals}), "
            "so a credit, or a part larger than that net total, is no share of it and shows — (the amount stands)."]
