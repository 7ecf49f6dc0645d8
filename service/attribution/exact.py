"""Exact splits of money in SQL: the rule of shared splits (service/attribution/compute.py
`split_exactly`) as integer arithmetic DuckDB runs over millions of rows.

A cost is DECIMAL(38,12); as an integer of 1e-12 units it fits HUGEINT (|x| < 1.7e38). Each
part is units × weight ÷ total rounded half-even, computed without overflow as
(u // W)·w + ((u % W)·w) // W (so weights and totals must stay below 1.3e19), on the absolute
value with the sign put back (DuckDB's `//` truncates toward zero). The remainder of a group
goes to its largest weight (ties: the smallest key), so the parts sum to the cost exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

UNIT = 1_000_000_000_000  # 1e12 units per currency unit: DECIMAL(38,12)


def to_units(money: str, scale: int = 12) -> str:
    """A DECIMAL(38,`scale`) expression as HUGEINT units of 10^-scale (NULL stays NULL)."""
    unit = 10 ** scale
    return (f"(CAST(trunc({money}) AS HUGEINT) * {unit} "
            f"+ CAST(({money} - trunc({money})) * {unit} AS HUGEINT))")


def from_units(units: str, scale: int = 12) -> str:
    """HUGEINT units back to DECIMAL(38,`scale`), exactly (division would go through DOUBLE)."""
    unit = 10 ** scale
    return (f"(CAST({units} // {unit} AS DECIMAL(38,{scale})) "
            f"+ CAST({units} % {unit} AS DECIMAL(18,0)) * CAST('{Decimal(1).scaleb(-scale):f}' "
            f"AS DECIMAL({scale + 1},{scale})))")


def rounded_part(units: str, weight: str, total: str) -> str:
    """round_half_even(units × weight ÷ total) in HUGEINT; `weight` <= `total`, both > 0."""
    size = f"abs({units})"
    floor = f"(({size} // {total}) * {weight} + (({size} % {total}) * {weight}) // {total})"
    rest = f"((({size} % {total}) * {weight}) % {total})"
    up = f"CASE WHEN 2 * {rest} > {total} OR (2 * {rest} = {total} AND {floor} % 2 = 1) THEN 1 ELSE 0 END"
    return f"(sign({units}) * ({floor} + {up}))"


def split_select(relation: str, columns: Sequence[str], group: Sequence[str], measures: Sequence[str],
                 weight: str, total: str, order: Sequence[str]) -> str:
    """`SELECT <columns>, <measures>` over `relation`, each measure (a units column holding the
    group's amount on every row) replaced by its exact part of the group (`group` columns) by
    `weight` of `total`; the group's remainder goes to the row first in `order` (the largest
    weight first, then a key)."""
    window = f"PARTITION BY {', '.join(group)}"
    parts = ", ".join(f"{rounded_part(m, weight, total)} AS {m}__part" for m in measures)
    fixed = ", ".join(
        f"{m}__part + CASE WHEN split_first THEN {m} - sum({m}__part) OVER ({window}) ELSE 0 END AS {m}"
        for m in measures)
    first = f"row_number() OVER ({window} ORDER BY {', '.join(order)}) = 1 AS split_first"
    keep = ", ".join(columns)
    return (f"SELECT {keep}, {fixed} FROM ("
            f"SELECT {keep}, {', '.join(measures)}, {parts}, {first} FROM {relation}) AS split_parts")
