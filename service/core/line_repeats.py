"""Line items a delivery holds more than once: staging writes each line's id, interval and
their hash to LINE_ITEMS_FILE beside the staged periods, and `find_repeats` reads them back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from service.core.hidden_columns import LINE_ITEM_KEY

LINE_ITEM_HASH = "__spendlake_line_item_hash"  # hash(id, interval), what the repeats are looked for by
LINE_ITEMS_FILE = "line_items.parquet"
LISTED_REPEATS = 5


@dataclass(frozen=True)
class Repeats:
    """Line items (id and time interval) that a delivery holds more than once."""

    line_items: int  # how many line items appear more than once
    extra_rows: int  # the rows beyond the first of each
    first: tuple[str, ...]  # the first few, in the delivery's order: "<id> (<time interval>)"

    def __str__(self) -> str:
        return (f"{self.line_items:,} line item id(s) appear more than once ({self.extra_rows:,} extra row(s)): "
                f"{', '.join(self.first)}{', ...' if self.line_items > len(self.first) else ''}")


def find_repeats(con: duckdb.DuckDBPyConnection, stage: Path) -> Repeats | None:
    """The line items the staged keys hold more than once. Their hashes are grouped first
    (8 bytes a key, where grouping the ids and intervals held hundreds of MB at 10M lines;
    DuckDB spills beyond the writer's limit), then only the rows whose hash repeats (the
    repeats, and any hash collision) are grouped by id and interval."""
    keys, line_item, interval = str(stage / LINE_ITEMS_FILE), *LINE_ITEM_KEY
    candidates = str(stage / "repeated_hashes.parquet")
    con.sql(f"SELECT {LINE_ITEM_HASH} FROM read_parquet(?) WHERE {LINE_ITEM_HASH} IS NOT NULL "
            f"GROUP BY {LINE_ITEM_HASH} HAVING count(*) > 1", params=[keys]).write_parquet(candidates)
    [(found,)] = con.execute("SELECT count(*) FROM read_parquet(?)", [candidates]).fetchall()
    if not found:
        return None
    [(count, extra, first)] = con.execute(
        f"SELECT count(*), sum(n - 1), min_by({line_item} || coalesce(' (' || {interval} || ')', ''), first_row, {LISTED_REPEATS}) "
        f"FROM (SELECT {line_item}, {interval}, count(*) AS n, min(file_row_number) AS first_row "
        f"      FROM read_parquet(?, file_row_number = true) "
        f"      WHERE {LINE_ITEM_HASH} IN (SELECT {LINE_ITEM_HASH} FROM read_parquet(?)) "
        f"      GROUP BY {line_item}, {interval} HAVING count(*) > 1)", [keys, candidates]).fetchall()
    return Repeats(int(count), int(extra), tuple(first)) if count else None
