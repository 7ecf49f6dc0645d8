"""Rendering rows as a table, CSV or JSON: one place, shared by every command.

CSV cells that start with = + - @ (or a tab/CR) are prefixed with a quote so that a
spreadsheet shows them as text instead of running them as formulas. Numbers are
written as numbers, so negative costs stay numeric.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import click

FORMATS = ("table", "csv", "json")
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def default_format() -> str:
    return "table" if sys.stdout.isatty() else "json"


def format_option(func):
    """The shared `--format table|csv|json` option (default: table on a terminal, else JSON)."""
    return click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
                        help="Output format (default: table on a terminal, JSON otherwise).")(func)


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


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], *, title: str | None = None,
                footer: dict[str, Any] | None = None, right: Sequence[str] = ()) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_footer=footer is not None)
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left",
                         footer=_cell(footer.get(column)) if footer else "")
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    Console().print(table)


def _cell(value: Any) -> str:
    from rich.markup import escape

    if value is None:
        return ""
    if isinstance(value, Decimal):
        return format(value, "f")
    return escape(str(value))


def emit(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: str | None, *, json_data: Any = None,
         **table_options: Any) -> None:
    """Print rows in the chosen format; `json_data` overrides what JSON prints."""
    fmt = fmt or default_format()
    if fmt == "json":
        click.echo(to_json(rows if json_data is None else json_data))
    elif fmt == "csv":
        click.echo(to_csv(rows, columns), nl=False)
    else:
        print_table(rows, columns, **table_options)
