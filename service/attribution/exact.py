"""Exact splits of money in SQL: the rule of shared splits (service/attribution/compute.py
`split_exactly`) as integer arithmetic DuckDB runs over millions of rows.

A cost is DECIMAL(38,12); as an integer of 1e-12 units it fits HUGEINT (|x| < 1.7e38). Each
part is units × weight ÷ total rounded half-even, computed without overflow as
(u // W)·w + ((u % W)·w) // W (so weights and totals must stay below 1.3e19), on the absolute
value with the sign put back (DuckDB's `//` truncates toward zero). The remainder of a group
goes to its largest weight (ties: the smallest key), so the parts sum to the cost exactly.

HUGEINT division is slow (bit by bit), so where |units| < 2^62 and the total < 2^50 (every
realistic line: $4.6M an instance-hour, 2^50 GPU-µs weights) the same part is computed in
BIGINT: units = a·total + b, and b·weight ÷ total from a DOUBLE quotient (within 1 of the
exact one below 2^50) corrected by its exact remainder (two HUGEINT products, no division).
The other rows take the HUGEINT formula; both give the same integer.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

UNIT = 1_000_000_000_000  # 1e12 units per currency unit: DECIMAL(38,12)
FAST_UNITS = 2 ** 62  # |units| below: the part (at most |units| + 1) and a·weight (at most |units|) fit BIGINT
FAST_TOTAL = 2 ** 50  # totals below: the DOUBLE b·weight ÷ total (< 2^50) is off by < 0.3, its floor by <= 1


def to_units(money: str, scale: int = 12) -> str:
    """A DECIMAL(38,`scale`) expression as HUGEINT units of 10^-scale (NULL stays NULL)."""
    unit = 10 ** scale
    return (f"(CAST(trunc({money}) AS HUGEINT) * {unit} "
            f"+ CAST(({money} - trunc({money})) * {unit} AS HUGEINT))")


def from_units(units: str, scale: int = 12) -> str:
    """HUGEINT units back to DECIMAL(38,`scale`), exactly: a DECIMAL(38,0) times 10^-scale is
    one 128-bit multiplication by 1 (DuckDB keeps the scale, caps the width at 38 and checks
    overflow: units of 10^38 or more fail, as they do not fit DECIMAL(38,`scale`)); division
    would go through DOUBLE, and `units // 10^scale` plus the remainder cost two 128-bit
    divisions a value (0.46 CPU s for 3M values, against 0.02)."""
    return f"(CAST({units} AS DECIMAL(38,0)) * CAST('{Decimal(1).scaleb(-scale):f}' AS DECIMAL({scale + 1},{scale})))"


def rounded_part(units: str, weight: str, total: str) -> str:
    """round_half_even(units × weight ÷ total) in HUGEINT; `weight` <= `total`, both > 0."""
    size = f"abs({units})"
    floor = f"(({size} // {total}) * {weight} + (({size} % {total}) * {weight}) // {total})"
    rest = f"((({size} % {total}) * {weight}) % {total})"
    up = f"CASE WHEN 2 * {rest} > {total} OR (2 * {rest} = {total} AND {floor} % 2 = 1) THEN 1 ELSE 0 END"
    return f"(sign({units}) * ({floor} + {up}))"


def _fast_parts(relation: str, measures: Sequence[str], weight: str, total: str) -> str:
    """`relation` with, per measure m, `m__s` (|m| as BIGINT, NULL where the fast path does not
    apply), `m__fl` (floor(|m| × weight ÷ total)) and `m__r` (its remainder × total), in BIGINT."""
    fits = f"{total} < {FAST_TOTAL}"
    stages = [", ".join([f"CASE WHEN {fits} THEN CAST({weight} AS BIGINT) END AS split__w",
                         f"CASE WHEN {fits} THEN CAST({total} AS BIGINT) END AS split__t"]
                        + [f"CASE WHEN {fits} AND abs({m}) < {FAST_UNITS} THEN CAST(abs({m}) AS BIGINT) END AS {m}__s"
                           for m in measures]),
              ", ".join(f"{m}__s // split__t AS {m}__a, {m}__s % split__t AS {m}__b" for m in measures),
              ", ".join(f"CAST(floor(CAST({m}__b AS DOUBLE) * CAST(split__w AS DOUBLE) / CAST(split__t AS DOUBLE)) "
                        f"AS BIGINT) AS {m}__q" for m in measures),
              ", ".join(f"CAST(CAST({m}__b AS HUGEINT) * split__w - CAST({m}__q AS HUGEINT) * split__t AS BIGINT) "
                        f"AS {m}__r0" for m in measures),
              ", ".join(f"{m}__a * split__w + {m}__q + CASE WHEN {m}__r0 < 0 THEN -1 WHEN {m}__r0 >= split__t THEN 1 "
                        f"ELSE 0 END AS {m}__fl, {m}__r0 + CASE WHEN {m}__r0 < 0 THEN split__t WHEN {m}__r0 >= split__t "
                        f"THEN -split__t ELSE 0 END AS {m}__r" for m in measures)]
    text = relation
    for n, stage in enumerate(stages):
        text = f"(SELECT *, {stage} FROM {text} AS fast_{n})"
    return text


def _part(units: str, weight: str, total: str) -> str:
    """The part of `units` from `_fast_parts`' columns, else (NULL `units__s`) `rounded_part`."""
    floor, rest = f"{units}__fl", f"{units}__r"
    up = f"CASE WHEN 2 * {rest} > split__t OR (2 * {rest} = split__t AND {floor} % 2 = 1) THEN 1 ELSE 0 END"
    return (f"CASE WHEN {units}__s IS NOT NULL THEN sign({units}) * CAST({floor} + {up} AS HUGEINT) "
            f"ELSE {rounded_part(units, weight, total)} END")


