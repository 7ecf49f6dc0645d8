"""The `budgets:` config section: monthly budgets per dimension value, with warning lines.

    budgets:
      - name: pretrain-gpu          # unique, kebab-case
        dimension: team             # team | project | experiment | any declared dimension
        value: pretrain
        amount: 250000              # per calendar month, in `currency`
        currency: USD               # an ISO 4217 code
        lines: [0.5, 0.8, 1.0]      # fractions of the amount that raise a finding
        on: [actual, forecast]      # which spend the lines apply to
        cost: billed                # billed (the invoice's, the default) | effective (amortized)

`cost` is the cost a budget counts, as `attribute --cost` names it: `billed` what the invoice
charges each day (a Savings Plan's or reservation's fee on its own line, the usage it covers at
0), `effective` the amortized cost (that fee spread over the usage it covered): a team whose GPUs
run on a commitment spends $0 billed and its share of the commitment effective.

A list's errors are told at once: each budget's own, a name used twice and a dimension not
declared (`each_budget`), where a section's checks would wait for its budgets' fields to pass.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from service.core.config_base import NestedValueError, Strict
from service.core.config_plugins import item_error
from service.core.suggest import closest
from service.core.schema import MONEY
from service.core.units import minor_units

# the lake's money type holds at most this many digits before the point (DECIMAL(38,12): 26); a
# budget above it could never be reached, and its findings could not print it
_PRECISION, _SCALE = map(int, re.findall(r"\d+", MONEY))
WHOLE_DIGITS = _PRECISION - _SCALE
# a line is a fraction of the amount: 10 is 1000 %, above it `lines: [50, 80, 100]` meant percents
MAX_LINE = Decimal(10)


class BudgetConfig(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=64)
    dimension: str = "team"
    value: str = Field(min_length=1)
    amount: Decimal = Field(gt=0)
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    lines: tuple[Decimal, ...] = (Decimal("0.5"), Decimal("0.8"), Decimal("1.0"))
    on: tuple[Literal["actual", "forecast"], ...] = ("actual", "forecast")
    cost: Literal["billed", "effective"] = "billed"

    @field_validator("amount")
    @classmethod
    def _fits_the_lake(cls, amount: Decimal) -> Decimal:
        if amount.adjusted() >= WHOLE_DIGITS:
            raise ValueError(f"{amount} does not fit the lake's money type {MONEY} (at most {WHOLE_DIGITS} digits "
                             "before the point); write the monthly amount, e.g. 250000")
        return amount

    @field_validator("currency")
    @classmethod
    def _iso_4217(cls, currency: str) -> str:
        if currency == "USD":  # the default: no table loaded (Babel's: ~10 ms of a start)
            return currency
        from babel.numbers import list_currencies

        known = list_currencies()
        if currency not in known:
            near = closest(currency, known)
            raise ValueError(f"{currency} is not an ISO 4217 currency code"
                             + (f" (closest: {', '.join(near)})" if near else "")
                             + "; write the code the bill is in, e.g. USD or EUR")
        return currency

    @field_validator("lines")
    @classmethod
    def _sorted_positive(cls, lines: tuple[Decimal, ...]) -> tuple[Decimal, ...]:
        if not lines or any(line <= 0 for line in lines):
            raise ValueError("lines must be positive fractions of the amount, e.g. [0.5, 0.8, 1.0]")
        if percents := [line for line in lines if line > MAX_LINE]:
            raise ValueError(f"lines are fractions of the amount, {percents[0]} is {percents[0] * 100:f} %; "
                             f"write {percents[0] / 100:f} for {percents[0]:f} %, e.g. [0.5, 0.8, 1.0]")
        if twice := sorted({line for line in lines if lines.count(line) > 1}):
            raise ValueError(f"{', '.join(format(line, 'f') for line in twice)} is written twice in lines; "
                             "write each line once")
        return tuple(sorted(lines))

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


def each_budget(items: Any, handler: Callable[[Any], Any],
                undeclared: Callable[[str], str | None] | None) -> tuple[BudgetConfig, ...]:
    """`budgets:` validated, every error of the list raised at once (pydantic's ValidationError,
    paths under each budget's index): each budget's own, a name used twice, and a dimension
    `undeclared` tells (its message; None for a declared one; no check without it: the
    attribution section failed, and says so)."""
    from pydantic_core import ValidationError as CoreValidationError

    if not isinstance(items, (list, tuple)):
        return handler(items)  # not a list: pydantic says so
    budgets, errors, names = [], [], set()
    for index, item in enumerate(items):
        try:
            budgets.append(BudgetConfig.model_validate(item))
            name, dimension = budgets[-1].name, budgets[-1].dimension
        except ValidationError as exc:
            errors += [{"type": e["type"], "loc": (index, *e["loc"]), "input": e["input"], "ctx": e.get("ctx") or {}}
                       for e in exc.errors()]
            fields = item if isinstance(item, dict) else {}  # what it says of the two, read as written
            name = fields.get("name")
            dimension = fields.get("dimension", BudgetConfig.model_fields["dimension"].default)
        if isinstance(name, str) and name in names:
            errors.append(item_error(index, ("name",), f"budget name {name!r} is used twice", name))
        if isinstance(name, str):  # a failed budget's raw name may be a list (unhashable), said by pydantic
            names.add(name)
        if undeclared and isinstance(dimension, str) and (message := undeclared(dimension)):
            errors.append(item_error(index, ("dimension",), message, dimension))
    if errors:
        raise CoreValidationError.from_exception_data("budgets", errors)
    return tuple(budgets)
