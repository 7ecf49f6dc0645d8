"""A `sacct --parsable2` file read column-wise (connectors/sacct_files.py tries it first): read a
block at a time by pyarrow's CSV reader ('|'-separated, no quoting, as sacct writes) into a
DuckDB temporary table, texts stripped and times parsed in SQL, and what a month repeats
(states, AllocTRES, node lists) parsed once per distinct value by the row reader's own
functions (connectors/slurm_records.py).

Records pyarrow would split otherwise (a '|' or a line break in a job name or comment, a bare
CR) are held apart and placed by the line reader's rule; bytes that are not UTF-8 read as U+FFFD;
a last line cut short and a line no reader takes fail as the line reader fails them. Whatever
else it cannot take exactly as the row reader would answers None, and the caller reads the file
again line by line, which names the line and what is wrong: a state, node list or time that
does not parse, a later header naming other columns, a gzip file without its end.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa

from connectors.hostlist import hosts
from connectors.jobs_base import stored, with_values
from connectors.jobs_file_columns import (CLOCK, TIME_PARAMS, NotColumnWise, csv_blocks, fast_time_sql, per_value,
                                         stripped_text, time_sql)
from connectors.sacct_stream import RecordStream
from connectors.sacct_lines import NoReaderTakes, cut_short, free_text_split, not_whole_gzip, said_side_by_side
from connectors.slurm_records import (ENDED, EPOCH, NO_TIME, REQUIRED, BadRecord, GpuShares, alloc_tres_gpus,
                                      alloc_tres_unshared, parse_sacct_time, slurm_duration)
from connectors.slurm_warnings import said_not_utf8
from service.core.job_states import normal_state

OPTIONAL = ("JobName", "Cluster", "Partition", "Account", "User", "QOS", "WCKey", "Comment", "Elapsed")
TIMES = {"Submit": "submit_time", "Start": "start_time", "End": "end_time"}
# stripped as str.strip() does, by Arrow (a third of the SQL's time at 1M jobs, in SQL)
STRIPPED = ("JobIDRaw", "JobID", *TIMES, "Cluster", "User", "Account", "Partition", "QOS", "JobName", "Comment")


def parsable_table(con: duckdb.DuckDBPyConnection, raw: IO[bytes], gzipped: bool, header: list[str], delimiter: str,
                   zone: ZoneInfo, default_cluster: str | None, file: int, path: Path,
                   shares: GpuShares = ()) -> str | None:
    """The allocations (steps left out) of the parsable2 file `path` open as `raw` whose header line is
    `header`, its fields separated by `delimiter`: the name of a temporary table of `con` with
    connectors/slurm_records.py's ATTEMPT_COLUMNS columns (and others); None when the row reader must read it
    (a delimiter of more than one byte, which pyarrow does not take, too)."""
    if len(set(header)) != len(header) or any(name not in header for name in REQUIRED) or len(delimiter.encode()) > 1:
        return None
    read, stream = None, RecordStream(gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw, header, delimiter)
    try:
        read = _stored(con, stream, header, zone, default_cluster, path, shares)
        for name in TIMES:
            _odd_times(con, read, name, lambda value, name=name: parse_sacct_time(value, zone, name))
        _ends_in_second_pass(con, read, zone)
        _elapsed(con, read)
        _finish(con, read, file)
        if stream.not_utf8:
            said_not_utf8(path, *stream.not_utf8)
        return read
    except (NotColumnWise, BadRecord, ValueError) as exc:
        if read is not None:
            con.execute(f"DROP TABLE IF EXISTS {read}").fetchall()
        if isinstance(exc, NoReaderTakes):
            raise  # the line reader would say the same, after reading the whole file again
        return None
    finally:
        stream.stop()  # the caller may read `raw` again


def _stored(con: duckdb.DuckDBPyConnection, stream: RecordStream, header: list[str], zone: ZoneInfo,
            default_cluster: str | None, path: Path, shares: GpuShares) -> str | None:
    """The file's allocations stored (in a temporary table) a block at a time: texts stripped,
    times parsed where SQL reads them as Python would (`<column>_odd`: the rest), and what a
    month repeats (State, AllocTRES, NodeList) parsed once per distinct value. The lines with a
    `|` in free text (`stream.apart`) are placed by the line reader's rule, in a block of their
    own; `_row` keeps every record's place in the file."""
    import numpy as np
    import pyarrow.csv as pcsv

    wanted = {name: header.index(name) for name in (*REQUIRED, *OPTIONAL) if name in header}
    options = pcsv.ParseOptions(delimiter=stream.delimiter, quote_char=False, escape_char=False, double_quote=False)
    sql, params = _block_sql(set(wanted), zone, default_cluster)
    memos: dict[str, dict[Any, Any]] = {"State": {}, "AllocTRES": {}, "unshared": {}, "NodeList": {}}
    table, rows = None, 1  # pyarrow's rows: the header is the first

    def store(cells: pa.Table, places: Any) -> None:
        nonlocal table
        table = stored(con, sql, params, into=table, cells=_parsed(cells.append_column("_row", pa.array(
            places, pa.int64())), memos, shares))

    try:
        for cells in csv_blocks(stream, header, wanted, options):
            # a record's place: its row among pyarrow's, after the held-back lines before it
            passed = np.arange(rows, rows + cells.num_rows)
            store(cells, passed + np.searchsorted([before for before, _, _ in stream.apart], passed, side="right"))
            rows += cells.num_rows
        if stream.apart:
            side_by_side: list[tuple[int, str]] = []
            fields = [record if len(record) == len(header)
                      else free_text_split(record, header, number, side_by_side, stream.delimiter)
                      for _, number, record in stream.apart]
            said_side_by_side(path, side_by_side, header, stream.delimiter)
            store(pa.table({name: pa.array([line[index] for line in fields], pa.string())
                            for name, index in wanted.items()}),
                  [before + place for place, (before, _, _) in enumerate(stream.apart)])
        if stream.broken is not None:
            raise not_whole_gzip(stream.broken)
        if stream.cut is not None:
            raise cut_short(stream.cut)
    except (NotColumnWise, BadRecord, ValueError):
        if table is not None:
            con.execute(f"DROP TABLE {table}").fetchall()
        raise
    return table


