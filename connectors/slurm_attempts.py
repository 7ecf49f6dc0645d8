"""Slurm allocation records as an Arrow table (`attempts`), however they were read (sacct
--parsable2 column-wise, sacct --json and slurmrestd through `Attempt`), and what is said and
made of them in bulk: clock skew per file, jobs running in an old file that later files never
list, and the `jobs` rows (connectors/slurm_records.py says the rules) in DuckDB, with labels and
runs taken once per distinct comment and wckey.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow as pa

from connectors.jobs_base import jobs_schema, labelled_run
from connectors.slurm_records import Attempt, comment_labels

log = logging.getLogger(__name__)

STALE = timedelta(hours=24)  # a running job absent from files this much newer has ended unseen
_TEXT, _TIME = pa.string(), pa.timestamp("us")
ATTEMPTS = pa.schema([
    ("record_id", _TEXT), ("raw_id", _TEXT), ("job_id", _TEXT), ("submitted_as", _TEXT), ("cluster", _TEXT),
    ("state", _TEXT), ("submit_time", _TIME), ("start_time", _TIME), ("end_time", _TIME), ("skewed_end", _TIME),
    ("gpus", pa.float64()), ("nodes", pa.list_(_TEXT)), ("user", _TEXT), ("account", _TEXT), ("partition", _TEXT),
    ("qos", _TEXT), ("name", _TEXT), ("comment", _TEXT), ("wckey", _TEXT),  # comment, wckey: '' when none
    ("_file", pa.int32()), ("_row", pa.int64())])


def attempts_table(attempts: list[Attempt], file: int = 0) -> pa.Table:
    """`attempts` (read one at a time) as the table, in their order."""
    fields = {"submit_time": "submit", "start_time": "start", "end_time": "end"}
    columns = {name: [getattr(a, fields.get(name, name)) for a in attempts] for name in ATTEMPTS.names[:-2]}
    columns["nodes"] = [list(nodes) if nodes else None for nodes in columns["nodes"]]
    columns["_file"] = [file] * len(attempts)
    columns["_row"] = list(range(len(attempts)))
    return pa.table(columns, schema=ATTEMPTS)


def said_skewed(con: duckdb.DuckDBPyConnection, where: Path | str, attempts: pa.Table) -> pa.Table:
    """`attempts`, after one line for those that end before they start."""
    [(count, job, end, start)] = con.from_arrow(attempts).query("t", (
        "SELECT count(skewed_end), arg_min(job_id, _row) FILTER (WHERE skewed_end IS NOT NULL), "
        "arg_min(skewed_end, _row) FILTER (WHERE skewed_end IS NOT NULL), "
        "arg_min(start_time, _row) FILTER (WHERE skewed_end IS NOT NULL) FROM t")).fetchall()
    if count:
        log.warning("%s: %d record(s) end before they start (clock skew?), counted as holding no GPU time; "
                    "the first, job %s: End %s, Start %s", where, count, job, end.isoformat(),
                    start.isoformat() if start else None)
    return attempts


def said_stale_running(con: duckdb.DuckDBPyConnection, attempts: pa.Table, files: list[Path]) -> None:
    """One line for jobs running in a file that files whose records reach a day or more later do
    not list at all: sacct lists a running job in every window, so the later files' windows
    began after the job ended, and nothing says when. Such a job holds its GPUs until a file
    shows its end (read as running: no guess at an end). `_file` indexes `files`."""
    [(count, job, file)] = con.from_arrow(attempts).query("t", (
        # each file's newest time; a record's newest file listing it, or a file showing its end
        "WITH listed AS (SELECT _file, max(greatest(coalesce(submit_time, start_time, end_time), "
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


def slurm_jobs(con: duckdb.DuckDBPyConnection, attempts: pa.Table, run_labels: Iterable[str]) -> pa.Table:
    """`jobs` rows: one per record id (the last read that has ended, else the last read: files
    in name order), restarts counted per job in submit order, a job's comment from its latest
    attempt showing one (Slurm 22.05 stores the comment when an attempt ends, so the running
    attempt of a requeued job shows none, yet it is the same job and run); ordered by cluster,
    job and submit time."""
    import pyarrow.compute as pc

    finished = con.from_arrow(attempts).query("t", (
        "SELECT *, CAST(row_number() OVER job - 1 AS INTEGER) AS restarts, coalesce(nullif(comment, ''), "
        "last_value(nullif(comment, '') IGNORE NULLS) OVER (PARTITION BY cluster, raw_id ORDER BY submit_time "
        "NULLS FIRST ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING), '') AS job_comment "
        "FROM (SELECT * FROM t QUALIFY row_number() OVER (PARTITION BY record_id ORDER BY end_time IS NOT NULL "
        "DESC, _file DESC, _row DESC) = 1) AS kept "
        "WINDOW job AS (PARTITION BY cluster, raw_id ORDER BY submit_time NULLS FIRST) "
        "ORDER BY coalesce(cluster, ''), raw_id, submit_time NULLS FIRST")).to_arrow_table()
    run_labels = tuple(run_labels)
    keys = pc.binary_join_element_wise(finished.column("job_comment"), finished.column("wckey"), "\x00")
    encoded = keys.combine_chunks().dictionary_encode() if len(keys) else pa.array([], _TEXT).dictionary_encode()
    labels, runs = [], []
    for key in encoded.dictionary.to_pylist():
        comment, wckey = key.split("\x00")
        found = {**comment_labels(comment), **({"wckey": wckey} if wckey else {}),
                 **({"comment": comment} if comment else {})}
        labels.append(list(found.items()) or None)
        runs.append(labelled_run(found, run_labels))
    schema = jobs_schema()
    run = pc.coalesce(pa.array(runs, _TEXT).take(encoded.indices),
                      pc.if_else(pc.equal(finished.column("submitted_as"), ""), pa.scalar(None, _TEXT),
                                 finished.column("submitted_as")),
                      finished.column("job_id"))
    values = {"run_id": run, "scheduler": pa.array(["slurm"] * finished.num_rows, _TEXT),
              "labels": pa.array(labels, schema.field("labels").type).take(encoded.indices)}
    return pa.table({name: values[name] if name in values else finished.column(name) if name in finished.column_names
                     else pa.nulls(finished.num_rows, schema.field(name).type) for name in schema.names}).cast(schema)
