"""What is said of Slurm allocation records read from files or slurmrestd, in bulk over their
table (connectors/slurm_records.py `ATTEMPT_COLUMNS`): clock skew per file, finished jobs without
an end (ended at their start), jobs running in an old file that later files never list; and the `errors` and `warnings` Slurm writes beside the jobs.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from connectors.jobs_base import ended_at_start
from connectors.slurm_records import unread_labels

log = logging.getLogger(__name__)

NOTHING_FOUND = 9003  # slurmdbd's "Nothing found with query": no job in the window, not a failure


def slurm_errors(data: Any, key: str = "errors") -> list[str]:
    """The `errors` (or `warnings`) a sacct --json document or a slurmrestd answer carries, as
    texts: Slurm 23 and later put the specific text in `description`, the generic one in `error`."""
    errors = data.get(key) if isinstance(data, dict) else None
    errors = [e for e in errors if not (isinstance(e, dict) and e.get("error_number") == NOTHING_FOUND)] \
        if isinstance(errors, list) else []
    return [_said(e) if isinstance(e, dict) else str(e) for e in errors]


def _said(entry: dict) -> str:
    texts = [str(entry[k]) for k in ("description", "error") if entry.get(k)]
    if len(texts) == 2 and texts[0] != texts[1]:
        return f"{texts[0]} ({texts[1]})"
    return texts[0] if texts else json.dumps(entry)


STALE = timedelta(hours=24)  # a running job absent from files this much newer has ended unseen


def said_warnings(data: Any, where: Path | str) -> None:
    """One line for the `warnings` of a sacct --json document or slurmrestd answer (its jobs are
    read: a warning is no failure, but may say why some are missing)."""
    texts = slurm_errors(data, "warnings")
    if texts:
        log.warning("%s: Slurm wrote %d warning(s) beside the jobs: %s", where, len(texts), "; ".join(texts)[:400])


def said_not_utf8(path: Path, line: int, byte: int) -> None:
    """One line for a file's first byte that is not UTF-8 (read as U+FFFD, as any later)."""
    log.warning("%s: line %d: byte 0x%02x is not UTF-8: read as U+FFFD, as any later (a job name or comment?)",
                path, line, byte)


def said_skewed(con: duckdb.DuckDBPyConnection, where: Path | str, attempts: str) -> str:
    """`attempts` (a table's name), after one line for those that end before they start."""
    [(count, job, end, start)] = con.sql((f"WITH t AS (SELECT * FROM {attempts}) "
        "SELECT count(skewed_end), arg_min(job_id, _row) FILTER (WHERE skewed_end IS NOT NULL), "
        "arg_min(skewed_end, _row) FILTER (WHERE skewed_end IS NOT NULL), "
        "arg_min(start_time, _row) FILTER (WHERE skewed_end IS NOT NULL) FROM t")).fetchall()
    if count:
        log.warning("%s: %d record(s) end before they start (clock skew?), counted as holding no GPU time; "
                    "the first, job %s: End %s, Start %s", where, count, job, end.isoformat(),
                    start.isoformat() if start else None)
    return attempts


def said_read(con: duckdb.DuckDBPyConnection, where: Path | str, attempts: str) -> str:
    """`attempts` (a table's name), after what is said of one file's or answer's records as a whole,
    those in a finished state without an End or Elapsed ended at their Start (jobs_base.ended_at_start)."""
    return said_no_gpus(con, where, said_unread_comments(con, where, said_skewed(con, where, ended_at_start(
        con, where, attempts))))


def said_unread_comments(con: duckdb.DuckDBPyConnection, where: Path | str, attempts: str) -> str:
    """`attempts` (a table's name), after one line for records whose Comment looks meant as labels
    (a `{`, an `=`) yet yields none (slurm_records.unread_labels): their run is then the job's."""
    unread = [comment for (comment,) in con.sql(f"SELECT DISTINCT comment FROM {attempts} WHERE "
                                                "comment LIKE '{%' OR contains(comment, '=')").fetchall()
              if unread_labels(comment)]
    if unread:
        [(count, job, comment)] = con.execute(f"SELECT count(DISTINCT record_id), arg_min(job_id, _row), "
                                              f"arg_min(comment, _row) FROM {attempts} WHERE list_contains(?, comment)",
                                              [unread]).fetchall()
        log.warning("%s: %d record(s) have a Comment that looks like labels but yields none (JSON that does not "
                    "parse, or no key=value word), so their run is their job's; the first, job %s: %r", where, count,
                    job, comment[:120])
    return attempts