def _parsed(cells: pa.Table, memos: dict[str, dict[Any, Any]], shares: GpuShares) -> pa.Table:
    """A block's cells without steps and repeated headers, texts stripped, State, AllocTRES and
    NodeList parsed once per distinct value (`memos`: those parsed in earlier blocks)."""
    import pyarrow.compute as pc

    cells = cells.filter(pc.invert(pc.match_substring(cells.column("JobIDRaw"), ".")))  # steps are not jobs
    cells = _without_headers(cells)
    columns: dict[str, Any] = {name: stripped_text(cells.column(name)) if name in STRIPPED else cells.column(name)
                               for name in cells.column_names}
    columns["State"] = per_value(cells.column("State"), _state, pa.string(), memo=memos["State"])
    columns["AllocTRES"] = per_value(cells.column("AllocTRES"), lambda text: alloc_tres_gpus(text, shares),
                                     pa.float64(), memo=memos["AllocTRES"])
    columns["unshared"] = per_value(cells.column("AllocTRES"), lambda text: alloc_tres_unshared(text, shares),
                                    pa.string(), memo=memos["unshared"])
    columns["NodeList"] = per_value(cells.column("NodeList"), _nodes, pa.list_(pa.string()), memo=memos["NodeList"])
    return pa.table(columns)


def _without_headers(cells: pa.Table) -> pa.Table:
    """`cells` without the header lines of exports appended to the file after the first; one
    naming other columns is left to the line reader to say."""
    import pyarrow.compute as pc

    again = pc.equal(cells.column("JobIDRaw"), "JobIDRaw")
    if not pc.any(again).as_py():
        return cells
    if any(set(cells.filter(again).column(name).to_pylist()) != {name} for name in cells.column_names
           if name != "_row"):
        raise NotColumnWise("another header")
    return cells.filter(pc.invert(again))


def _state(text: str) -> str:
    found = normal_state(text)
    if found is None:
        raise NotColumnWise(text)
    return found


def _nodes(text: str) -> list[str] | None:
    return list(hosts(text)) or None


def _block_sql(present: set[str], zone: ZoneInfo, default_cluster: str | None) -> tuple[str, dict[str, Any]]:
    """Over a block's cells (_parsed: texts stripped), its attempts: each time read by SQL once,
    for its value and for what is left to Python (`<column>_odd`)."""
    def text(name: str) -> str:  # a text column sacct may leave out; NULL when empty
        return f"nullif({quoted(name)}, '')" if name in present else "CAST(NULL AS VARCHAR)"

    utc = zone.key == "UTC"
    inner = ['"JobIDRaw"', '"JobID"', '"State"', '"AllocTRES"', '"unshared"', '"NodeList"', *map(quoted, TIMES),
             *(f'{fast_time_sql(quoted(name), utc, epoch=True)} AS "{name}_t"' for name in TIMES),
             *(f"{text(name)} AS {quoted(name)}" for name in ("Cluster", "User", "Account", "Partition", "QOS", "JobName")),
             "ltrim(\"WCKey\", '*') AS \"WCKey\"" if "WCKey" in present else "'' AS \"WCKey\"",
             '"Comment"' if "Comment" in present else "'' AS \"Comment\"",
             '"Elapsed"' if "Elapsed" in present else 'CAST(NULL AS VARCHAR) AS "Elapsed"', "_row"]
    times = [part for name in TIMES for part in time_sql(name, f"list_contains($no_time, {quoted(name)})", utc,
                                                         fast=f'"{name}_t"')]
    params = {**TIME_PARAMS, "no_time": sorted(NO_TIME), "cluster": default_cluster, "epoch": EPOCH,
              **({"clock": CLOCK} if utc else {})}
    return (
        'SELECT "JobIDRaw" AS raw_id, "JobID" AS job_id, '
        'coalesce("Cluster", $cluster) AS cluster, "State" AS state, "AllocTRES" AS gpus, unshared, "NodeList" AS nodes, '
        + ", ".join(times) + ', "User" AS "user", "Account" AS account, "Partition" AS "partition", "QOS" AS qos, '
        '"JobName" AS name, "WCKey" AS wckey, "Comment" AS comment, "Elapsed" AS elapsed, _row FROM (SELECT '
        + ", ".join(inner) + " FROM {cells}) AS t"), params


