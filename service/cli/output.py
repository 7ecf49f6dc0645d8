"""The CLI's shared output option and its rendering: a table for people, CSV or JSON for
programs (serialisation itself: service.core.output).

Values are anyone's text (tag keys and values, job names). Piped, CSV is written exactly as
the values are; on a terminal its control characters are shown as escapes, as a table's
cells, headers and titles are."""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import click

from service.core.output import one_line, printable, printable_lines, to_csv, to_json
from service.core.units import is_tty

FORMATS = ("table", "csv", "json")


def default_format() -> str:
    return "table" if is_tty() else "json"


def confirmed(question: str) -> bool:
    """The user answered yes; no answer (no terminal, end of input) is no."""
    try:
        return click.confirm(question, default=False, err=True)
    except click.Abort:
        click.echo("", err=True)
        return False


def format_option(func):
    """The shared `--format table|csv|json` option (default: table on a terminal, else JSON)."""
    return click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
                        help="Output format (default: table on a terminal, JSON otherwise).")(func)


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], *, title: str | None = None,
                footer: dict[str, Any] | None = None, right: Sequence[str] = (),
                whole: Sequence[str] = (), late: Sequence[str] = (), wrap: Sequence[str] = (),
                elsewhere: str = "--format csv or json shows every column", told: set[str] | None = None) -> None:
    """`whole`: columns never cut short (their header and values); the others give way, `late`
    ones after the rest; `wrap`: sentences, wrapped over lines in a column of at least WRAPPED
    characters, never left out for their length. A table wider than the terminal leaves columns
    out (`shown`) rather than cut every cell to one letter, and says which, and where they show
    (`elsewhere`: a command without `--format` names another); `told`, shared by tables printed
    one after another, says that once."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    headers = {column: _cell(column) for column in columns}  # a tag key of --by is a column
    cells = {column: [_cell(row.get(column)) for row in rows] for column in columns}
    feet = {column: _cell(footer.get(column)) if footer else "" for column in columns}
    widths = {column: max(len(line) for text in [headers[column], *cells[column], feet[column]]
                          for line in text.split("\n"))
              for column in columns}
    widths.update({column: min(widths[column], WRAPPED) for column in wrap})
    # amounts in several currencies without their currency would be misread
    several = "currency" in columns and len({row.get("currency") for row in rows}) > 1
    kept = shown(columns, widths, console.width, keep=(*columns[:1], *whole, *(["currency"] if several else [])),
                 late=late)
    table = Table(title=_cell(title) if title else None, show_footer=footer is not None)
    for column in kept:
        table.add_column(headers[column], justify="right" if column in right else "left",
                         min_width=widths[column] if column in (*whole, *wrap) else None, footer=feet[column])
    for index in range(len(rows)):
        table.add_row(*(cells[column][index] for column in kept))
    console.print(table)
    left_out = [column for column in columns if column not in kept]
    line = one_line(f"not shown at {console.width} columns: {', '.join(left_out)} (a wider terminal shows "
                    f"them; {elsewhere})")
    if left_out and line not in (told or ()):
        click.echo(line, err=True)
    if told is not None:
        told.add(line)


WRAPPED = 32  # a wrapped sentence's narrowest column: about five words a line


def shown(columns: Sequence[str], widths: dict[str, int], budget: int, *, keep: Sequence[str],
          late: Sequence[str] = ()) -> list[str]:
    """The columns a table `budget` characters wide shows whole: `keep` always, the others
    (in order of importance, as the command lists them) left out from the last while it is too wide,
    `late` only after them (from its last)."""
    kept = list(columns)
    for column in [*(c for c in reversed(columns) if c not in late), *reversed(late)]:
        if sum(widths[c] + 3 for c in kept) + 1 <= budget:
            break
        if column not in keep:
            kept.remove(column)
    return kept


def wrapped_id(text: str | None, width: int = 36) -> str | Lines | None:
    """A long id (an ARN, an Azure resource path) over lines of at most `width` characters where
    it can, each broken after a `:` or `/`, so a table keeps it whole without it taking the width
    of the columns beside it."""
    if text is None or len(text) <= width:
        return text
    lines = [""]
    for piece in re.findall(r"[^:/]*[:/]+|[^:/]+$", text):
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
    return Lines(lines)


class Lines(tuple):
    """A table cell of several lines, one under another (a footer's total in each currency, a long
    id wrapped): each line printable as any cell is, so a line feed in a value stays an escape."""


def _cell(value: Any) -> str:
    from rich.markup import escape

    if value is None:
        return ""
    if isinstance(value, Lines):
        return "\n".join(_cell(line) for line in value)
    if isinstance(value, Decimal):
        return format(value, "f")
    return escape(printable(str(value)))


def echo_data(text: str, *, nl: bool = True) -> None:
    """A CSV or JSON on stdout as it is: click.echo would strip a cell's ANSI sequences (`\\x1b[31m`)
    where stdout is no terminal, so a piped CSV would not hold the lake's value. On a terminal a CSV
    comes here printable already."""
    click.echo(text, nl=nl, color=True)


def emit(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: str | None, *, json_data: Any = None,
         **table_options: Any) -> None:
    """Print rows in the chosen format; `json_data` overrides what JSON prints."""
    fmt = fmt or default_format()
    if fmt == "json":
        echo_data(to_json(rows if json_data is None else json_data))
    elif fmt == "csv":
        text = to_csv(rows, columns)
        echo_data(printable_lines(text) if is_tty() else text, nl=False)
    else:
        print_table(rows, columns, **table_options)
