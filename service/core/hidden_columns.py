"""Columns a connector adds beside the canonical ones, which staging checks and never stores:
the line item key (repeats within a delivery), the parts the lake's 12 decimals round
away (summed into the ledger) and the file of a row of a part over several files. Plain SQL text, so a connector's module (loaded whenever a
config is validated) needs none of staging's Arrow machinery."""

from __future__ import annotations

import re

from service.core.schema import MONEY

# A connector whose export identifies its line items (AWS: identity/LineItemId with
# identity/TimeInterval) adds these two columns; they are checked for repeats, never stored.
LINE_ITEM_KEY = ("__spendlake_line_item_id", "__spendlake_line_item_interval")
# A connector whose money arrives with more than 12 decimals adds, per cost measure, the part
# the lake's DECIMAL(38,12) rounded away (the value as given − as stored; NULL when none):
# summed per period and currency into the ledger (`--check` shows it), never stored.
ROUNDING_COLUMNS = {"BilledCost": "__spendlake_rounding_billed", "EffectiveCost": "__spendlake_rounding_effective",
                    "ListCost": "__spendlake_rounding_list"}
# A part over several files (service.core.file_parts.FilesPart) gives each row's file, 0-based in
# the part's order: staging learns from it which periods each file held, never stores it.
FILE_INDEX = "__spendlake_file"
ROUNDING_TYPE = "DECIMAL(38,30)"  # a rounded-away part is below 1e-12
SCALE_RE = re.compile(r"^DECIMAL\(\d+,\s*(\d+)\)$")
WHOLE_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT")


def rounded_away_sql(value: str, kind: str | None, too_large: str = "NULL") -> str | None:
    """SQL: the part of a money value (`value`, of DuckDB type `kind`; None: text) that the
    lake's DECIMAL(38,12) rounds away (half away from zero), NULL where none; None when the
    type cannot hold more than 12 decimals (or already is the lake's: a CSV reader parsed it).
    Exact for a value below 1e14 with up to 24 decimals and below 1e20 with up to 18; text
    with more than 12 decimals on a number of 1e20 or more gives `too_large` (e.g. an error())."""
    kind = (kind or "VARCHAR").upper()
    scale = SCALE_RE.match(kind)
    if kind in WHOLE_TYPES or kind == MONEY or (scale and int(scale.group(1)) <= 12):
        return None
    if scale:
        return f"nullif(CAST({value} - CAST({value} AS {MONEY}) AS {ROUNDING_TYPE}), 0)"
    given = f"CAST({value} AS VARCHAR)"
    raw = f"nullif(trim({given}), '')"
    wide = [f"CAST(TRY_CAST({raw} AS DECIMAL(38,{s})) - TRY_CAST(TRY_CAST({raw} AS {MONEY}) AS DECIMAL(38,{s})) "
            f"AS {ROUNDING_TYPE})" for s in (24, 18)]
    many_decimals = f"(length({raw}) - strpos({raw}, '.') > 12 AND strpos({raw}, '.') > 0)"
    exponent = f"(strpos({raw}, 'e') > 0 OR strpos({raw}, 'E') > 0)"
    # more than 12 decimals needs at least 14 characters: most values are let through by
    # one length test (the tests after it cost about 0.2 CPU s per 1M values and column)
    maybe = f"(length({given}) > 13 OR contains({given}, 'e') OR contains({given}, 'E'))"
    beyond = f"CASE WHEN TRY_CAST({raw} AS {MONEY}) IS NOT NULL THEN {too_large} END"
    return (f"(CASE WHEN {maybe} THEN (CASE WHEN {many_decimals} OR {exponent} "
            f"THEN nullif(coalesce({', '.join(wide)}, {beyond}), 0) END) END)")


def rounding_select(expressions: dict[str, str | None]) -> str:
    """`, <sql> AS <hidden column>` for each cost measure (BilledCost, ...) with an expression
    (`rounded_away_sql`): appended to a connector's canonical SELECT list."""
    unknown = set(expressions) - set(ROUNDING_COLUMNS)
    if unknown:
        raise KeyError(f"no rounding column for {sorted(unknown)}")
    return "".join(f", {sql} AS {ROUNDING_COLUMNS[column]}" for column, sql in expressions.items() if sql)

