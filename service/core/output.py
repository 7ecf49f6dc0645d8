"""Serialising rows as CSV or JSON: one place, shared by the CLI, the report and the HTTP API.

CSV cells that start with = + - @ (or a tab/CR/NUL: OWASP ASVS 1.2.10) are prefixed with a quote so that a
spreadsheet shows them as text instead of running them as formulas. Numbers are
written as numbers, so negative costs stay numeric. Text for a terminal goes through
`printable`: control characters shown, never run. JSON escapes what a terminal would run
or reorder (`cat out.json`), as `\\u` escapes that `json.loads` reads back as they were.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

FORMULA_PREFIXES = ("=", "+", "-", "@")
LEADING_BLANKS = " \t\r\n"  # spreadsheets skip these before reading a formula
FORMULA_STARTS = "\t\r\0"  # a cell starting with one is prefixed, blanks or not


def _class(characters: str) -> str:
    return "[" + "".join(f"\\x{ord(character):02x}" for character in characters) + "]"


# The start of a cell `neutralise_cell` prefixes, in escapes Python's re and DuckDB's (RE2) read
# alike, so an export's SQL neutralises as this module does (neutralised_sql).
FORMULA_START = f"^(?:{_class(LEADING_BLANKS)}*{_class(''.join(FORMULA_PREFIXES))}|{_class(FORMULA_STARTS)})"
MUST_QUOTE = (",", '"', "\r", "\n")  # the csv module would not quote a bare CR under "\n" line ends


# C0 controls, DEL and C1: ESC, OSC, BEL... would clear, recolour or retitle a terminal, and a
# line feed in a value would start a line of its own (a table row, a forged `error:` line)
CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f]")
# Unicode bidi controls: an unclosed right-to-left override in a tag value would show the rest
# of its line backwards, `$7.09` as `90.7$` (Trojan Source, CVE-2021-42574)
BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # a character class's ranges
BIDI_CONTROLS = re.compile(f"[{BIDI}]")
HTML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")  # controls but tab, line feed, form feed, CR
# what json.dumps(ensure_ascii=False) leaves as it is (it escapes C0 controls only): DEL, C1, bidi
JSON_UNSAFE = re.compile(f"[\x7f-\x9f{BIDI}]")


ECHOED = 200  # characters of a value a user gave that a message echoes (a 100,000-character --by)


def cut(value: str, limit: int = ECHOED) -> str:
    """A value the user gave as a message echoes it: whole up to `limit` characters, else its
    start and how long it is."""
    return value if len(value) <= limit else f"{value[:limit]}… ({len(value):,} characters)"


def quoted(value: str, limit: int = ECHOED) -> str:
    """`value` quoted as repr() quotes it, cut as `cut` does (the count outside the quotes)."""
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}… ({len(value):,} characters)"


def printable(text: str) -> str:
    """`text` for a terminal, on one line: control characters shown as escapes (`\\x1b`, `\\n`,
    `\\u202e`), never run. Tag values, job names and ids are anyone's text."""
    return without_bidi_controls(CONTROLS.sub(_escaped, text))


def printable_lines(text: str) -> str:
    """`text` of several lines (a CSV, a traceback) for a terminal: each line printable, its
    line breaks kept."""
    return "\n".join(printable(line) for line in text.split("\n"))


def for_html(page: str) -> str:
    """A rendered page with the characters HTML forbids in text shown as escapes (a tag value's
    NUL or ESC), and no bidi control: its template holds none, so any came from a value."""
    return without_bidi_controls(HTML_FORBIDDEN.sub(_escaped, page))


one_line = printable  # a message's name for it: a value's line feed cannot forge an `error:` or log line


def without_bidi_controls(text: str) -> str:
    """`text` with its bidi controls shown as escapes (`\\u202e`): for a line that goes on
    after it, such as a chat summary's `- <team>: $7.09`."""
    return BIDI_CONTROLS.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def neutralise_cell(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula (after any leading blanks) gets a
    leading quote, so it shows as text."""
    if isinstance(value, str) and re.match(FORMULA_START, value):
        return "'" + value
    return value


def neutralised_sql(text: str) -> str:
    """SQL: the text `text` as neutralise_cell gives it (NULL stays NULL). The regular expression
    reads only a cell whose first character may start a formula (ascii: its first code point, 0
    for ''), most cells of a bill none."""
    firsts = ", ".join(str(code) for code in sorted(set(map(ord, LEADING_BLANKS + "".join(FORMULA_PREFIXES)
                                                               + FORMULA_STARTS))))
    return (f"CASE WHEN ascii({text}) IN ({firsts}) AND regexp_matches({text}, '{FORMULA_START}') "
            f"THEN '''' || {text} ELSE {text} END")


def json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    raise TypeError(f"cannot serialise {type(value).__name__}")


def to_json(data: Any) -> str:
    # outside its strings JSON is ASCII, and inside them a backslash is written `\\`: every
    # match is a character of a string, and its escape reads back as that character
    text = json.dumps(data, default=json_default, indent=2, ensure_ascii=False)
    return JSON_UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def to_csv(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """RFC 4180 cells with `\n` line ends; every cell holding CR, LF, a comma or a quote is
    quoted (readers that break lines on a bare CR see no new cell)."""
    lines = [",".join(_quoted(str(c)) for c in columns)]
    for row in rows:
        lines.append(",".join(_quoted(_csv_value(row.get(c))) for c in columns))
    return "\n".join(lines) + "\n"


def _quoted(cell: Any) -> str:
    text = str(cell)
    if any(mark in text for mark in MUST_QUOTE):
        return '"' + text.replace('"', '""') + '"'
    return text


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):  # an int to Python, which spells it True: spell it as the JSON does
        return "true" if value else "false"
    if isinstance(value, (Decimal, int, float)):
        return format(value, "f") if isinstance(value, Decimal) else value
    if isinstance(value, (dict, list)):
        value = json.dumps(value, default=json_default)
    return neutralise_cell(str(value))
