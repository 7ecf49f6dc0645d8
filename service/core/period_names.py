"""The billing period ('YYYY-MM') of each staged row, named from its BillingPeriodStart.

The stager's SELECT computed `strftime(BillingPeriodStart, '%Y-%m')` on every line and exported
the text to Arrow beside the row, some 500 instructions a line (bench/README.md), though a batch
holds one or a few distinct starts. The stager instead names each distinct start once, by the
same strftime in DuckDB, and keeps the name: a start before year 1000, after 9999 or before the
common era is named as before, so the error that rejects it quotes the same text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import duckdb

if TYPE_CHECKING:  # Arrow is loaded by the stager
    import pyarrow as pa

PERIOD_START = "BillingPeriodStart"


@dataclass
class BatchPeriods:
    """The periods of one batch's rows: `found`, the distinct ones (None for a row without a
    start); `of_rows()` each row's, made only when a batch holds several."""

    starts: pa.Array
    distinct: pa.Array
    names: list[str | None]
    found: list[str | None] = field(init=False)
    _rows: pa.Array | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.found = list(dict.fromkeys(self.names))

    def of_rows(self) -> pa.Array:
        import pyarrow as pa
        import pyarrow.compute as pc

        if self._rows is None:
            places = pc.index_in(self.starts, value_set=self.distinct, skip_nulls=False)
            self._rows = pa.array(self.names, pa.string()).take(places)
        return self._rows


class PeriodNames:
    """Names the periods of a delivery's batches, on its own cursor of the writer's database (it
    runs on the staging writer thread); DuckDB runs only for starts not met before."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con.cursor()
        self.named: dict[object, str | None] = {}  # a start's raw value (null included) → its period

    def of(self, batch: pa.RecordBatch) -> BatchPeriods:
        import pyarrow as pa
        import pyarrow.compute as pc

        starts = batch.column(PERIOD_START)
        distinct = pc.unique(starts)
        raw = distinct.view(pa.int64()).to_pylist() if pa.types.is_timestamp(distinct.type) else distinct.to_pylist()
        new = [place for place, value in enumerate(raw) if value not in self.named]
        if new:
            texts = self.con.from_arrow(pa.table({"s": distinct.take(pa.array(new, pa.int64()))}))
            for place, (text,) in zip(new, texts.project("strftime(s, '%Y-%m')").fetchall()):
                self.named[raw[place]] = text
        return BatchPeriods(starts, distinct, [self.named[value] for value in raw])

    def close(self) -> None:
        self.con.close()
