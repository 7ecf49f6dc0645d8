"""A `sacct --parsable2` file read column-wise (connectors/sacct_files.py tries it first): the
file read whole by pyarrow's CSV reader ('|'-separated, no quoting, as sacct writes), texts
trimmed and times parsed in DuckDB, and what a month repeats (states, AllocTRES, node lists)
parsed once per distinct value by the row reader's own functions (connectors/slurm_records.py).

Whatever it cannot take exactly as the row reader would answers None, and the caller reads the
file again line by line, which names the line and what is wrong: a line pyarrow splits
otherwise (a bare CR in a comment, a '|' too many), bytes that are not UTF-8, a last line cut
short, a state, node list or time that does not parse.
"""

from __future__ import annotations

import gzip
import uuid
from typing import IO, Any
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa

from connectors.hostlist import hosts
from connectors.jobs_base import normal_state
from connectors.jobs_file_columns import (CLOCK, STRIP_PARAMS, TIME_PARAMS, NotColumnWise, odd_times, per_value,
                                         strip_sql, time_sql)
from connectors.slurm_records import (ATTEMPTS, ENDED, NO_TIME, REQUIRED, BadRecord, alloc_tres_gpus,
                                      parse_sacct_time, slurm_duration)

OPTIONAL = ("JobName", "Cluster", "Partition", "Account", "User", "QOS", "WCKey", "Comment", "Elapsed")
TIMES = {"Submit": "submit_time", "Start": "start_time", "End": "end_time"}


class _Tail:
    """A binary stream read through, keeping its last block: was the last line ended?"""

    def __init__(self, stream: IO[bytes]):
        self.stream, self.last, self.closed, self.position = stream, b"", False, 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        if data:
            self.last, self.position = data, self.position + len(data)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.position

    def close(self) -> None:
        self.closed = True

    def ended(self) -> bool:
        """sacct ends every line with LF: text after the last one was cut short."""
        if b"\n" not in self.last:
            return not self.last.strip()
        return not self.last.rsplit(b"\n", 1)[1].strip()


def parsable_table(con: duckdb.DuckDBPyConnection, raw: IO[bytes], gzipped: bool, header: list[str], zone: ZoneInfo,
                   default_cluster: str | None, file: int) -> pa.Table | None:
    """The allocations (steps left out) of the parsable2 file open as `raw` whose header line is
    `header`, as connectors/slurm_records.py's ATTEMPTS; None when the row reader must read it."""
    if len(set(header)) != len(header) or any(name not in header for name in REQUIRED):
        return None
    cells = _cells(raw, gzipped, header, [name for name in (*REQUIRED, *OPTIONAL) if name in header])
    if cells is None:
        return None
    try:
        return _attempts(con, cells, zone, default_cluster, file)
    except (NotColumnWise, BadRecord, ValueError):
        return None


def _cells(raw: IO[bytes], gzipped: bool, header: list[str], wanted: list[str]) -> pa.Table | None:
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    names = [f"f{index}" for index in range(len(header))]
    stream = _Tail(gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw)
    try:
        table = pcsv.read_csv(
            stream, read_options=pcsv.ReadOptions(autogenerate_column_names=True),  # the header is row 0
            parse_options=pcsv.ParseOptions(delimiter="|", quote_char=False, escape_char=False, double_quote=False),
            convert_options=pcsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                include_columns=[names[header.index(name)] for name in wanted], strings_can_be_null=False))
    except (pa.ArrowException, OSError, EOFError, ValueError):  # the row reader says what is wrong
        return None
    if not stream.ended() or not table.num_rows or [
            table.column(names[header.index(name)])[0].as_py() for name in wanted] != wanted:
        return None
    cells = pa.table({name: table.column(names[header.index(name)]).slice(1) for name in wanted})
    return cells.filter(pc.invert(pc.match_substring(cells.column("JobIDRaw"), ".")))  # steps are not jobs


