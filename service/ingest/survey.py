"""The billing periods a loose file's rows hold (service.ingest.periods reads each new or changed file once for them)."""

from __future__ import annotations

import duckdb

from connectors.base import CostConnector, Delivery
from service.core.errors import DataError, duckdb_error
from service.core.lake import Lake
from service.core.staging import PERIOD_RE


def survey(lake: Lake, con: duckdb.DuckDBPyConnection, connector: CostConnector, file: Delivery) -> list[str]:
    """The billing periods a file's rows hold, read through its connector."""
    uri = file.files[0]
    with lake.scratch() as scratch:
        parts = connector.read(file, con, scratch)  # also checks the columns: another dataset, a missing one
        from_footer = connector.footer_periods(file, scratch)
        found = set(from_footer) if from_footer is not None else _read_periods(parts, uri)
    bad = sorted(str(p) for p in found if p is None or not PERIOD_RE.match(p))
    if bad:
        raise DataError(f"rows with an invalid or missing BillingPeriodStart ({bad[0]})", where=uri,
                        hint="every cost row needs a billing period")
    return sorted(found)  # type: ignore[arg-type]


def _read_periods(parts: duckdb.DuckDBPyRelation | list[duckdb.DuckDBPyRelation], uri: str) -> set[str | None]:
    found: set[str | None] = set()
    for part in [parts] if isinstance(parts, duckdb.DuckDBPyRelation) else parts:
        try:
            found |= {row[0] for row in part.project("strftime(BillingPeriodStart, '%Y-%m')").distinct().fetchall()}
        except duckdb.Error as exc:
            raise duckdb_error(exc, "cannot read the file", where=uri) from None
    return found
