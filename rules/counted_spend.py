"""The bill lines spend-anomaly and unallocated-spend count: one currency, without credits,
refunds, tax and commitment purchases (their shared settings)."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import Field, field_validator

from rules.base import DailySpend, RuleConfig
from service.core.folding import folded
from service.core.schema import CHARGE_CATEGORIES

NEGATION = folded("SavingsPlanNegation")  # a CUR's line netting the usage a Savings Plan covers


class CountedSpendConfig(RuleConfig):
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$", description="ISO 4217 code, as the bills write it")
    exclude_charge_categories: tuple[str, ...] = ("Credit", "Adjustment", "Tax", "Purchase")
    exclude_line_item_types: tuple[str, ...] = ("Credit", "Refund", "Tax", "SavingsPlanUpfrontFee", "RIFee")

    @field_validator("exclude_charge_categories")
    @classmethod
    def _in_focus_spelling(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        """The lake writes ChargeCategory as FOCUS spells it: `credit` compared exactly excluded nothing."""
        spelling = {folded(category): category for category in CHARGE_CATEGORIES}
        unknown = [value for value in values if folded(value) not in spelling]
        if unknown:
            raise ValueError(f"{unknown[0]!r} is not a FOCUS charge category; use some of {', '.join(CHARGE_CATEGORIES)}")
        return tuple(spelling[folded(value)] for value in values)

    def counted(self, rows: Iterable[DailySpend], *, netted: bool = False) -> list[DailySpend]:
        """The rows in `currency` whose charge category and line item type are not excluded; a
        line item type in any case (providers write their own, so there is no list to check).
        `netted`: also a Savings Plan's negation lines (a Credit, on the covered usage's tags), so
        covered usage counts what the bill nets it to, 0, not its on-demand price."""
        rows = list(rows)
        types = {folded(value) for value in self.exclude_line_item_types}
        dropped = {kind for kind in {row.line_item_type for row in rows} if folded(kind or "") in types}  # once a type
        return [row for row in rows if row.currency == self.currency and row.line_item_type not in dropped and (
            row.charge_category not in self.exclude_charge_categories or (netted and negation(row)))]


def negation(row: DailySpend) -> bool:
    return folded(row.line_item_type or "") == NEGATION
