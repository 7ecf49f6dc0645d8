"""Columns the stager converts once per distinct value instead of once per row.

A CSV bill's JSON tags repeat: a 10M-line FOCUS export holds 321 distinct `Tags` texts. Parsing
each line's JSON into a map in the connector's SELECT was over a third of that SELECT's CPU
(json_transform, about 0.6 CPU s per 1M lines; CUR 2.0 CSV's `resource_tags` 0.9). A connector
instead gives such a column as text (PerValuePart) with the SQL it would have run per row; the
stager runs that SQL on the distinct texts it has not met yet and takes the results back to
every row (Converter). Same values, and a bad value fails with the same error: the same SQL
raises it. Figures: bench/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb

from service.core.schema import COST_TYPES

if TYPE_CHECKING:  # Arrow is loaded by the stager that converts, not by the connectors that hand over
    import pyarrow as pa

# Converted values kept per column and SQL (at least a batch's worth: a batch's distinct
# values always fit); beyond it the cache starts again, so a column of unique values costs
# one conversion per row, as in SQL, and bounded memory.
CACHED_VALUES = 1 << 16


@dataclass(frozen=True)
class PerValuePart:
    """A part whose `per_value` columns the stager computes once per distinct value: `rows`
    gives them as text, and each one's SQL (over a text column named `value`, cast to the
    canonical type) is what `relation`, the part as every other reader sees it, computes per row."""

    relation: duckdb.DuckDBPyRelation
    rows: duckdb.DuckDBPyRelation
    per_value: dict[str, str]

    def __getattr__(self, name: str) -> object:  # any other attribute: the canonical relation's
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.relation, name)


@dataclass(frozen=True)
class PerValueSelect:
    """A connector's canonical SELECT (`sql`) and the same SELECT with the `per_value` columns
    as text (`rows`): a PerValuePart once bound."""

    sql: str
    rows: str
    per_value: dict[str, str]

    def part(self, con: duckdb.DuckDBPyConnection) -> PerValuePart:
        return PerValuePart(con.sql(self.sql), con.sql(self.rows), self.per_value)


class Converter:
    """Converts the per-value columns of a delivery's batches, on its own cursor of the
    writer's database (it runs on the staging writer thread while the reading query streams).
    DuckDB runs only for texts not met before: a query per batch cost 2 ms and, beside the
    streaming read, slowed it."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con.cursor()
        self.cached: dict[tuple[str, str], tuple[dict[str | None, int], list[pa.Array]]] = {}

    def convert(self, batch: pa.RecordBatch, per_value: dict[str, str]) -> pa.RecordBatch:
        """The batch with each `per_value` column (text) replaced, in its place, by its SQL's value."""
        for name, sql in per_value.items():
            index = batch.schema.get_field_index(name)
            batch = batch.set_column(index, name, self._column(batch.column(index), name, sql))
        return batch

    def _column(self, column: pa.Array, name: str, sql: str) -> pa.Array:
        import pyarrow as pa
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(column, null_encoding="encode")  # the SQL decides a null's value
        texts = encoded.dictionary.to_pylist()
        positions, chunks = self.cached.setdefault((name, sql), ({}, []))
        new = [text for text in texts if text not in positions]
        if len(positions) + len(new) > CACHED_VALUES:
            positions.clear()
            chunks.clear()
            new = texts
        if new:
            chunks.append(self._run(new, name, sql))
            positions.update({text: number for number, text in enumerate(new, len(positions))})
            if len(chunks) > 1:
                chunks[:] = [pa.concat_arrays(chunks)]
        lookup = pa.array([positions[text] for text in texts], pa.int32())
        return chunks[0].take(lookup.take(encoded.indices))

    def _run(self, texts: list[str | None], name: str, sql: str) -> pa.Array:
        """The SQL's value of each text, in DuckDB."""
        import pyarrow as pa

        values = self.con.from_arrow(pa.table({"value": pa.array(texts, pa.string())}))
        return values.project(f"CAST({sql} AS {COST_TYPES[name]}) AS value").to_arrow_table().column(0).combine_chunks()

    def close(self) -> None:
        self.con.close()
