"""The lines an export reads: plain cost lines, or attributed ones (service/attribution's per-line
attribution, on the same snapshot and window: shared splits and the shared clusters' job and
idle parts)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone

import duckdb

from service.attribution import attributed_lines as attribution_lines
from service.core.config import Config
from service.core.lake import Lake
from service.core.schema import LINE_BILLED, line_products_sql
from service.core.snapshot import Snapshot
from service.core.timewindow import MAX_INSTANT, MIN_INSTANT, Window

START = "coalesce(ChargePeriodStart, BillingPeriodStart)"


def window_filter(since: datetime | None, until: datetime | None, sources: Sequence[str]) -> tuple[str, dict]:
    """SQL over `costs` (and its bound values): lines of `sources` whose charge period starts in [since, until)."""
    parts, params = ["list_contains($sources, source)"], {"sources": list(sources)}
    if since is not None:
        parts.append(f"{START} >= $since")
        params["since"] = _naive(since)
    if until is not None:
        parts.append(f"{START} < $until")
        params["until"] = _naive(until)
    return " AND ".join(parts), params


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(timezone.utc).replace(tzinfo=None)


@contextmanager
def plain_lines(lake: Lake, snapshot: Snapshot, since: datetime | None, until: datetime | None,
                sources: Sequence[str]) -> Iterator[tuple[duckdb.DuckDBPyConnection, str, tuple[str, ...]]]:
    """(connection, `export_lines`, no extra columns): the cost lines to export, with their
    LINE_PRODUCTS and LINE_BILLED."""
    where, params = window_filter(since, until, sources)
    products = ", ".join(f"{sql} AS {name}" for name, sql in (line_products_sql() | LINE_BILLED).items())
    with lake.query(snapshot, tables=("costs",)) as con:  # a damaged findings or plans file stops no export
        con.sql(f"SELECT *, {products} FROM costs WHERE {where}", params=params).create_view("export_lines")
        yield con, "export_lines", ()


def attributed_lines(config: Config, lake: Lake, snapshot: Snapshot, since: datetime | None, until: datetime | None,
                     sources: Sequence[str], allocated_prefix: str):
    """(connection, `export_lines`, the `x_<dimension>` and Allocated columns): the lines to
    export with their attribution; shared splits weighed over the export's window."""
    where, params = window_filter(since, until, sources)
    window = None if since is None and until is None else Window(since or MIN_INSTANT, until or MAX_INSTANT)
    return attribution_lines(lake, config, snapshot, where=where, params=params, window=window,
                             allocated_prefix=allocated_prefix)