def _attempts(con: duckdb.DuckDBPyConnection, cells: pa.Table, zone: ZoneInfo, default_cluster: str | None,
              file: int) -> pa.Table:
    def state(text: str) -> str:
        found = normal_state(text)
        if found is None:
            raise NotColumnWise(text)
        return found

    columns: dict[str, Any] = {name: cells.column(name) for name in cells.column_names}
    columns["State"] = per_value(cells.column("State"), state, pa.string())
    columns["AllocTRES"] = per_value(cells.column("AllocTRES"), alloc_tres_gpus, pa.float64())
    columns["NodeList"] = per_value(cells.column("NodeList"), lambda text: list(hosts(text)) or None,
                                    pa.list_(pa.string()))
    columns["_row"] = pa.array(range(cells.num_rows), pa.int64())

    present = set(cells.column_names)

    def text(name: str) -> str:  # a text column sacct may leave out, stripped; NULL when empty
        return f"nullif({strip_sql(quoted(name))}, '')" if name in present else "CAST(NULL AS VARCHAR)"

    stripped = ['"JobIDRaw"', '"JobID"', '"State"', '"AllocTRES"', '"NodeList"',
                *(f'{strip_sql(quoted(name))} AS {quoted(name)}' for name in TIMES),
                *(f"{text(name)} AS {quoted(name)}" for name in ("Cluster", "User", "Account", "Partition", "QOS",
                                                                  "JobName")),
                "ltrim(\"WCKey\", '*') AS \"WCKey\"" if "WCKey" in present else "'' AS \"WCKey\"",
                f"{strip_sql(quoted('Comment'))} AS \"Comment\"" if "Comment" in present else "'' AS \"Comment\"",
                '"Elapsed"' if "Elapsed" in present else 'CAST(NULL AS VARCHAR) AS "Elapsed"', "_row"]
    utc = zone.key == "UTC"
    times = [part for name in TIMES for part in time_sql(name, f"list_contains($no_time, {quoted(name)})", utc)]
    params = {**STRIP_PARAMS, **TIME_PARAMS, "no_time": sorted(NO_TIME), "cluster": default_cluster,
              **({"clock": CLOCK} if utc else {})}
    table = _query(con, pa.table(columns), (
        f'SELECT {strip_sql(quoted("JobIDRaw"))} AS raw_id, {strip_sql(quoted("JobID"))} AS job_id, '
        'coalesce("Cluster", $cluster) AS cluster, "State" AS state, "AllocTRES" AS gpus, "NodeList" AS nodes, '
        + ", ".join(times) + ', "User" AS "user", "Account" AS account, "Partition" AS "partition", "QOS" AS qos, '
        '"JobName" AS name, "WCKey" AS wckey, "Comment" AS comment, "Elapsed" AS elapsed, _row FROM (SELECT '
        + ", ".join(stripped) + " FROM {}) AS t"), params)
    del columns
    for name, ours in TIMES.items():
        table = odd_times(table, name, lambda value, name=name: parse_sacct_time(value, zone, name))
        table = table.rename_columns([ours if column == name else column for column in table.column_names])
    return _finished(con, _elapsed(table), file)


def quoted(name: str) -> str:
    return f'"{name}"'


def _query(con: duckdb.DuckDBPyConnection, table: pa.Table, sql: str, params: dict[str, Any]) -> pa.Table:
    """`sql` (its table `{}`) over `table`, with bound `params`, answered whole."""
    view = f"sacct_cells_{uuid.uuid4().hex}"
    con.register(view, table)
    try:
        return con.sql(sql.format(view), params=params).to_arrow_table()
    finally:
        con.unregister(view)


def _elapsed(table: pa.Table) -> pa.Table:
    """An ended job without an End ends its Elapsed after its Start (sacct leaves End unset
    for some): parsed once per distinct Elapsed of such rows."""
    import pyarrow.compute as pc

    need = pc.and_(pc.and_(pc.is_null(table.column("end_time")), pc.is_valid(table.column("start_time"))),
                   pc.is_in(table.column("state"), pa.array(sorted(ENDED))))
    elapsed = table.column("elapsed")
    table = table.drop_columns(["elapsed"])
    if not pc.any(need).as_py():
        return table
    seconds = per_value(pc.if_else(need, elapsed, pa.scalar(None, pa.string())), slurm_duration, pa.float64(),
                        nulls=False)
    took = pc.cast(pc.round(pc.multiply(seconds, 1_000_000)), pa.int64()).cast(pa.duration("us"))
    ended = pc.if_else(pc.and_(need, pc.is_valid(seconds)), pc.add(table.column("start_time"), took),
                       table.column("end_time"))
    return table.set_column(table.column_names.index("end_time"), "end_time", ended)


def _finished(con: duckdb.DuckDBPyConnection, table: pa.Table, file: int) -> pa.Table:
    """The record id, the job as submitted (`7` of array task `7_1`, of het component `10+1`),
    an End before the Start kept as `skewed_end` (the job then holds no GPU time)."""
    return _query(con, table, (
        "SELECT coalesce(cluster, '') || '/' || raw_id || '@' || coalesce(CAST(epoch_us(submit_time) // 1000000 "
        "AS VARCHAR), '0') AS record_id, raw_id, job_id, CASE WHEN contains(job_id, '_') OR contains(job_id, '+') "
        "THEN regexp_extract(job_id, '^[^_+]*') ELSE job_id END AS submitted_as, cluster, state, submit_time, "
        "start_time, CASE WHEN end_time < start_time THEN start_time ELSE end_time END AS end_time, "
        "CASE WHEN end_time < start_time THEN end_time END AS skewed_end, gpus, nodes, \"user\", account, partition, "
        "qos, name, comment, wckey, CAST($file AS INTEGER) AS _file, _row FROM {}"), {"file": file}).cast(ATTEMPTS)
