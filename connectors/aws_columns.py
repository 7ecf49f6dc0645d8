"""The columns of an AWS billing file, looked up by their Athena / CUR 2.0 snake_case name,
and the SQL that reads one of them as text, a UTC time or an exact quantity.

Legacy `lineItem/UnblendedCost`, Athena `line_item_unblended_cost` and CUR 2.0
`line_item_unblended_cost` are the same field. Where the legacy header and Athena spell a
field apart (`savingsPlan/SavingsPlanARN` → `savings_plan_savings_plan_arn`, Athena and
CUR 2.0 `savings_plan_savings_plan_a_r_n`), callers pass both names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import duckdb

from connectors.csvfile import ident
from service.core.schema import QUANTITY

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake_name(column: str) -> str:
    """The Athena / CUR 2.0 name of a column: 'lineItem/UnblendedCost' → 'line_item_unblended_cost'."""
    parts = [_CAMEL.sub("_", part) for part in column.split("/")]
    return re.sub(r"[^a-z0-9]+", "_", "_".join(parts).lower()).strip("_")


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class AwsColumns:
    """The columns of one input relation, looked up by snake_case name. `headers` maps
    DuckDB's column names to the file's own where DuckDB renamed a repeated header."""

    def __init__(self, relation: duckdb.DuckDBPyRelation, headers: dict[str, str] | None = None):
        self.types = {name: str(kind) for name, kind in zip(relation.columns, relation.types)}
        self.by_snake: dict[str, str] = {}
        self.spellings: dict[str, list[str]] = {}  # snake_case name → the file's headers that give it
        for name in relation.columns:
            header = (headers or {}).get(name, name)
            self.by_snake.setdefault(snake_name(header), name)
            self.spellings.setdefault(snake_name(header), []).append(header)

    def has(self, field: str) -> bool:
        return field in self.by_snake

    def raw(self, field: str) -> str:
        return ident(self.by_snake[field])

    def is_text(self, field: str) -> bool:
        return self.types[self.by_snake[field]] == "VARCHAR"

    def missing(self, fields: Sequence[str]) -> list[str]:
        return [f for f in fields if not self.has(f)]

    def first(self, *fields: str) -> str | None:
        """The first of `fields` the relation has."""
        return next((f for f in fields if self.has(f)), None)


def text(columns: AwsColumns, field: str | None, fallback: str = "NULL") -> str:
    if field is None or not columns.has(field):
        return fallback
    expr = columns.raw(field)
    return f"NULLIF(CAST({expr} AS VARCHAR), '')" if columns.is_text(field) else f"CAST({expr} AS VARCHAR)"


def first_text(columns: AwsColumns, fields: Sequence[str]) -> str:
    """The first non-empty of `fields` (one field's spellings) as text; NULL when the file has none."""
    return "coalesce(" + ", ".join([text(columns, f) for f in fields] + ["NULL"]) + ")"


def timestamp(columns: AwsColumns, field: str) -> str:
    if not columns.has(field):
        return "NULL"
    expr = columns.raw(field)
    # Text times carry 'Z' or an offset: through TIMESTAMPTZ so the offset is honoured (session is UTC).
    if columns.is_text(field):
        return f"CAST(CAST(NULLIF({expr}, '') AS TIMESTAMPTZ) AS TIMESTAMP)"
    return f"CAST({expr} AS TIMESTAMP)"


def quantity(columns: AwsColumns, field: str | None) -> str:
    """A quantity as an exact decimal; a value that is not a number is NULL (quantities never
    fail a period, costs do). A numeric column (CUR 2.0 Parquet) is cast as it is, like the
    money fields: through its text it would cost a second per million rows."""
    if field is None or not columns.has(field):
        return "NULL"
    if columns.is_text(field):
        return f"TRY_CAST(NULLIF({columns.raw(field)}, '') AS {QUANTITY})"
    return f"TRY_CAST({columns.raw(field)} AS {QUANTITY})"