def quoted(name: str) -> str:
    return f'"{name}"'


def _odd_times(con: duckdb.DuckDBPyConnection, table: str, name: str, parse: Callable[[Any], Any]) -> None:
    """The `<name>_odd` texts of `table` parsed in Python, once per distinct text, into `name`."""
    odd = [text for (text,) in con.sql(f'SELECT DISTINCT "{name}_odd" FROM {table} '
                                       f'WHERE "{name}_odd" IS NOT NULL').fetchall()]
    if odd:
        values = pa.table({"text": pa.array(odd, pa.string()),
                           "time": pa.array([parse(text) for text in odd], pa.timestamp("us"))})
        with_values(con, table, f'UPDATE {{table}} SET "{name}" = v.time FROM {{values}} AS v '
                                f'WHERE {{table}}."{name}_odd" = v.text', values)


def _elapsed(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """An ended job without an End ends its Elapsed after its Start (sacct leaves End unset
    for some): parsed once per distinct Elapsed of such rows."""
    wanting = f'"End" IS NULL AND "Start" IS NOT NULL AND state IN ({", ".join(map(repr, sorted(ENDED)))})'
    texts = [text for (text,) in con.sql(f"SELECT DISTINCT elapsed FROM {table} WHERE {wanting} "
                                         "AND elapsed IS NOT NULL").fetchall()]
    seconds = [slurm_duration(text) for text in texts]
    if any(second is not None for second in seconds):
        values = pa.table({"text": pa.array(texts, pa.string()), "seconds": pa.array(seconds, pa.float64())})
        with_values(con, table, f'UPDATE {{table}} SET "End" = "Start" + to_microseconds(CAST(round(v.seconds '
                                f'* 1000000) AS BIGINT)) FROM {{values}} AS v WHERE {{table}}.elapsed = v.text '
                                f'AND v.seconds IS NOT NULL AND {{table}}.{wanting}', values)


def _ends_in_second_pass(con: duckdb.DuckDBPyConnection, table: str, zone: ZoneInfo) -> None:
    """An End before its Start, written without an offset in the hour `zone`'s clocks go through
    twice (turned back): the End's second pass, as the row reader takes it."""
    texts = [text for (text,) in con.sql(f'SELECT DISTINCT "End_odd" FROM {table} '
                                         'WHERE "End" < "Start" AND "End_odd" IS NOT NULL').fetchall()]
    if texts:
        values = pa.table({"odd": pa.array(texts), "time": pa.array(
            [parse_sacct_time(text, zone, "End", fold=1) for text in texts], pa.timestamp("us"))})
        with_values(con, table, 'UPDATE {table} SET "End" = v.time FROM {values} AS v '
                                'WHERE {table}."End_odd" = v.odd AND {table}."End" < {table}."Start"', values)


def _finish(con: duckdb.DuckDBPyConnection, table: str, file: int) -> None:
    """The attempts table in place: the record id, the job as submitted (`7` of array task `7_1`, of het
    component `10+1`), an End before the Start kept as `skewed_end` (the job then holds no GPU
    time), the time columns' names. Updated, not copied: the table may be a million rows."""
    for statement in (
            "ALTER TABLE {t} ADD COLUMN record_id VARCHAR", "ALTER TABLE {t} ADD COLUMN submitted_as VARCHAR",
            "ALTER TABLE {t} ADD COLUMN skewed_end TIMESTAMP", "ALTER TABLE {t} ADD COLUMN _file INTEGER",
            "UPDATE {t} SET record_id = coalesce(cluster, '') || '/' || raw_id || '@' || coalesce(CAST(epoch_us("
            "\"Submit\") // 1000000 AS VARCHAR), '0'), submitted_as = CASE WHEN contains(job_id, '_') OR contains("
            "job_id, '+') THEN regexp_extract(job_id, '^[^_+]*') ELSE job_id END, _file = " + str(int(file)),
            "UPDATE {t} SET skewed_end = \"End\", \"End\" = \"Start\" WHERE \"End\" < \"Start\"",
            "ALTER TABLE {t} RENAME \"Submit\" TO submit_time", "ALTER TABLE {t} RENAME \"Start\" TO start_time",
            "ALTER TABLE {t} RENAME \"End\" TO end_time", "ALTER TABLE {t} DROP COLUMN elapsed",
            *(f"ALTER TABLE {{t}} DROP COLUMN \"{name}_odd\"" for name in TIMES)):
        con.execute(statement.format(t=table)).fetchall()
