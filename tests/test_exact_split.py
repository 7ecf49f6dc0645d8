"""The exact split's SQL (service/attribution/exact.py) gives, on both sides of its BIGINT fast
path's limits (|units| < 2^62, totals < 2^50) and on half-way cases, the parts Python's exact
integer arithmetic gives: rounded half-even, the remainder on the first row of each group."""

from __future__ import annotations

import random
from decimal import Decimal

import duckdb

from service.attribution.exact import FAST_TOTAL, FAST_UNITS, from_units, split_select


def expected_parts(groups: dict[int, list[tuple[int, int, int, int]]]) -> dict[tuple[int, int], int]:
    """(group, key) → part, for rows (key, units, weight, total) of each group (same units and total)."""
    parts = {}
    for group, rows in groups.items():
        units = rows[0][1]
        for key, _, weight, total in rows:
            quotient, rest = divmod(abs(units) * weight, total)
            if 2 * rest > total or (2 * rest == total and quotient % 2 == 1):
                quotient += 1
            parts[(group, key)] = quotient if units >= 0 else -quotient
        first = min(rows, key=lambda r: (-r[2], r[0]))[0]
        parts[(group, first)] += units - sum(parts[(group, key)] for key, *_ in rows)
    return parts


def split_in_sql(groups: dict[int, list[tuple[int, int, int, int]]]) -> dict[tuple[int, int], int]:
    con = duckdb.connect()
    con.execute("CREATE TABLE rows_in (g INTEGER, k INTEGER, u HUGEINT, w HUGEINT, t HUGEINT)")
    con.executemany("INSERT INTO rows_in VALUES (?, ?, CAST(? AS HUGEINT), CAST(? AS HUGEINT), CAST(? AS HUGEINT))",
                    [(g, k, str(u), str(w), str(t)) for g, rows in groups.items() for k, u, w, t in rows])
    sql = split_select("rows_in", ["g", "k"], ["g"], ["u"], "w", "t", ["w DESC", "k"])
    return {(g, k): int(u) for g, k, u in con.execute(sql).fetchall()}


def group_of(units: int, weights: list[int], total: int) -> list[tuple[int, int, int, int]]:
    return [(key, units, weight, total) for key, weight in enumerate(weights)]


def test_parts_equal_exact_arithmetic_on_both_sides_of_the_fast_path_limits():
    generator = random.Random(16)
    cases = [
        group_of(10, [1, 1, 1], 3),  # thirds of 10: 3, 3, 3 and the remainder 1 on the first
        group_of(5, [1, 1], 2), group_of(7, [1, 1], 2), group_of(-7, [1, 1], 2),  # half-way: to even
        group_of(-98_123_456_789_012, [3_600_000_000 * 5040, 1_800_000_000 * 5040], 8 * 5040 * 3_600_000_000),
        group_of(FAST_UNITS - 1, [FAST_TOTAL - 2, 1], FAST_TOTAL - 1),  # the largest fast case
        group_of(-(FAST_UNITS - 1), [FAST_TOTAL // 3, FAST_TOTAL // 3], FAST_TOTAL - 1),
        group_of(FAST_UNITS, [FAST_TOTAL // 2 + 1, FAST_TOTAL // 2 - 2], FAST_TOTAL - 1),  # units too large
        group_of(12_345_678_901_234, [FAST_TOTAL, 7], FAST_TOTAL + 7),  # total too large
        group_of(10 ** 37, [10 ** 18 + 3, 10 ** 18 - 1, 5], 2 * 10 ** 18 + 7),  # far beyond BIGINT
        group_of(-(10 ** 30) - 1, [1, 2, 3], 7),
    ]
    for _ in range(300):
        total = generator.choice([generator.randrange(1, 10 ** 6), generator.randrange(1, FAST_TOTAL),
                                  generator.randrange(FAST_TOTAL - 10 ** 6, FAST_TOTAL + 10 ** 6)])
        weights = [generator.randrange(0, total + 1) for _ in range(generator.randrange(1, 5))]
        while sum(weights) > total:
            weights = [w // 2 for w in weights]
        units = generator.choice([generator.randrange(-10 ** 15, 10 ** 15), generator.randrange(-FAST_UNITS, FAST_UNITS),
                                  generator.randrange(FAST_UNITS - 10 ** 6, FAST_UNITS + 10 ** 6),
                                  generator.randrange(-10 ** 30, 10 ** 30)])
        cases.append(group_of(units, weights, total))
    groups = dict(enumerate(cases))
    assert split_in_sql(groups) == expected_parts(groups)


def test_rows_alone_in_their_group_keep_the_whole_amount_and_the_others_split_as_before():
    groups = {0: group_of(10, [1, 1, 1], 3), 1: group_of(-7, [5], 5), 2: group_of(10 ** 30 + 1, [3], 3)}
    con = duckdb.connect()
    con.execute("CREATE TABLE rows_in (g INTEGER, k INTEGER, u HUGEINT, w HUGEINT, t HUGEINT, alone BOOLEAN)")
    con.executemany("INSERT INTO rows_in VALUES (?, ?, CAST(? AS HUGEINT), CAST(? AS HUGEINT), CAST(? AS HUGEINT), ?)",
                    [(g, k, str(u), str(w), str(t), len(rows) == 1) for g, rows in groups.items() for k, u, w, t in rows])
    sql = split_select("rows_in", ["g", "k"], ["g"], ["u"], "w", "t", ["w DESC", "k"], alone="alone")
    assert {(g, k): int(u) for g, k, u in con.execute(sql).fetchall()} == expected_parts(groups)


def test_units_come_back_as_the_exact_decimal_of_their_scale_or_fail_beyond_it():
    con = duckdb.connect()
    generator = random.Random(12)
    for scale in (12, 16):
        values = [0, 1, -1, 10 ** 38 - 1, -(10 ** 38 - 1), 10 ** scale, -(10 ** scale) - 1]
        values += [generator.randrange(-10 ** generator.randrange(1, 39), 10 ** 38) for _ in range(200)]
        con.execute("CREATE OR REPLACE TABLE units (u HUGEINT)")
        con.executemany("INSERT INTO units VALUES (CAST(? AS HUGEINT))", [(str(v),) for v in values])
        rows = con.execute(f"SELECT u, {from_units('u', scale)}, typeof({from_units('u', scale)}) FROM units").fetchall()
        assert all(value == Decimal(int(u)).scaleb(-scale) and kind == f"DECIMAL(38,{scale})" for u, value, kind in rows)
        assert con.execute(f"SELECT {from_units('CAST(NULL AS HUGEINT)', scale)}").fetchall() == [(None,)]
        try:
            con.execute(f"SELECT {from_units('CAST(' + str(10 ** 38) + ' AS HUGEINT)', scale)}").fetchall()
        except duckdb.ConversionException:
            pass
        else:
            raise AssertionError("units of 10^38 fit no DECIMAL(38,x)")
