"""The end of a cost file's latest usage charge period: what a commit records as its ledger
entry's `data_through`, and what service/core/coverage.py reads from the files of entries
recorded before it was kept (usage only: see coverage's docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timezone
from pathlib import Path

import duckdb

from service.core.timewindow import iso_utc


def usage_through(con: duckdb.DuckDBPyConnection, paths: Sequence[Path | str]) -> dict[str, str]:
    """File → the end of its latest usage charge period (ISO UTC), for the files with usage lines."""
    rows = con.execute(
        "SELECT filename, max(ChargePeriodEnd) FROM read_parquet(?, filename = true) "
        "WHERE coalesce(ChargeCategory, 'Usage') = 'Usage' GROUP BY filename", [[str(p) for p in paths]]).fetchall()
    return {name: iso_utc(end.replace(tzinfo=timezone.utc)) for name, end in rows if end is not None}
