"""The fields of a `sacct --parsable2` line whose free text holds the delimiter or a line break
(`|`, or another that `sacct --delimiter` sets: the header line says which).

sacct writes a job name or comment as it is, `|` included (`eval|sweep`), so such a line has
more fields than the header. When the free-text columns sit side by side (README's `--format`
list ends with JobName,Comment), every other field is found from the line's two ends and the
`|`s belong to that text; where they are apart (an older list) the line cannot be read. A line
break in them (`--comment="$(cat notes)"`) splits the record over lines: when they end the
header, the lines after it that hold fewer fields than the header continue it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

JOB_ID = re.compile(r"^\d+([_+][\d\[]|\.|$)")  # 123, 123_4, 123_[1-5], 123+0, 123.batch: a record's start
_NAME = re.compile(r"[A-Za-z0-9_]+")  # a sacct column's name

# sacct columns a user writes freely (sbatch --job-name, --comment, a script's path)
FREE_TEXT = frozenset({"JobName", "Comment", "AdminComment", "SystemComment", "WorkDir", "SubmitLine"})
# what sacct's own columns print besides letters and digits: AllocTRES `cpu=96,gres/gpu:h100=8`,
# NodeList `a-[1-4],b1`, times, Elapsed `1-01:00:00`, job ids `12_3+0.batch`, State `CANCELLED by 0`;
# a delimiter among them splits those columns, which no rule can put together again
IN_FIXED_COLUMNS = frozenset(",=/:-.+_[] ")


def header_delimiter(line: str, required: Iterable[str]) -> str | None:
    """What separates the column names of the header line `line` (`sacct --delimiter`; `|` by
    default; `--parsable` ends the line with it too) when it is one string and the names hold
    `required`; None otherwise."""
    text = line.rstrip("\r\n")
    between = _NAME.split(text)
    delimiters = set(between[1:-1])
    if between[0] or len(delimiters) != 1 or between[-1] not in ("", *delimiters):
        return None
    return delimiters.pop() if set(required) <= set(_NAME.findall(text)) else None


def split_line(fields: list[str], header: list[str], delimiter: str = "|") -> tuple[list[str], bool] | None:
    """`fields` (a line split at every `delimiter`) as the header's columns, when more than it has
    come from delimiters inside free text; None when that cannot be told. The flag: several
    free-text columns were beside each other, so which of them holds them is a guess (the first)."""
    extra = len(fields) - len(header)
    free = [index for index, name in enumerate(header) if name in FREE_TEXT]
    if extra <= 0 or not free or free != list(range(free[0], free[-1] + 1)):
        return None
    first, after = free[0], len(header) - free[-1] - 1  # fields before them; after them
    middle = fields[first:len(fields) - after]
    cells = [delimiter.join(middle[:extra + 1]), *middle[extra + 1:]]
    return fields[:first] + cells + fields[len(fields) - after:], len(free) > 1


def records(lines: Iterable[str], delimiter: str = "|") -> Iterator[tuple[int, list[str]]]:
    """(number of its first line, fields) of each record of a parsable2 text, the header first,
    blank lines skipped. When free text ends the header, a line with fewer fields than the header
    that does not start with a job id continues the record before it: all of it the last
    column's text once that record has reached its last column (`--parsable` ends each record
    with a `|`), else joined to its last field for split_line to place."""
    header: list[str] = []
    held: tuple[int, list[str]] | None = None
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        fields = line.split(delimiter)
        if held is not None and held[1] is not header and continues(held[1], fields, header):
            held = (held[0], joined(held[1], fields, header, delimiter))
            continue
        if held is not None:
            yield held
        header = header or fields
        held = (number, fields)
    if held is not None:
        yield held


def _named(header: list[str]) -> int:
    """The header's named columns (--parsable's trailing `|` adds one without a name)."""
    return len(header) - (not header[-1])


def continues(record: list[str], fields: list[str], header: list[str]) -> bool:
    """Whether the line of `fields` continues `record` (not the header), as `records` reads them."""
    return (header[_named(header) - 1] in FREE_TEXT and not JOB_ID.match(fields[0])
            and (len(record) < len(header) or len(fields) < len(header)))


def joined(record: list[str], fields: list[str], header: list[str], delimiter: str = "|") -> list[str]:
    named = _named(header)
    if len(record) < named:
        return [*record[:-1], f"{record[-1]}\n{fields[0]}", *fields[1:]]
    text = delimiter.join(fields)
    ended = named < len(header) and text.endswith(delimiter)  # --parsable's record end
    return [*record[:named - 1], f"{record[named - 1]}\n{text[:-len(delimiter)] if ended else text}",
            *([""] if ended else [])]
