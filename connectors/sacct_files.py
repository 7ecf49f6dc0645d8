"""The files `sacct --json` and `sacct --parsable2` write, read as operators leave them
(connectors/slurm_jobs.py reads a `path` of them): gzipped or not, empty (no jobs, said in
one line), cut short or written again while read (failed, named), or beside files that are
not sacct's in a directory (skipped, said). A parsable2 file is read a line at a time: a
month of a big cluster is a million lines.
"""

from __future__ import annotations

import gzip
import itertools
import json
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any
from zoneinfo import ZoneInfo

from connectors.jobs_base import empty_file, job_file
from connectors.slurm_records import Attempt, BadRecord, json_attempts, parsable_attempts

log = logging.getLogger(__name__)

STALE = timedelta(hours=24)  # a running job absent from files this much newer has ended unseen
CUT_HINT = "re-run when the job writing it has finished (write to a temporary name, then rename it)"


def file_attempts(path: Path, zone: ZoneInfo, cluster: str | None, in_directory: bool) -> list[Attempt] | None:
    """The attempts of one sacct file; None when it is not sacct output and sits in a
    directory (a README, an editor's backup). BadRecord names the line; DataError the file."""
    with job_file(path) as raw:
        lines = _lines(path, _unzipped(raw))
        head = []  # the blank lines before the first that is not, and that one
        for line in lines:
            head.append(line)
            if line.strip():
                break
        first = head[-1].lstrip() if head else ""
        if not first:
            empty_file(path, sum(map(len, head)))
            return []
        if first[0] in "{[" or first.startswith("null"):
            return said_skewed(path, _json_attempts(path, "".join(itertools.chain(head, lines)), cluster))
        if "|" not in first and in_directory:
            log.warning("%s: not sacct output (neither JSON nor a '|'-separated header): skipped", path)
            return None
        attempts = list(parsable_attempts(_ended(itertools.chain(head, lines)), zone, cluster))
    if not attempts:
        log.info("%s: a sacct --parsable2 file without job allocations", path)
    return said_skewed(path, attempts)


def said_skewed(where: Path | str, attempts: list[Attempt]) -> list[Attempt]:
    """`attempts`, after one line for those that end before they start."""
    skewed = [a for a in attempts if a.skewed_end]
    if skewed:
        first = skewed[0]
        log.warning("%s: %d record(s) end before they start (clock skew?), counted as holding no GPU time; "
                    "the first, job %s: End %s, Start %s", where, len(skewed), first.job_id,
                    first.skewed_end.isoformat(), first.start.isoformat() if first.start else None)
    return attempts


def said_stale_running(files: list[tuple[Path, list[Attempt]]]) -> None:
    """One line for jobs running in a file that files whose records reach a day or more later do
    not list at all: sacct lists a running job in every window, so the later files' windows
    began after the job ended, and nothing says when. Such a job holds its GPUs until a file
    shows its end (read as running: no guess at an end)."""
    if len(files) < 2:
        return
    running = {a.record_id for _, read in files for a in read if a.end is None and a.start is not None}
    if not running:
        return
    newest = {path: max((t for a in read for t in (a.submit, a.start, a.end) if t), default=datetime.min)
              for path, read in files}
    latest = max(newest.values())
    seen: dict[str, datetime] = {}  # a running record → the newest file listing it (max: one shows its end)
    for path, read in files:
        for attempt in read:
            if attempt.record_id in running:
                time = datetime.max if attempt.end is not None else newest[path]
                seen[attempt.record_id] = max(seen.get(attempt.record_id, datetime.min), time)
    stale = [(path, a) for path, read in files for a in read
             if a.record_id in running and a.end is None and seen[a.record_id] <= latest - STALE]
    if stale:
        path, first = stale[0]
        log.warning("%d job(s) running in a file and absent from files whose records reach %d hours or more later "
                    "(their end is unknown, so they hold their GPUs until a file shows it); the first, job %s in %s: "
                    "export with a --starttime reaching back to their start", len({a.record_id for _, a in stale}),
                    STALE.total_seconds() // 3600, first.job_id, path)


def _unzipped(raw: IO[bytes]) -> IO[bytes]:
    return gzip.GzipFile(fileobj=raw, mode="rb") if raw.peek(2)[:2] == b"\x1f\x8b" else raw  # type: ignore[attr-defined]


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
                    log.warning("%s: line %d: byte 0x%02x is not UTF-8: read as U+FFFD, as any later (a job name or "
                                "comment?)", path, number, line[exc.start])
                    said = True
                yield line.decode("utf-8", errors="replace")
    except (EOFError, gzip.BadGzipFile) as exc:
        raise BadRecord(f"not a whole gzip file ({exc})", hint=CUT_HINT) from None


def _ended(lines: Iterator[str]) -> Iterator[str]:
    """sacct ends every line with LF: a last line without one was cut short (`gres/gpu=16` cut
    to `gres/gpu=1` would read as one GPU)."""
    for number, line in enumerate(lines, 1):
        if not line.endswith("\n") and line.strip():
            raise BadRecord(f"line {number}, the last, has no line end: the file was cut short (still being "
                            "written?); sacct ends every line with one", hint=CUT_HINT)
        yield line


def _json_attempts(path: Path, text: str, cluster: str | None) -> list[Attempt]:
    """`{"jobs": []}` is a day without jobs; JSON null or a bare list is no sacct document."""
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError) and exc.pos >= len(text.rstrip()):
            raise BadRecord(f"not JSON: {exc}: the file ends mid-document (cut short while being written?)",
                            hint=CUT_HINT) from None
        raise BadRecord(f"not JSON: {exc}") from None
    if data is None or isinstance(data, list):
        raise BadRecord(f"{'JSON null' if data is None else 'a JSON list'} is not a sacct --json document "
                        '({"jobs": [...]}): was it written through a filter (jq) that found nothing?')
    attempts = list(json_attempts(data, cluster))
    if not attempts:
        log.info("%s: a sacct --json document without jobs", path)
    return attempts
