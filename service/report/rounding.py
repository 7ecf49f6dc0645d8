"""Rows shown rounded that do not add up to their whole rounded.

A table's rows, each shown rounded to its currency's minor unit, may add up to a cent or more
off the exact sum rounded (EUR 10.25 and -2.125 show 10.25 and -2.13, 8.12, where the whole is
8.125, 8.13). Finance adding up the page must be told where and by how much; the sections say it
in a note under the table. CSV and JSON keep every decimal and add up exactly.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from service.core.units import cents, currency_text, money_text, shown_money, signed


@dataclass(frozen=True)
class Gap:
    column: str
    currency: str | None
    rounded: Decimal  # the rows, each rounded, added up
    exact: Decimal  # the rows' exact sum

    @property
    def whole(self) -> Decimal:
        return cents(self.exact, self.currency)

    def amount(self, value: Decimal) -> str:
        """`USD 1,234.57`, in the currency's minor unit (`(no currency) 1.00` for lines without one)."""
        return money_text(value, currency_text(self.currency), of=self.currency)

    @property
    def exact_text(self) -> str:
        return f"{currency_text(self.currency)} {self.exact.normalize():,f}"

    def shown(self, value: Decimal) -> str:
        """`value` as the report's tables and notes write it: `$1,234.57`, `−EUR 2.13` (amount: the CLI's)."""
        return shown_money(value, self.currency)

    @property
    def shown_exact(self) -> str:
        """The exact sum as the report writes an amount, every decimal kept: `$0.054400914933`."""
        return signed(self.exact, self.currency, exact=True)


def gaps(rows: list[dict[str, Any]], group: tuple[str, ...], columns: tuple[str, ...]) -> dict[tuple, list[Gap]]:
    """Per group of rows (`group` holds `currency`), the money columns whose rows, each rounded,
    add up to other than their exact sum rounded; groups without one are left out."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[key] for key in group)].append(row)
    found = {}
    for key, parts in groups.items():
        currency = parts[0]["currency"]
        missed = [gap for gap in (Gap(column, currency, sum((cents(r[column], currency) for r in parts), Decimal(0)),
                                      sum((r[column] for r in parts if r[column] is not None), Decimal(0)))
                                  for column in columns) if gap.rounded != gap.whole]
        if missed:
            found[key] = missed
    return found
