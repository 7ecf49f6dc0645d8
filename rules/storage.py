"""What storing bytes costs, for the rules about storage (checkpoint-sprawl, duplicate-datasets,
unbounded-logs): S3 prices by storage class, and sizes as people read them."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pydantic import Field, model_validator

from service.core.config import Strict

GIB = 1024**3


class StoragePrices(Strict):
    """USD per GiB-month by storage class (S3 us-east-1 list prices). Unknown or missing
    classes are priced as `default_class`."""

    per_gib_month: dict[str, Decimal] = Field(default_factory=lambda: {
        "STANDARD": Decimal("0.023"), "INTELLIGENT_TIERING": Decimal("0.023"),
        "REDUCED_REDUNDANCY": Decimal("0.024"), "EXPRESS_ONEZONE": Decimal("0.11"),
        "STANDARD_IA": Decimal("0.0125"), "ONEZONE_IA": Decimal("0.01"), "GLACIER_IR": Decimal("0.004"),
        "GLACIER": Decimal("0.0036"), "DEEP_ARCHIVE": Decimal("0.00099"),
    })
    default_class: str = "STANDARD"

    @model_validator(mode="after")
    def _complete(self) -> StoragePrices:
        if self.default_class not in self.per_gib_month:
            raise ValueError(f"default_class {self.default_class!r} has no price in per_gib_month")
        if any(price < 0 for price in self.per_gib_month.values()):
            raise ValueError("prices must not be negative")
        return self

    def values_sql(self) -> tuple[str, list[Any]]:
        """A (storage_class, usd_per_gib_month) VALUES list and its bound parameters."""
        items = sorted(self.per_gib_month.items())
        return ", ".join("(?, CAST(? AS DECIMAL(38,12)))" for _ in items), [v for kv in items for v in kv]


def storage_cost(bytes_by_class: Mapping[str, int], prices: StoragePrices) -> Decimal:
    """USD per month of storing these bytes, each storage class at its price."""
    total = Decimal(0)
    for storage_class, size in bytes_by_class.items():
        price = prices.per_gib_month.get(storage_class, prices.per_gib_month[prices.default_class])
        total += Decimal(int(size)) * price / GIB
    return total


def gib(size_bytes: int | float | Decimal) -> str:
    return f"{Decimal(str(size_bytes)) / GIB:,.1f} GiB"
