"""Opening an export CSV (or CSV.gz) file in DuckDB without its sniffer.

Export files are RFC 4180 CSV with a header row: `,` between fields, `"` to quote and to
escape a quote, LF or CRLF line ends, maybe a UTF-8 BOM. Told that dialect and the columns
(the header, read here in Python), DuckDB's reader needs no detection. Left to detect them,
it sniffs the file each time a query over it is bound (DuckDB's Python relations bind a
reader three times when it is built, and again for every query built on it): about 1 CPU s
per 2 MB CSV.gz part of a legacy CUR, more than reading its rows.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import io
import re
import shutil
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

import duckdb

from service.core.csv_lines import MAX_LINE_BYTES
from service.core.errors import (CUT, DataError, SpendlakeError, header_again, resource_error, spreadsheet_hint,
                                 spreadsheet_time)

TEXT = "VARCHAR"
SAMPLE_BYTES = 4 << 20  # checked to be UTF-8 (DuckDB's sniffer sampled 20,480 rows)
TAIL_BYTES = 4096  # where a spreadsheet's trailing blank rows show
# A spreadsheet's save (a European locale's ';' and decimal comma, 'Unicode text' tabs) also rewrites
# values (long account ids as 1.23412E+11, dates in the locale's order): read the export itself.
RESAVED_HINT = ("was it saved from a spreadsheet? read the export as the provider wrote it "
                "(comma-separated UTF-8 CSV), or save it as 'CSV UTF-8 (comma delimited)'")
# ... and a comma-separated save keeps the columns but loses an id's digits: a whole value so
# written fails the read. `contains` first: the regex runs only on the rare value with an 'E+'.
RESAVED_ID = r"[0-9]\.[0-9]+E\+[0-9]+"
RESAVED_ID_PROBLEM = ("a number in scientific notation, as a spreadsheet rewrites a long id "
                      "(re-export from the provider, not through a spreadsheet)")
# DuckDB's; a value the message cut short (errors.MAX_REASON) has no closing quote
TIME_REFUSED = re.compile(r'(?:invalid timestamp field format|timestamp field value out of range): "(.*?)(?:"|(?<=…)$)')
SHOWN_LINES = 5  # of the lines holding a value cut short
EXCEL_SEPARATOR = re.compile(r"sep=.", re.IGNORECASE)  # Excel's first line, `sep=,`: which separator follows


def unless_resaved_id(value: str, fail: Callable[[str], str]) -> str:
    """SQL: the id `value` (SQL text), or `fail(value)` (SQL raising the error) when a
    spreadsheet rewrote it as 1.23412E+11."""
    return (f"(CASE WHEN contains({value}, 'E+') AND regexp_full_match({value}, '{RESAVED_ID}') "
            f"THEN {fail(value)} ELSE {value} END)")


def csv_header(path: str | Path, where: str) -> list[str]:
    """The header row's fields, as written but for the spaces around a name (`BilledCost `, as
    a hand edit leaves it, is BilledCost; a BOM dropped). The first SAMPLE_BYTES must be
    UTF-8, as DuckDB's sniffer checked of the rows it sampled (its reader checks only the
    columns a query reads). A spreadsheet's `sep=,` line above the header fails naming it."""
    opener = gzip.open if str(path).lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as raw:
            sample = raw.read(SAMPLE_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"cannot read the file: {exc}", where=where,
                        hint="the file is damaged or not CSV; re-export it") from None
    try:
        text = codecs.getincrementaldecoder("utf-8-sig")().decode(sample, final=len(sample) < SAMPLE_BYTES)
    except UnicodeDecodeError as exc:
        line = sample[:exc.start].count(b"\n") + 1
        raise DataError(f"cannot read the file: it is not utf-8 encoded (line {line})", where=where,
                        hint="re-export it as UTF-8") from None
    try:
        header = next(csv_reader(io.StringIO(text, newline="")), [])
    except csv.Error as exc:
        raise DataError(f"cannot read the header row: {exc}", where=where, hint="re-export it with headers") from None
    header = [field.strip() for field in header]
    if not any(header):
        raise DataError("the file has no header row", where=where, hint="re-export it with headers")
    first = text.split("\n", 1)[0].removesuffix("\r")
    if EXCEL_SEPARATOR.fullmatch(first):
        raise DataError(f"line 1 is {first!r}, a spreadsheet's hint of the separator, not the header row",
                        where=where, hint="delete that line (the header row is the next one) or read the export "
                                          "as the provider wrote it")
    for name, separator in (("';'", ";"), ("tab", "\t")):
        if len(header) == 1 and separator in header[0]:
            raise DataError(f"the header row is one field: its columns are separated by {name}, not ','",
                            where=where, hint=RESAVED_HINT)
    return header


