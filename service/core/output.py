"""Serialising rows as CSV or JSON: one place, shared by the CLI, the report and the HTTP API.

CSV cells that start with = + - @ (or a tab/CR) are prefixed with a quote so that a
spreadsheet shows them as text instead of running them as formulas. Numbers are
written as numbers, so negative costs stay numeric.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise_cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def to_json(data: Any) -> str:
    return json.dumps(data, default=json_default, indent=2, ensure_ascii=False)


def to_csv(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_csv_value(row.get(c)) for c in columns])
    return buffer.getvalue()


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (Decimal, int, float)):
        return format(value, "f") if isinstance(value, Decimal) else value
    if isinstance(value, (dict, list)):
        value = json.dumps(value, default=json_default)
    return neutralise_cell(str(value))
