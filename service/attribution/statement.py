"""One SQL statement with its named parameters (`$p3`, `$since`: a value is bound where it is
used, so no order of concatenation can misplace one), the temporary tables it reads filled
first (`run_setup`), and the same statement in Spark's or Trino's dialect (`transpile`):
there `map[key]` raises on a missing key, so map access becomes TRY_ELEMENT_AT (Spark) /
ELEMENT_AT (Trino), which return NULL like DuckDB's bracket does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from service.attribution.allocation import Stage


@dataclass
class Params:
    """The named parameters of one statement being built: `bind(value)` returns the marker
    (`$p0`, or `$name` when named) that stands for `value` in the SQL text."""

    values: dict[str, Any] = field(default_factory=dict)

    def bind(self, value: Any, name: str | None = None) -> str:
        name = name or f"p{len(self.values)}"
        if name in self.values and self.values[name] is not value:
            raise ValueError(f"parameter ${name} bound twice")
        self.values[name] = value
        return f"${name}"


@dataclass
class Sql:
    """A statement and its named parameters; `setup`: statements that fill the temporary
    tables it reads (shared GPU clusters), to run first on the same connection (`run_setup`);
    `stage`: those tables' names."""

    text: str
    params: dict[str, Any]
    setup: tuple[Sql, ...] = ()
    stage: Stage | None = None


def used(text: str, params: dict[str, Any]) -> dict[str, Any]:
    """The parameters `text` names (DuckDB refuses any it does not)."""
    return {name: value for name, value in params.items() if re.search(rf"\${re.escape(name)}\b", text)}


def run_setup(con, sql: Sql) -> None:
    """Fill the temporary tables `sql` reads, on `con` (the connection it will run on)."""
    for step in sql.setup:
        con.execute(step.text, used(step.text, step.params))


# Map access that returns NULL for a missing key, per engine (DuckDB's `map[key]` does).
MAP_ACCESS = {"spark": "TRY_ELEMENT_AT", "trino": "ELEMENT_AT"}


def transpile(sql: Sql, dialect: str) -> str:
    """`sql` in another engine's dialect, the same named parameters (`$p0` becomes `:p0`)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ErrorLevel

    function = MAP_ACCESS[dialect]

    def map_access(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1:  # we index only maps
            return exp.Anonymous(this=function, expressions=[node.this.copy(), node.expressions[0].copy()])
        return node

    tree = sqlglot.parse_one(sql.text, read="duckdb").transform(map_access)
    return tree.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE)
