"""A `sacct --parsable2` file read line by line (connectors/sacct_files.py reads it so when the
column-wise reader, connectors/sacct_columns.py, cannot take it exactly), and what both readers
say alike of a record no reader takes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path
from zoneinfo import ZoneInfo

from connectors.hostlist import hosts
from connectors.sacct_fields import FREE_TEXT, JOB_ID, records, split_line
from connectors.slurm_records import (REQUIRED, SACCT_FORMAT, Attempt, BadRecord, GpuShares, field_text, gres_gpus,
                                      parse_sacct_time, slurm_duration, tres_entries, unshared_gres)
from service.core.job_states import normal_state

log = logging.getLogger(__name__)


class NoReaderTakes(BadRecord):
    """What both readers of a parsable2 file say alike: the column-wise reader says it without
    reading the file again line by line."""


class FreeTextUnknown(NoReaderTakes):
    """A line with more fields than the header, which free-text column holds the extra `|`s
    unknown: no reader takes it."""


CUT_HINT = "re-run when the job writing it has finished (write to a temporary name, then rename it)"


def cut_short(number: int) -> NoReaderTakes:
    """sacct ends every line with LF: a last line without one was cut short (`gres/gpu=16` cut
    to `gres/gpu=1` would read as one GPU)."""
    return NoReaderTakes(f"line {number}, the last, has no line end: the file was cut short (still being written?); "
                         "sacct ends every line with one", hint=CUT_HINT)


def not_whole_gzip(exc: Exception) -> NoReaderTakes:
    return NoReaderTakes(f"not a whole gzip file ({exc})", hint=CUT_HINT)


def parsable_attempts(lines: Iterable[str], zone: ZoneInfo, default_cluster: str | None, where: Path | str,
                      delimiter: str = "|", shares: GpuShares = ()) -> Iterable[Attempt]:
    """Attempts of the `sacct --parsable2` text of `where` (header first, blank lines skipped), its
    fields separated by `delimiter`; BadRecord names the line."""
    header: list[str] | None = None
    side_by_side: list[tuple[int, str]] = []
    for number, fields in records(lines, delimiter):
        if header is None:
            header = fields
            missing = [name for name in REQUIRED if name not in header]
            if missing and JOB_ID.match(fields[0]):  # a job's record where the header should be
                raise BadRecord(f"line {number}: a job's record ({fields[0]}), not the header line naming the columns "
                                "(written with --noheader?)", hint=f"run sacct without --noheader: --parsable2 "
                                f"--format={SACCT_FORMAT}")
            if missing:
                raise BadRecord(f"line {number}: not a sacct --parsable2 header with {', '.join(missing)} "
                                f"(run sacct --parsable2 --format={SACCT_FORMAT})")
            continue
        if fields == header:
            continue  # exports appended to one file (`sacct ... >> month.txt`), each with its header
        if len(fields) != len(header):
            fields = free_text_split(fields, header, number, side_by_side, delimiter)
        row = dict(zip(header, fields))
        if row["JobIDRaw"] == "JobIDRaw":
            raise BadRecord(f"line {number}: a header line naming other columns than the first: appended exports "
                            "must share one --format list", hint=f"write each export with --format={SACCT_FORMAT}")
        if "." in row["JobIDRaw"]:
            continue  # a step
        try:
            yield _parsable_attempt(row, zone, default_cluster, shares)
        except (BadRecord, ValueError) as exc:
            raise BadRecord(f"line {number} (job {row['JobID']}): {exc}") from None
    said_side_by_side(where, side_by_side, header or [], delimiter)


def free_text_split(fields: list[str], header: list[str], number: int, side_by_side: list[tuple[int, str]],
                    delimiter: str = "|") -> list[str]:
    """The line `number`'s `fields` (split at every `delimiter`) as the header's columns
    (sacct_fields.split_line); a line whose delimiter could belong to either of two free-text
    columns side by side is added to `side_by_side` as (line, job), for said_side_by_side."""
    split = split_line(fields, header, delimiter)
    if split is None:
        raise FreeTextUnknown(f"line {number}: {len(fields)} fields where the header has {len(header)} (a "
                              f"{delimiter!r} inside Comment or JobName? sacct does not escape it: list them last in "
                              "--format, as README does, or read sacct --json instead)")
    if split[1]:
        side_by_side.append((number, split[0][0]))
    return split[0]


def said_side_by_side(where: Path | str, side_by_side: list[tuple[int, str]], header: list[str],
                      delimiter: str = "|") -> None:
    """One line per file (not per line: a month may have thousands) for free_text_split's guesses."""
    if side_by_side:
        free = [name for name in header if name in FREE_TEXT]
        (number, job), count = side_by_side[0], len(side_by_side)
        log.warning("%s: %d line(s) with a %r inside %s, which sit side by side: read as part of %s "
                    "(first: line %d, job %s)", where, count, delimiter, " or ".join(free), free[0], number, job)


def _parsable_attempt(row: dict[str, str], zone: ZoneInfo, default_cluster: str | None, shares: GpuShares) -> Attempt:
    raw_id, job_id = row["JobIDRaw"].strip(), row["JobID"].strip()
    job_id = raw_id if job_id == raw_id else job_id  # one string where they agree (most jobs): memory
    state = normal_state(row["State"])
    if state is None:
        raise BadRecord(f"State {row['State']!r} is not a Slurm job state")
    submitted_as = re.split(r"[_+]", job_id, maxsplit=1)[0] if "_" in job_id or "+" in job_id else job_id
    try:
        nodes = hosts(row["NodeList"]) or None
    except ValueError as exc:
        raise BadRecord(f"NodeList: {exc}") from None
    start, end = parse_sacct_time(row["Start"], zone, "Start"), parse_sacct_time(row["End"], zone, "End")
    if start and end and end < start:  # a job across the hour the clocks turned back: it ends in its second pass
        end = max(end, parse_sacct_time(row["End"], zone, "End", fold=1))
    tres = tres_entries(row["AllocTRES"])  # parsed once for the GPUs and the GRES left uncounted
    return Attempt(raw_id=raw_id, job_id=job_id, submitted_as=submitted_as,
                   cluster=field_text(row.get("Cluster")) or default_cluster, state=state,
                   submit=parse_sacct_time(row["Submit"], zone, "Submit"),
                   start=start, end=end, elapsed=slurm_duration(row.get("Elapsed")),
                   gpus=gres_gpus(tres, shares), nodes=nodes, user=field_text(row.get("User")),
                   account=field_text(row.get("Account")), partition=field_text(row.get("Partition")),
                   qos=field_text(row.get("QOS")), name=field_text(row.get("JobName")), wckey=row.get("WCKey"),
                   comment=row.get("Comment"), unshared=unshared_gres(tres, shares))
