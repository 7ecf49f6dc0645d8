"""The end of a cost file's latest usage charge period: what a commit records as its ledger
entry's `data_through` (service/core/commit.py, in its one read of the staged file), and what
service/core/coverage.py reads from the files of entries recorded before it was kept (usage
only: see coverage's docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from service.core.timewindow import iso_utc

USAGE_LINE = "coalesce(ChargeCategory, 'Usage') = 'Usage'"  # a line no category names is usage
USAGE_ONLY = f"FILTER (WHERE {USAGE_LINE})"
USAGE_END = f"max(ChargePeriodEnd) {USAGE_ONLY}"
USAGE_BEGINS = f"min(ChargePeriodStart) {USAGE_ONLY}"  # the ledger's data_from, coverage.data_begins


def usage_through(con: duckdb.DuckDBPyConnection, paths: Sequence[Path | str]) -> dict[str, str]:
    """File → the end of its latest usage charge period (ISO UTC), for the files with usage lines."""
    rows = con.execute(f"SELECT filename, {USAGE_END} FROM read_parquet(?, filename = true) GROUP BY filename",
                       [[str(p) for p in paths]]).fetchall()
    return {name: usage_end_text(end) for name, end in rows if end is not None}


def usage_end_text(end: datetime) -> str:
    """A USAGE_END value as the ledger keeps it (ISO UTC; the lake's times are UTC without a zone)."""
    return iso_utc(end.replace(tzinfo=timezone.utc))
