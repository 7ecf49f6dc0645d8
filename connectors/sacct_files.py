"""The files `sacct --json` and `sacct --parsable2` write, read as operators leave them
(connectors/slurm_jobs.py reads a `path` of them): gzipped or not, empty (no jobs, said in
one line), cut short or written again while read (failed, named), or beside files that are
not sacct's in a directory (skipped, said). A month of a big cluster is a million lines.
"""

from __future__ import annotations

import gzip
import logging
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any
from zoneinfo import ZoneInfo

import duckdb

from connectors.jobs_base import empty_file, job_file, stored
from connectors.source_folder import Folder
from connectors.sacct_json import JOBS_TWICE, NotJson, json_members, text_pieces
from connectors.slurm_json import NO_JOBS, record_attempts
from connectors.sacct_fields import IN_FIXED_COLUMNS, header_delimiter, records
from connectors.sacct_lines import CUT_HINT, cut_short, not_whole_gzip, parsable_attempts
from connectors.slurm_records import EPOCH, REQUIRED, BadRecord, GpuShares, attempts_schema, stored_attempts
from connectors.slurm_warnings import said_not_utf8, said_read, said_warnings, slurm_errors

log = logging.getLogger(__name__)

GZIP_MAGIC = b"\x1f\x8b"


def file_attempts(con: duckdb.DuckDBPyConnection, path: Path, folder: Folder, number: int, zone: ZoneInfo,
                  cluster: str | None, in_directory: bool, shares: GpuShares = ()) -> str | None:
    """The attempts of one sacct file: the name of a temporary table of `con` with
    connectors/slurm_records.py's ATTEMPT_COLUMNS, `_file` = `number`;
    None when it is not sacct output and sits in a directory (a README, an editor's backup).
    BadRecord names the line; DataError the file. A parsable2 file is read column-wise, and
    again line by line when that reader cannot take it (which names what is wrong)."""
    with job_file(path, folder) as raw:
        if _json_start(_head(raw).lstrip()):  # one document, perhaps on one line: streamed, not read as lines
            return said_read(con, path, _json_attempts(con, path, _unzipped(raw), number, cluster, shares))
        lines = _lines(path, _unzipped(raw))
        head = []  # the blank lines before the first that is not, and that one
        for line in lines:
            head.append(line)
            if line.strip():
                break
        first = head[-1].lstrip() if head else ""
        if not first:
            empty_file(path, sum(map(len, head)))
            return stored(con, "SELECT * FROM {empty}", empty=attempts_schema().empty_table())
        if _json_start(first):  # after more than PEEK bytes of blank lines
            raw.seek(0)
            return said_read(con, path, _json_attempts(con, path, _unzipped(raw), number, cluster, shares))
        delimiter = header_delimiter(first, REQUIRED) or ("|" if "|" in first else None)
        if delimiter is None and in_directory:
            log.warning("%s: not sacct output (neither JSON nor a header of sacct's column names): skipped", path)
            return None
        if delimiter is None:
            raise BadRecord(f"line {len(head)}: not a sacct --parsable2 header: no one delimiter ('|', or the one "
                            f"given to sacct --delimiter) separates the column names {', '.join(REQUIRED)} in it")
        if delimiter in IN_FIXED_COLUMNS:
            raise BadRecord(f"line {len(head)}: sacct --delimiter={delimiter!r} cannot be read: sacct's own columns "
                            f"print it too (AllocTRES 'cpu=96,gres/gpu=8', NodeList 'a-[1-4],b1', times, job ids, "
                            f"'CANCELLED by 0'), so their fields cannot be told apart",
                            hint="write it again with --delimiter=';', a tab, or without --delimiter ('|')")
        raw.seek(0)
        gzipped = raw.peek(2)[:2] == GZIP_MAGIC  # type: ignore[attr-defined]
        from connectors.sacct_columns import parsable_table  # Arrow: loaded to read, not to configure

        header = head[-1].rstrip("\r\n").split(delimiter)
        table = parsable_table(con, raw, gzipped, header, delimiter, zone, cluster, number, path, shares)
        if table is None:
            raw.seek(0)
            lines = _lines(path, _unzipped(raw))
            table = stored_attempts(con, parsable_attempts(_ended(lines), zone, cluster, path, delimiter, shares),
                                    number)
    if not con.sql(f"SELECT count(*) FROM {table}").fetchall()[0][0]:
        log.info("%s: a sacct --parsable2 file without job allocations", path)
    return said_read(con, path, table)


PEEK = 65536  # bytes instant_times reads: a file's first character that is not blank, its first job
EPOCH_WORDS = "seconds since 1970"