def said_no_gpus(con: duckdb.DuckDBPyConnection, where: Path | str, attempts: str) -> str:
    """`attempts` (a table's name), after one line when records were allocated nodes but none
    carries a GPU: Slurm records gres/gpu in AllocTRES only when slurm.conf tracks it."""
    [(allocated,)] = con.sql(f"SELECT count(*) FILTER (WHERE nodes IS NOT NULL) FROM {attempts} "
                             "HAVING coalesce(max(gpus), 0) = 0").fetchall() or [(0,)]
    if allocated:
        log.warning("%s: none of the %d allocated record(s) carries gres/gpu in AllocTRES (tres.allocated): "
                    "each counts 0 GPUs; on a GPU cluster set AccountingStorageTRES=gres/gpu in slurm.conf "
                    "(Slurm records GPUs only for jobs that start after it)", where, allocated)
    return attempts


def said_unshared_gpus(con: duckdb.DuckDBPyConnection, where: Path | str, attempts: str, key: str) -> None:
    """One line per GRES sharing GPUs (gres/shard, gres/mps) that records hold and the source's
    `shared_gpus` (`key`) does not count: their GPUs count 0, so their hours go to idle.
    `attempts`: SQL over attempts tables."""
    for name, count, job in con.sql(f"SELECT unshared, count(DISTINCT record_id), arg_min(job_id, (_file, _row)) FROM ({attempts}) "
                                    "AS t WHERE unshared IS NOT NULL GROUP BY unshared ORDER BY unshared").fetchall():
        log.warning("%s: %d record(s) hold gres/%s, which shares GPUs, and count 0 GPUs for it (their hours go to "
                    "idle); the first, job %s: set %s: {%s: <its count per GPU in gres.conf>}", where, count, name,
                    job, key, name)


def said_stale_running(con: duckdb.DuckDBPyConnection, attempts: str, files: list[Path]) -> None:
    """One line for jobs running in a file that files whose records reach a day or more later do
    not list at all: sacct lists a running job in every window, so the later files' windows
    began after the job ended, and nothing says when. Such a job holds its GPUs until a file
    shows its end (read as running: no guess at an end). `attempts`: SQL over attempts tables,
    whose `_file` indexes `files`."""
    [(count, job, file)] = con.sql((f"WITH t AS ({attempts}), "
        # each file's newest time; a record's newest file listing it, or a file showing its end
        "listed AS (SELECT _file, max(greatest(coalesce(submit_time, start_time, end_time), "
        "coalesce(start_time, submit_time, end_time), coalesce(end_time, start_time, submit_time))) AS newest "
        "FROM t GROUP BY _file), "
        "running AS (SELECT record_id FROM t GROUP BY record_id "
        "HAVING bool_or(end_time IS NULL AND start_time IS NOT NULL)), "
        "seen AS (SELECT record_id, bool_or(end_time IS NOT NULL) AS ended, max(newest) AS newest FROM t "
        "JOIN listed USING (_file) WHERE record_id IN (SELECT record_id FROM running) GROUP BY record_id), "
        "stale AS (SELECT t.* FROM t JOIN seen USING (record_id) WHERE t.end_time IS NULL AND NOT seen.ended "
        "AND seen.newest <= (SELECT max(newest) FROM listed) - INTERVAL 24 HOUR "
        "AND (SELECT count(*) FROM listed) >= 2) "
        "SELECT count(DISTINCT record_id), arg_min(job_id, (_file, _row)), arg_min(_file, (_file, _row)) FROM stale"
    )).fetchall()
    if count:
        log.warning("%d job(s) running in a file and absent from files whose records reach %d hours or more later "
                    "(their end is unknown, so they hold their GPUs until a file shows it); the first, job %s in %s: "
                    "export with a --starttime reaching back to their start", count,
                    STALE.total_seconds() // 3600, job, files[file])
