"""Columns the stager converts once per distinct value instead of once per row.

A CSV bill's JSON tags repeat: a 10M-line FOCUS export holds 321 distinct `Tags` texts. Parsing
each line's JSON into a map in the connector's SELECT was over a third of that SELECT's CPU
(json_transform, about 0.6 CPU s per 1M lines; CUR 2.0 CSV's `resource_tags` 0.9). A connector
instead gives such a column as text (PerValuePart) with the SQL it would have run per row; the
stager runs that SQL on the distinct texts it has not met yet and takes the results back to
every row (Converter). Tags that do not repeat (a run-id tag per line) only pay the text's round
trip through Arrow that way: a part whose first rows' texts are mostly distinct is read through
its canonical SELECT instead (`streamed`). Same values, and a bad value fails with the same
error: the same SQL raises it. In a part over several files (file_parts.FilesPart) that SQL names a file holding the
text (hidden_columns.FILE_INDEX, given beside the text), as reading that file alone did. The
writer's read does not keep file order, so a bad text in several files may name any of them.
Figures: bench/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb

from service.core.hidden_columns import FILE_INDEX
from service.core.schema import COST_TYPES

if TYPE_CHECKING:  # Arrow is loaded by the stager that converts, not by the connectors that hand over
    import pyarrow as pa

# Converted values kept per column and SQL (at least a batch's worth: a batch's distinct
# values always fit); beyond it, or when a batch meets none of them, the cache starts again
# with that batch's, so a column of unique values costs one conversion per row, as in SQL,
# and bounded memory.
CACHED_VALUES = 1 << 16
# Rows of a part whose texts are counted to choose: per distinct value when they repeat, else per row
HEAD_ROWS = 1 << 16


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


def streamed(part: duckdb.DuckDBPyRelation | PerValuePart) -> tuple[duckdb.DuckDBPyRelation, dict[str, str]]:
    """What the stager streams of `part` and the columns it converts per distinct value: a
    PerValuePart's text rows when the texts of its first HEAD_ROWS rows repeat, else its canonical
    relation, each row converted in the SELECT: in DuckDB's pipeline that costs less than the
    round trip through Arrow (1M unique FOCUS Tags, a run-id tag per line: 16.6 CPU s against
    21.9 per value; bench/README.md)."""
    if not isinstance(part, PerValuePart):
        return part, {}
    distinct = ", ".join(f'count(DISTINCT "{name}")' for name in part.per_value if name in COST_TYPES)
    [(rows, *counts)] = part.rows.limit(HEAD_ROWS).aggregate(f"count(*), {distinct}").fetchall()
    if any(count > rows // 2 for count in counts):
        return part.relation, {}
    return part.rows, part.per_value


class Converter:
    """Converts the per-value columns of a delivery's batches, on its own cursor of the
    writer's database (it runs on the staging writer thread while the reading query streams).
    DuckDB runs only for texts not met before: a query per batch cost 2 ms and, beside the
    streaming read, slowed it."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con.cursor()
        self.cached: dict[tuple[str, str], tuple[pa.Array, pa.Array]] = {}  # texts met, and their values

    def convert(self, batch: pa.RecordBatch, per_value: dict[str, str], files: pa.Array | None = None) -> pa.RecordBatch:
        """The batch with each `per_value` column (text) replaced, in its place, by its SQL's value.
        `files`: the batch's FILE_INDEX when its part spans several files (file_parts.FilesPart)."""
        for name, sql in per_value.items():
            index = batch.schema.get_field_index(name)
            batch = batch.set_column(index, name, self._column(batch.column(index), name, sql, files))
        return batch

    def _column(self, column: pa.Array, name: str, sql: str, files: pa.Array | None) -> pa.Array:
        """Texts are looked up and values kept in Arrow: a Python dict made a Python string of
        every text, which a column of unique texts (a `run-id` tag per line) paid per line."""
        import pyarrow as pa
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(column, null_encoding="encode")  # the SQL decides a null's value
        texts, first_files = encoded.dictionary, _first_files(encoded, files)
        met, values = self.cached.get((name, sql), (texts[:0], None))
        found = pc.index_in(texts, value_set=met, skip_nulls=False)  # each text's place in `met`, null if new
        if found.null_count == len(texts) or len(met) + found.null_count > CACHED_VALUES:
            # none met (unique texts) or too many: the batch's own are kept, no values concatenated
            values = self._run(texts, name, sql, first_files)
            self.cached[(name, sql)] = (texts, values)
            return values.take(encoded.indices)
        if found.null_count:
            new = pc.is_null(found)
            codes = pc.indices_nonzero(new)
            converted = self._run(texts.take(codes), name, sql, None if files is None else first_files.take(codes))
            found = pc.replace_with_mask(found, new, pa.array(range(len(met), len(met) + len(codes)), found.type))
            met, values = pa.concat_arrays([met, texts.take(codes)]), pa.concat_arrays([values, converted])
            self.cached[(name, sql)] = (met, values)
        return values.take(found.take(encoded.indices))

    def _run(self, texts: pa.Array, name: str, sql: str, files: pa.Array | None) -> pa.Array:
        """The SQL's value of each text, in DuckDB (beside each text a file holding it, which the
        SQL of a part over several files names when the text is bad)."""
        import pyarrow as pa

        columns = {"value": texts} | ({} if files is None else {FILE_INDEX: files})
        values = self.con.from_arrow(pa.table(columns))
        return values.project(f"CAST({sql} AS {COST_TYPES[name]}) AS value").to_arrow_table().column(0).combine_chunks()

    def close(self) -> None:
        self.con.close()


def _first_files(encoded: pa.DictionaryArray, files: pa.Array | None) -> pa.Array | None:
    """The least FILE_INDEX holding each of the dictionary's texts in this batch, in its order: a
    file that holds the text, named for a bad one as reading that file alone names it."""
    import pyarrow as pa

    if files is None:
        return None
    firsts = pa.table({"code": encoded.indices, "file": files}).group_by("code").aggregate([("file", "min")])
    return firsts.sort_by("code").column("file_min").combine_chunks()  # every code is in the batch