def split_select(relation: str, columns: Sequence[str], group: Sequence[str], measures: Sequence[str],
                 weight: str, total: str, order: Sequence[str], alone: str | None = None,
                 alone_rows: str | None = None) -> str:
    """`SELECT <columns>, <measures>` over `relation`, each measure (a units column holding the
    group's amount on every row) replaced by its exact part of the group (`group` columns) by
    `weight` of `total`; the group's remainder goes to the row first in `order` (the largest
    weight first, then a key). `alone`: a column true on rows that are their group's only row
    (so their weight is the total): they keep the whole amount, without the windows' sorts
    (`relation` is then read twice: a table or materialized CTE), read from `alone_rows` when
    given (a relation holding those rows as `relation` does, without its weights)."""
    # one sort of each group for both windows: the row first in `order` and the group's sum of parts
    keys = [item.rsplit(" ", 1) if item.upper().endswith((" DESC", " ASC")) else [item, ""] for item in order]
    picks = ", ".join(f"{key} AS split_o{n}" for n, (key, _) in enumerate(keys))
    ordered = (f"PARTITION BY {', '.join(group)} ORDER BY "
               + ", ".join(f"split_o{n} {way}".rstrip() for n, (_, way) in enumerate(keys)))
    whole = f"{ordered} ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"
    parts = ", ".join(f"{_part(m, weight, total)} AS {m}__part" for m in measures)
    sums = ", ".join(f"sum({m}__part) OVER ({whole}) AS {m}__sum" for m in measures)
    fixed = ", ".join(f"{m}__part + CASE WHEN split_n = 1 THEN {m} - {m}__sum ELSE 0 END AS {m}" for m in measures)
    keep = ", ".join(columns)
    rows = relation if alone is None else f"(SELECT * FROM {relation} WHERE NOT {alone})"
    split = (f"SELECT {keep}, {fixed} FROM ("
             f"SELECT *, row_number() OVER ({ordered}) AS split_n, {sums} FROM ("
             f"SELECT {keep}, {', '.join(measures)}, {parts}, {picks} "
             f"FROM {_fast_parts(rows, measures, weight, total)} AS split_in) AS split_parts) AS split_sums")
    if alone is None:
        return split
    return f"{split} UNION ALL SELECT {keep}, {', '.join(measures)} FROM {alone_rows or relation} WHERE {alone}"
