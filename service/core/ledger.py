"""The delivery ledger's entries: what each committed (source, billing period) came from.

The ledger itself is one JSON file in the lake (`_ledger/deliveries.json`), written only by
service.core.lake; this module is its format.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from decimal import Decimal

from service.core.errors import DataError
from service.core.units import exact_text


@dataclass(frozen=True)
class CurrencyTotals:
    currency: str | None
    rows: int
    billed_cost: Decimal | None
    effective_cost: Decimal | None


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

    @property
    def key(self) -> tuple[str, str]:
        return self.source, self.billing_period

    def to_json(self) -> dict:
        data = asdict(self)
        data["totals"] = [
            {**asdict(t), "billed_cost": exact_text(t.billed_cost), "effective_cost": exact_text(t.effective_cost)}
            for t in self.totals
        ]
        data["files"] = list(self.files)
        return data

    @classmethod
    def from_json(cls, data: dict) -> LedgerEntry:
        totals = tuple(
            CurrencyTotals(
                currency=t["currency"],
                rows=int(t["rows"]),
                billed_cost=_dec(t["billed_cost"]),
                effective_cost=_dec(t["effective_cost"]),
            )
            for t in data["totals"]
        )
        return cls(**{**data, "totals": totals, "files": tuple(data.get("files", ()))})


def _dec(value: str | None) -> Decimal | None:
    return None if value is None else Decimal(value)


def parse_ledger(text: str, where: str) -> list[LedgerEntry]:
    """The entries of a `_ledger/deliveries.json` read from `where`."""
    try:
        return [LedgerEntry.from_json(item) for item in json.loads(text)["entries"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"the delivery ledger is unreadable: {exc}", where=where,
                        hint="restore it from a backup, or re-ingest every source") from None