def instant_times(path: Path, folder: Folder) -> str | None:
    """How the file's times are written when they are instants, the same in every zone, so the
    source's `timezone` reads none of them: `seconds since 1970` (a sacct --json document, as
    file_attempts tells it, or --parsable2 with SLURM_TIME_FORMAT=%s) or `written with their UTC
    offset` (%FT%T%z); None when they are read in the zone. A parsable2 file is told by its first
    job's Submit: sacct writes every time of a file in one format. Reads its first PEEK bytes."""
    with job_file(path, folder) as raw:
        head = _unzipped(raw).read(PEEK)
    text = head.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="replace")
    if _json_start(text.lstrip()):
        return EPOCH_WORDS
    lines = text.split("\n")  # at LF alone, as _lines reads them
    if len(head) == PEEK:  # its last line may be cut at the peek's end
        lines.pop()
    delimiter = header_delimiter(next((line.lstrip() for line in lines if line.strip()), ""), REQUIRED)
    if delimiter is None:
        return None
    read = records(lines, delimiter)
    header, first = next(read, (0, []))[1], next(read, (0, []))[1]
    at = header.index("Submit")
    submit = first[at].strip() if len(first) > at else ""
    if re.fullmatch(EPOCH, submit):
        return EPOCH_WORDS
    try:
        return "written with their UTC offset" if datetime.fromisoformat(submit).tzinfo is not None else None
    except ValueError:
        return None


def _json_start(first: str) -> bool:
    return first[:1] in ("{", "[") or first.startswith("null")


def _head(raw: IO[bytes]) -> str:
    """The file's first PEEK bytes as text (a gzip cut short within them: as far as it goes);
    `raw` is read again from its start."""
    unzipped, head = _unzipped(raw), b""
    try:
        while len(head) < PEEK and (piece := unzipped.read(PEEK - len(head))):
            head += piece
    except (EOFError, gzip.BadGzipFile):
        pass
    raw.seek(0)
    return head.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="replace")


def _unzipped(raw: IO[bytes]) -> IO[bytes]:
    return gzip.GzipFile(fileobj=raw, mode="rb") if raw.peek(2)[:2] == GZIP_MAGIC else raw  # type: ignore[attr-defined]


def _lines(path: Path, binary: IO[bytes]) -> Iterator[str]:
    """The file's lines, ending at LF only (str.splitlines() also splits at U+2028, NEL, form
    feeds and separators a job name or comment may hold); bytes that are not UTF-8 (Slurm
    stores names and comments as given) read as U+FFFD, said once."""
    said = False
    try:
        for number, line in enumerate(binary, 1):
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            try:
                yield line.decode("utf-8")
            except UnicodeDecodeError as exc:
                if not said:
                    said_not_utf8(path, number, line[exc.start])
                    said = True
                yield line.decode("utf-8", errors="replace")
    except (EOFError, gzip.BadGzipFile) as exc:
        raise not_whole_gzip(exc) from None


def _ended(lines: Iterator[str]) -> Iterator[str]:
    """The lines, failing at a last one cut short (sacct_lines.cut_short)."""
    for number, line in enumerate(lines, 1):
        if not line.endswith("\n") and line.strip():
            raise cut_short(number)
        yield line


def _json_attempts(con: duckdb.DuckDBPyConnection, path: Path, binary: IO[bytes], number: int,
                  cluster: str | None, shares: GpuShares) -> str:
    """A sacct --json document's attempts, read job by job (connectors/sacct_json.py), in a
    temporary table of `con`. `{"jobs": []}` is a day without jobs; JSON null or a bare list
    is no sacct document."""
    members: dict[str, Any] = {}
    try:
        table = stored_attempts(con, record_attempts(json_members(text_pieces(path, binary), members), cluster,
                                                     shares), number)
    except NotJson as exc:
        if exc.cut:
            raise BadRecord(f"not JSON: {exc}: the file ends mid-document (cut short while being written?)",
                            hint=CUT_HINT) from None
        raise BadRecord(f"not JSON: {exc}") from None
    except ValueError as exc:
        if isinstance(exc, BadRecord):
            raise
        raise BadRecord(f"not JSON: {exc}") from None
    try:
        _whole_document(path, members)
    except BadRecord:
        con.execute(f"DROP TABLE {table}").fetchall()
        raise
    if not con.sql(f"SELECT count(*) FROM {table}").fetchall()[0][0]:
        log.info("%s: a sacct --json document without jobs", path)
    return table


def _whole_document(path: Path, members: dict[str, Any]) -> None:
    """What the document holds beside its jobs, once they are read: sacct's errors fail it."""
    if "" in members:
        data = members[""]
        raise BadRecord(f"{'JSON null' if data is None else 'a JSON list'} is not a sacct --json document "
                        '({"jobs": [...]}): was it written through a filter (jq) that found nothing?')
    errors = slurm_errors(members)
    if errors:  # sacct writes what failed (slurmdbd unreachable, a query refused) beside the jobs it got, if any
        raise BadRecord(f"sacct wrote error(s) into this document: {'; '.join(errors)[:400]}",
                        hint="fix what it says and run sacct again; its jobs list may be incomplete")
    said_warnings(members, path)
    if members.get("jobs") is JOBS_TWICE:  # json.loads would read the last alone
        raise BadRecord('"jobs" twice in one document: which is sacct\'s?')
    if members.get("jobs") != []:  # none, or no list
        raise BadRecord(NO_JOBS)
