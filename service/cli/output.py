"""The CLI's shared output option and its rendering: a table for people, CSV or JSON for
programs (serialisation itself: service.core.output)."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import click

from service.core.output import to_csv, to_json
from service.core.units import is_tty

FORMATS = ("table", "csv", "json")


def default_format() -> str:
    return "table" if is_tty() else "json"


def format_option(func):
    """The shared `--format table|csv|json` option (default: table on a terminal, else JSON)."""
    return click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
                        help="Output format (default: table on a terminal, JSON otherwise).")(func)


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], *, title: str | None = None,
                footer: dict[str, Any] | None = None, right: Sequence[str] = (),
                whole: Sequence[str] = ()) -> None:
    """`whole`: columns never cut short (their header and values); the others give way."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_footer=footer is not None)
    for column in columns:
        widest = max([len(column), *(len(_cell(row.get(column))) for row in rows)]) if column in whole else None
        table.add_column(column, justify="right" if column in right else "left", min_width=widest,
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
