"""The `budgets:` config section: monthly budgets per dimension value, with warning lines.

    budgets:
      - name: pretrain-gpu          # unique, kebab-case
        dimension: team             # team | project | experiment | any declared dimension
        value: pretrain
        amount: 250000              # per calendar month, in `currency`
        currency: USD
        lines: [0.5, 0.8, 1.0]      # fractions of the amount that raise a finding
        on: [actual, forecast]      # which spend the lines apply to
"""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import Field, field_validator, model_validator

from service.core.config_base import NestedValueError, Strict
from service.core.units import minor_units


class BudgetConfig(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=64)
    dimension: str = "team"
    value: str = Field(min_length=1)
    amount: Decimal = Field(gt=0)
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    lines: tuple[Decimal, ...] = (Decimal("0.5"), Decimal("0.8"), Decimal("1.0"))
    on: tuple[Literal["actual", "forecast"], ...] = ("actual", "forecast")

    @field_validator("lines")
    @classmethod
    def _sorted_positive(cls, lines: tuple[Decimal, ...]) -> tuple[Decimal, ...]:
        if not lines or any(line <= 0 for line in lines):
            raise ValueError("lines must be positive fractions of the amount, e.g. [0.5, 0.8, 1.0]")
        return tuple(sorted(set(lines)))

    @model_validator(mode="after")
    def _at_least_a_minor_unit(self) -> BudgetConfig:
        # below the currency's smallest unit (a cent) a budget shows as 0.00 and any spend exceeds it;
        # no unit is above 1, so a whole amount is not looked up (Babel's tables: ~10 ms of a start)
        if self.amount >= 1:
            return self
        smallest = Decimal(1).scaleb(-minor_units(self.currency))
        if self.amount < smallest:
            raise NestedValueError(("amount",), f"{self.amount} {self.currency} is less than one minor unit of "
                                   f"{self.currency} ({smallest}); write the monthly amount, e.g. 250000")
        return self

    def highest_line(self, spend: Decimal) -> Decimal | None:
        """The highest warning line `spend` reached (None below the lowest)."""
        crossed = [line for line in self.lines if spend >= self.amount * line]
        return crossed[-1] if crossed else None