def local_csv(path: Path, scratch: Path, where: str, open_file: Callable[[Path], IO[bytes]]) -> Path:
    """The file as DuckDB can read it: a `.csv.zip` (legacy CUR's ZIP compression, one CSV per
    archive: DuckDB reads gzip, not ZIP) unpacked, and a UTF-16 CSV (a byte order mark; DuckDB
    reads UTF-8 only) as UTF-8, into `scratch`; any other file as it is. `open_file` opens it as
    its source's folder allows (Storage.open_local, Folder.open: no link out of it followed, not
    even one swapped in after the listing): the copy lands in DuckDB's sandbox, which cannot guard it."""
    name = path.name.lower()
    if name.endswith(".csv.zip"):
        return _copied(path, scratch, where, open_file, _unzipped, "the ZIP archive")
    if name.endswith((".csv", ".csv.gz")) and _utf16(path, open_file):
        return _copied(path, scratch, where, open_file, _utf8, "the UTF-16 file")
    return path


def _opener(path: Path) -> Callable[..., IO[bytes]]:
    return gzip.open if path.name.lower().endswith(".gz") else open


def _decompressed(path: Path, raw: IO[bytes]) -> IO[bytes]:
    return gzip.GzipFile(fileobj=raw, mode="rb") if path.name.lower().endswith(".gz") else raw


def _utf16(path: Path, open_file: Callable[[Path], IO[bytes]]) -> bool:
    try:
        with open_file(path) as raw:
            return _decompressed(path, raw).read(2) in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
    except (OSError, EOFError, zlib.error):
        return False  # the reader names what is wrong with it


def _unzipped(path: Path, raw: IO[bytes], out: IO[bytes], where: str) -> None:
    with zipfile.ZipFile(raw) as archive:
        members = [m for m in archive.infolist() if not m.is_dir()]
        if len(members) != 1:
            raise DataError(f"the ZIP archive holds {len(members)} files, not one CSV", where=where,
                            hint="an export's .csv.zip holds one CSV; unpack it into the location")
        with archive.open(members[0]) as member:
            shutil.copyfileobj(member, out, 1 << 20)


def _utf8(path: Path, raw: IO[bytes], out: IO[bytes], where: str) -> None:
    text = io.TextIOWrapper(_decompressed(path, raw), encoding="utf-16", newline="")
    writer = io.TextIOWrapper(out, encoding="utf-8", newline="")
    shutil.copyfileobj(text, writer, 1 << 20)
    writer.detach()  # flushed; `out` stays open for its owner


def _copied(path: Path, scratch: Path, where: str, open_file: Callable[[Path], IO[bytes]],
            write: Callable[[Path, IO[bytes], IO[bytes], str], None], what: str) -> Path:
    target = scratch / (hashlib.sha256(str(path).encode()).hexdigest()[:24] + ".csv")
    try:
        with open_file(path) as raw, target.open("wb") as out:
            write(path, raw, out, where)
    except (OSError, EOFError, UnicodeError, zipfile.BadZipFile, zlib.error) as exc:
        target.unlink(missing_ok=True)
        limit = resource_error(exc, str(scratch)) if isinstance(exc, OSError) else None
        if limit is not None:  # writing the copy ran short (a full disk): the file is not at fault
            raise limit from None
        raise DataError(f"cannot read {what}: {exc}", where=where,
                        hint="the file is damaged or cut short; re-export it") from None
    except DataError:
        target.unlink(missing_ok=True)
        raise
    return target


def with_its_line(error: SpendlakeError, uri: str, path: Path) -> SpendlakeError | None:
    """`error`, a value of CSV file `uri` (local copy `path`) the SQL refused (`<uri>: column X:
    <problem>: <value>`, connectors.exportfile Table.fail: read as text, the value has no line),
    naming the line its record begins on, and a header row repeated inside the file (`cat a.csv
    b.csv`) when the value is the column's name; None when the error is not such, or no line holds it.
    A value the message cut short (errors.MAX_REASON) is found by its start (`_lines_holding`)."""
    found = re.search(re.escape(f"{uri}: ") + r"(?:[^:]+: )?column (.+?): ([^:]+): (.*?)(?: — |$)", str(error))
    if not found or not path.name.lower().endswith((".csv", ".csv.gz")):
        return None
    column, problem, value = found.groups()
    held = _lines_holding(path, value, column)
    if not held:
        return None
    said = f"column {column}: {problem}: "
    hint = header_again(held[0][0]) if value.strip().lower() == column.strip().lower() else error.hint
    return type(error)(error.message.replace(said, f"{_lines_text(held)}, {said}", 1), where=error.where, hint=hint)


