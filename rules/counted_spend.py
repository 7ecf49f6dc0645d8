"""The bill lines spend-anomaly and unallocated-spend count: one currency, without credits,
refunds, tax and commitment purchases (their shared settings)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from decimal import Decimal

from pydantic import Field, field_validator

from rules.base import RuleConfig
from rules.context import DailySpend
from service.core.folding import folded
from service.core.schema import CHARGE_CATEGORIES

NEGATION = folded("SavingsPlanNegation")  # a CUR's line netting the usage a Savings Plan covers
COVERED = folded("SavingsPlanCoveredUsage")  # that usage, billed at its on-demand price


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
        `netted`: also a Savings Plan's negation lines (a Credit), netted against the usage they
        cover (see `net_negations`), so covered usage counts what the bill nets it to, 0, not its
        on-demand price."""
        rows = list(rows)
        types = {folded(value) for value in self.exclude_line_item_types}
        dropped = {kind for kind in {row.line_item_type for row in rows} if folded(kind or "") in types}  # once a type
        kept = [row for row in rows if row.currency == self.currency and row.line_item_type not in dropped and (
            row.charge_category not in self.exclude_charge_categories or (netted and negation(row)))]
        return net_negations(kept) if netted else kept


def negation(row: DailySpend) -> bool:
    return folded(row.line_item_type or "") == NEGATION


def covered(row: DailySpend) -> bool:
    return folded(row.line_item_type or "") == COVERED


def _line(row: DailySpend) -> tuple:
    """What ties a negation to the usage it nets, as far as the rows tell (a field not asked is None)."""
    return row.currency, row.account, row.service, row.region, row.usage_type, row.resource, row.day


def net_negations(rows: list[DailySpend]) -> list[DailySpend]:
    """A negation nets the covered usage of its own line (resource, usage, day), whatever value
    its own tags give it: a virtual-tag rule on `charge_category: Usage`, or a negation without
    the usage's tag, left it on the dimension's default as negative spend. The covered rows of a
    line take its negations in proportion to their cost (to 0 when they tie, as on a CUR: those
    rows are dropped); a negation without covered usage among the rows stays where it is."""
    usage: dict[tuple, Decimal] = defaultdict(Decimal)
    for row in rows:
        if covered(row):
            usage[_line(row)] += row.cost
    taken: dict[tuple, Decimal] = defaultdict(Decimal)
    for row in rows:
        if negation(row) and usage.get(_line(row)):
            taken[_line(row)] += row.cost
    netted: list[DailySpend] = []
    shares: dict[tuple, list[DailySpend]] = defaultdict(list)
    for row in rows:
        line = _line(row)
        if line not in taken or not (covered(row) or negation(row)):
            netted.append(row)
        elif covered(row) and usage[line] + taken[line]:
            shares[line].append(row)
    for line, parts in shares.items():  # what the bill left of the line, split over its values
        left = usage[line] + taken[line]
        costs = [part.cost * left / usage[line] for part in parts]
        largest = max(range(len(parts)), key=lambda n: costs[n])
        costs[largest] += left - sum(costs)  # the parts sum to the line's net
        netted += [replace(part, cost=cost) for part, cost in zip(parts, costs)]
    return netted
