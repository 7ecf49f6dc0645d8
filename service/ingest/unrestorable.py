"""Damaged cost partitions a source's ingest cannot restore: the source no longer holds their
period (the export's retention, an export re-created without its history), so no delivery of
the run reads it again. Every query refuses such a partition and names `spendlake ingest` as
the fix (service/core/integrity.py partition_error): ingest fails the period instead of
passing over it, naming the two ways out (a backup of the file, `forget --period`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from connectors.base import Delivery
from service.core.errors import DataError
from service.core.integrity import PartitionCheck


def unrestorable(damaged: Iterable[PartitionCheck], source: str,
                 read: Sequence[tuple[Delivery, str, Sequence[str]]]) -> list[tuple[str, DataError]]:
    """(period, error) for each of `source`'s `damaged` partitions (missing, truncated, altered)
    that none of the run's deliveries (`read`: each delivery, its outcome's status, the periods it
    committed) holds. None when a delivery of unknown periods failed or waits (the source's own
    failure among them): it may hold them, and its own error is said."""
    if any(delivery.periods is None and status in ("failed", "waiting") for delivery, status, _ in read):
        return []
    held = {period for delivery, _, committed in read for period in (*(delivery.periods or ()), *committed)}
    return [(check.period, _error(check)) for check in damaged
            if check.source == source and check.state != "unlisted" and check.period not in held]


def _error(check: PartitionCheck) -> DataError:
    forget = f"spendlake forget {check.source} --period {check.period}"
    return DataError(f"its cost partition is {check.state}" + (f" ({check.detail})" if check.detail else "")
                     + f" and the source no longer holds {check.period}, so ingest cannot restore it",
                     where=str(check.path),
                     hint=f"restore it from a backup, or run `{forget}` to drop the period "
                          "(its ledger row and rollups with it)")
