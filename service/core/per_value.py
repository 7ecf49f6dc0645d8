"""Columns the stager converts once per distinct value instead of once per row.

A CSV bill's JSON tags repeat: a 10M-line FOCUS export holds 321 distinct `Tags` texts. Parsing
each line's JSON into a map in the connector's SELECT was over a third of that SELECT's CPU
(json_transform, about 0.6 CPU s per 1M lines; CUR 2.0 CSV's `resource_tags` 0.9). Its times
repeat too (a month of hourly charge periods: 744 texts), and parsing them was a third of a
FOCUS CSV's SELECT. A connector instead gives such a column as text (PerValuePart) with the SQL
it would have run per row; the stager runs that SQL on the distinct texts it has not met yet and
takes the results back to every row (Converter). Texts that do not repeat (a run-id tag per
line) only pay the round trip through Arrow that way: a column whose texts are mostly distinct
in a part's first rows is computed by the SELECT instead (`streamed`). Same values, and a bad
value fails with the same error: the same SQL raises it. In a part over several files
(file_parts.FilesPart) that SQL names a file holding the text (hidden_columns.FILE_INDEX, given
beside the text), as reading that file alone did. The writer's read does not keep file order,
so a bad text in several files may name any of them. Figures: bench/README.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb

from service.core.hidden_columns import FILE_INDEX
from service.core.schema import COST_TYPES, cost_select_list

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
    canonical type) is what `relation`, the part as every other reader sees it, computes per row.
    `some_as_text`, when given, is the part with only the named columns as text."""

    relation: duckdb.DuckDBPyRelation
    rows: duckdb.DuckDBPyRelation
    per_value: dict[str, str]
    some_as_text: Callable[[frozenset[str]], duckdb.DuckDBPyRelation] | None = None

    def __getattr__(self, name: str) -> object:  # any other attribute: the canonical relation's
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.relation, name)


@dataclass(frozen=True)
class PerValueSelect:
    """A connector's canonical SELECT: its list (`columns`: canonical column → SQL, for
    cost_select_list with `absent_as_null`) and what follows it (`tail`: hidden columns, FROM);
    `texts`, the SQL of each `per_value` column's text. A PerValuePart once bound."""

    columns: dict[str, str]
    tail: str
    texts: dict[str, str]
    per_value: dict[str, str]
    absent_as_null: bool = True

    @property
    def sql(self) -> str:
        return self.select(frozenset())

    def select(self, as_text: frozenset[str]) -> str:
        """The SELECT with the `as_text` per-value columns as text, the others computed."""
        texts = {name: self.texts[name] for name in as_text}
        listed = cost_select_list(self.columns | texts, absent_as_null=self.absent_as_null, as_text=as_text)
        return f"SELECT {listed}{self.tail}"

    def part(self, con: duckdb.DuckDBPyConnection) -> PerValuePart:
        return PerValuePart(con.sql(self.sql), con.sql(self.select(frozenset(self.per_value))), self.per_value,
                            lambda as_text: con.sql(self.select(as_text)))


def streamed(part: duckdb.DuckDBPyRelation | PerValuePart,
             chosen: dict[tuple[str, ...], tuple[str, ...]] | None = None) -> tuple[duckdb.DuckDBPyRelation, dict[str, str]]:
    """What the stager streams of `part` and the columns it converts per distinct value. A column
    whose texts are mostly distinct in the part's first HEAD_ROWS rows is converted per row in the
    SELECT, which in DuckDB's pipeline costs less than the round trip through Arrow (1M unique
    FOCUS Tags, a run-id tag per line: 16.6 CPU s against 21.9 per value; bench/README.md), and so
    is every per-value column before it in the SELECT: the stager's conversions fail after the
    SELECT's, so a file whose values are bad in several columns names the first, as the SELECT
    does. A part that cannot give only some columns as text (no `some_as_text`) then streams its
    canonical relation. `chosen` (a delivery's, kept by the stager): the choice made by its first
    part of the same per-value columns, taken again without counting: the count is a query over
    the part's head, the whole of a small part (200 CSV.gz parts of ~11 lines: 43 of the stage's
    78 s), and only how fast a part is read depends on it, never a value or an error."""
    if not isinstance(part, PerValuePart):
        return part, {}
    key = tuple(part.per_value)
    if chosen is not None and key in chosen:
        repeating = {name: part.per_value[name] for name in chosen[key]}
    else:
        distinct = ", ".join(f'count(DISTINCT "{name}")' for name in part.per_value)
        [(rows, *counts)] = part.rows.limit(HEAD_ROWS).aggregate(f"count(*), {distinct}").fetchall()
        last_distinct = max((place for place, count in enumerate(counts) if count > rows // 2), default=-1)
        repeating = dict(list(part.per_value.items())[last_distinct + 1:])
        if chosen is not None:
            chosen[key] = tuple(repeating)
    if len(repeating) == len(part.per_value):
        return part.rows, part.per_value
    if not repeating or part.some_as_text is None:
        return part.relation, {}
    return part.some_as_text(frozenset(repeating)), repeating


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