def with_a_line(error: SpendlakeError, files: Mapping[str, Path]) -> SpendlakeError | None:
    """`error` naming the line of the value it says the SQL refused (with_its_line), in the first
    of `files` (URI → local copy) holding it; None when none does."""
    return next((located for uri, path in files.items() if (located := with_its_line(error, uri, path))), None)


def with_the_time_refused(error: SpendlakeError, files: Mapping[str, str]) -> SpendlakeError | None:
    """`error`, DuckDB's refusal of a text as a time (`invalid timestamp field format: "V"`, or out of range,
    naming no file, line or column: an AWS export's times are cast as they are), naming the
    first CSV file of `files` (local path → the name users know) and line holding V, its column,
    and a header row repeated inside the file when V is that column's name; None when the error
    is not such, or no CSV file holds the value."""
    found = TIME_REFUSED.search(error.message)
    if found is None:
        return None
    value = found.group(1)
    for path, name in files.items():
        held = _lines_holding(Path(path), value) if path.lower().endswith((".csv", ".csv.gz")) else []
        if held:
            line, column = held[0]
            hint = (header_again(line) if value.strip().lower() == column.strip().lower() else
                    spreadsheet_hint(value.strip()) if spreadsheet_time(value) else
                    "fix that value or re-export the file")
            return type(error)(f"{error.message[:found.start()]}{_lines_text(held)}, column {column}: not a date/time: "
                               f"{value}", where=name, hint=hint)
    return None


def line_holding(path: Path, value: str, column: str) -> str | None:
    """`line 4`: the line the first record of CSV file `path` begins on whose `column` holds `value`
    (spaces around it aside; "": an empty cell); None when none does."""
    held = _lines_holding(path, value, column)
    return _lines_text(held) if held else None


def _lines_text(held: Sequence[tuple[int, str]]) -> str:
    """`line 4`; of a value cut short, where several records begin with what the message shows,
    `one of lines 4, 9 and 12 (...)`: which of them the SQL refused, the message cannot tell."""
    if len(held) == 1:
        return f"line {held[0][0]}"
    lines = [str(line) for line, _ in held[:SHOWN_LINES]]
    listed = f"{', '.join(lines)}, …" if len(held) > SHOWN_LINES else f"{', '.join(lines[:-1])} and {lines[-1]}"
    return f"one of lines {listed} (their values begin alike, the value cut short here: compare them whole)"


def _lines_holding(path: Path, value: str, column: str | None = None) -> list[tuple[int, str]]:
    """[(the line on which the first record begins whose `column` (a header name, case and the
    spaces around it aside; None: any column) holds `value` (spaces around it aside), that
    column as the header names it)]; [] when none does. A `value` the message cut short (ending
    in errors.CUT) where no record holds it whole: every record (up to SHOWN_LINES + 1) holding
    a value that begins with it. Read record by record in Python: only once a read failed."""
    whole = _records_holding(path, lambda field: field.strip() == value.strip(), column, most=1)
    if whole or not value.endswith(CUT):
        return whole
    start = value.removesuffix(CUT).lstrip()
    return _records_holding(path, lambda field: field.lstrip().startswith(start), column, most=SHOWN_LINES + 1)


def _records_holding(path: Path, holds: Callable[[str], bool], column: str | None, most: int) -> list[tuple[int, str]]:
    """(line, column) of the first `most` records whose `column` (None: any) `holds`."""
    found: list[tuple[int, str]] = []
    try:
        with _opener(path)(path, "rb") as raw:
            reader = csv_reader(io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline=""))
            header = [field.strip() for field in next(reader, [])]
            names = [field.lower() for field in header]
            if column is not None and column.strip().lower() not in names:
                return []
            indexes = range(len(header)) if column is None else [names.index(column.strip().lower())]
            begins = reader.line_num + 1
            for row in reader:
                held = next((i for i in indexes if len(row) > i and holds(row[i])), None)
                if held is not None:
                    found.append((begins, header[held]))
                    if len(found) == most:
                        break
                begins = reader.line_num + 1
    except (OSError, EOFError, zlib.error, csv.Error):
        return found
    return found


# Python's csv readers here (a jobs-file row by row, the lines a failed read names) read a field up to as
# many characters as the longest line DuckDB's read_csv reads (MAX_LINE_BYTES), where their own default,
# 131,072, failed on a field DuckDB had read.
csv.field_size_limit(MAX_LINE_BYTES)  # the process's (the csv module's): set once, as this module is imported


