"""A DuckDB result streamed as Arrow batches (`next_batch`), and the memory its query took
(`query_memory`), as the lake's writers read them."""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa


def next_batch(reader: pa.RecordBatchReader) -> pa.RecordBatch | None:
    """The next batch, or None at the end. DuckDB's errors while streaming (a bad value,
    out of memory) arrive through Arrow as OSError: raised again as what they are, so
    they are not taken for a failed write (to the lake, or of an export's file)."""
    try:
        return reader.read_next_batch()
    except StopIteration:
        return None
    except (OSError, pa.ArrowException) as exc:
        raise duckdb.Error(str(exc)) from None


def query_memory(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(peak buffer memory, bytes spilled to the temp directory) of the connection's last
    query, when it is profiled (Lake.writer); else (0, 0)."""
    try:
        system = json.loads(con.get_profiling_information(format="json")).get("system", {})
    except (duckdb.Error, ValueError):
        return 0, 0
    return int(system.get("peak_buffer_memory", 0)), int(system.get("total_bytes_spilled", 0))