def csv_reader(lines: Iterable[str]) -> Iterator[list[str]]:
    """csv.reader over `lines`, a field read up to MAX_LINE_BYTES characters (csv.Error past it; the limit is set
    once, as this module is imported)."""
    return csv.reader(lines)


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def column_names(header: Sequence[str]) -> list[str]:
    """Names DuckDB can hold for these header fields: a name equal to an earlier one but for
    case gets `_1`, `_2`… (as DuckDB's own reader does: `user:Team` beside `user:team`);
    an empty one is `column<i>`."""
    seen: set[str] = set()
    names = []
    for index, field in enumerate(header):
        base = field or f"column{index}"
        name, number = base, 0
        while name.lower() in seen:
            number += 1
            name = f"{base}_{number}"
        seen.add(name.lower())
        names.append(name)
    return names


def check_typed_once(header: Sequence[str], types: Mapping[str, str], where: str) -> None:
    """A cost column named twice (`BilledCost` twice, or `BilledCost` and `billedcost`) fails
    naming both: which of them holds the cost is never guessed (DuckDB would read the second
    as `BilledCost_1`, as text, and the first would silently win)."""
    seen: dict[str, tuple[int, str]] = {}
    for number, field in enumerate(header, 1):
        key = field.strip().lower()
        if key in types and key in seen:
            first, spelling = seen[key]
            raise DataError(f"the cost column {field!r} is present twice: column {first} ({spelling!r}) "
                            f"and column {number} ({field!r})", where=where,
                            hint="keep one of them and re-export; spendlake does not guess which holds the cost")
        seen.setdefault(key, (number, field))


def read_csv(con: duckdb.DuckDBPyConnection, path: str | Path | Sequence[str | Path], where: str, *,
             types: Mapping[str, str] | None = None, nullstr: Sequence[str] = ("",), filename: bool = False,
             header: Sequence[str] | None = None,
             numbered: bool = False) -> tuple[duckdb.DuckDBPyRelation, dict[str, str]]:
    """The file (or files sharing `header`, read as one relation) as a relation whose columns
    are text (or `types`, by lower-case name), and the header field of each DuckDB column
    name. Path and options are bound, never pasted; `where` names the file(s) in errors.
    A typed (cost) column named twice fails naming both (check_typed_once). `numbered`: each row's
    file_index (0-based, in the order of the files) follows the columns."""
    paths = [str(path)] if isinstance(path, (str, Path)) else [str(p) for p in path]
    header = list(header) if header is not None else csv_header(paths[0], where)
    check_typed_once(header, types or {}, where)
    names = column_names(header)
    columns = {name: (types or {}).get(name.lower(), TEXT) for name in names}
    options: dict[str, object] = {"header": True, "auto_detect": False, "delim": ",", "quote": '"', "escape": '"',
                                  "nullstr": list(nullstr), "columns": columns, "filename": filename,
                                  "hive_partitioning": False}
    named = "".join(f", {name} = ?" for name in options)
    # Only then: the filter reads every column, where a query over the file reads those it needs.
    blank = " AND ".join(f"{ident(name)} IS NULL" for name in names)
    # per file: a blank row inside another file of the run is no spreadsheet's save, its reader names it
    blanks = [index for index, one in enumerate(paths) if ends_in_blank_rows(one)]
    where = "" if not blanks else f" WHERE NOT ({blank})" if len(paths) == 1 else \
        f" WHERE NOT ({blank} AND file_index IN ({', '.join(map(str, blanks))}))"
    relation = con.sql(f"SELECT *{', file_index' if numbered else ''} FROM read_csv(?{named}){where}",
                       params=[paths[0] if len(paths) == 1 else paths, *options.values()])
    return relation, dict(zip(names, header))


def quotes_closed(path: Path) -> bool | None:
    """Whether the file's every quoted field is closed (an even number of '"': a quote inside one
    is doubled); None for gzip, not counted (decompressing costs about what reading it does).
    DuckDB 2.0.1 reading five files or more at once drops the rows of a quote left open without
    a word, where it fails on one to four (connectors.folder_export.same_schema_runs)."""
    if path.name.lower().endswith(".gz"):
        return None
    quotes = 0
    with path.open("rb") as file:
        while chunk := file.read(1 << 24):
            quotes += chunk.count(b'"')
    return quotes % 2 == 0


def ends_in_blank_rows(path: str) -> bool:
    """Whether a plain CSV's last line has fields but no values (`,,,,`): a spreadsheet's save
    of rows it once formatted. Such rows are no charge, so they are left out."""
    if not path.lower().endswith(".csv"):
        return False
    try:
        with open(path, "rb") as raw:
            raw.seek(max(0, raw.seek(0, io.SEEK_END) - TAIL_BYTES))
            lines = raw.read().split(b"\n")
    except OSError:
        return False  # the reader names what is wrong with it
    last = next((line for line in reversed(lines) if line.strip()), b"")
    return bool(last) and not last.strip(b' ,;\t"\r')

