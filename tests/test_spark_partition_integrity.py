"""RELIABILITY 36-37 on the Spark engine, cost partitions: one whose footer's row count differs
from the ledger's at the recorded size, or whose footer is gone, is judged as the DuckDB read
judges it; one `verify` found altered stays an error; bytes altered inside a data page (size
and footer intact) are traced to the file Spark read. Each is `attribute --engine spark`
exiting 3 with DuckDB's own message, naming the file and the command that writes it again."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from spark_support import require_pyspark

from service.attribution.rollup_versions import ROLLUP_TABLE
from service.attribution.spark.session import spark_session
from service.cli.main import cli
from service.core.config import EngineConfig
from service.core.lake import Lake
from service.core.parquet_footer import NUM_ROWS, TAIL, _Compact, parse_footer
from tests.test_lake_derived_files import unseen_by_its_stat
from tests.test_lake_integrity import ingested_sample

pytestmark = pytest.mark.slow  # a Spark JVM per module, seconds per query

ATTRIBUTE = ["attribute", "--since", "2024-01-01", "--until", "2025-01-01", "--format", "json"]


def rows_altered(data: bytes) -> bytes:
    """A Parquet file's bytes with its footer's row count (FileMetaData field 3, a zigzag varint)
    one less: the same size, every page as it was."""
    footer = len(data) - TAIL - int.from_bytes(data[-TAIL:-TAIL + 4], "little")
    reader = _Compact(data[footer:-TAIL])
    for field, kind in reader.fields():
        if field == NUM_ROWS:
            break
        reader.skip(kind)
    at = footer + reader.at
    rows = reader.integer()
    old, new = _varint(2 * rows), _varint(2 * (rows - 1))
    assert len(old) == len(new) and data[at:at + len(old)] == old
    altered = data[:at] + new + data[at + len(new):]
    assert parse_footer(altered[footer:-TAIL]).rows == rows - 1
    return altered


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def page_flipped(data: bytes, column: str) -> bytes:
    """A Parquet file's bytes with 40 bytes flipped at the start of `column`'s first data page (a
    column attribution reads; its header and the head of its compressed values): the size and
    the footer intact, the page no longer decodes."""
    group = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    [chunk] = [group.column(i) for i in range(group.num_columns) if group.column(i).path_in_schema == column]
    at = chunk.data_page_offset
    return data[:at] + bytes(b ^ 0x5A for b in data[at:at + 40]) + data[at + 40:]


@pytest.fixture(scope="module")
def trey(tmp_path_factory):
    """The Trey Research FOCUS sample ingested (its rollup stored): the config file, the lake."""
    require_pyspark()
    root = tmp_path_factory.mktemp("spark-partitions")
    config = ingested_sample(root, "trey", "spendlake.yaml", "export")
    spark_session(EngineConfig(kind="spark", master="local[2]"))  # the one CliRunner's commands reuse
    return config, Lake(root / "lake")


@pytest.fixture
def lake(trey):
    """The module's lake, put back as it was (files, rollups, what `verify` recorded) after each test."""
    config, lake = trey
    kept = lake.root.parent / "kept"
    shutil.copytree(lake.root, kept)
    yield config, lake
    shutil.rmtree(lake.root)
    kept.rename(lake.root)


def spendlake(config: Path, *args: str):
    return CliRunner().invoke(cli, ["--config", str(config), *args])


def partition(lake: Lake) -> Path:
    return lake.root / "costs" / "source=trey" / "billing_period=2024-06" / "data.parquet"


def assert_both_exit_3_alike(config: Path, file: Path, says: str, command: str = "spendlake ingest --source trey"):
    duckdb, spark = spendlake(config, *ATTRIBUTE), spendlake(config, *ATTRIBUTE, "--engine", "spark")
    assert duckdb.exit_code == 3 and spark.exit_code == 3, (duckdb.output, spark.output)
    assert spark.output == duckdb.output, (duckdb.output, spark.output)
    assert f"error: {file}: " in spark.output and says in spark.output, spark.output
    assert command in spark.output and "Traceback" not in spark.output


def test_36_a_partition_whose_footer_row_count_differs_from_the_ledger_exits_3_on_spark_as_on_duckdb(lake):
    config, lake = lake
    file = partition(lake)
    file.write_bytes(rows_altered(file.read_bytes()))  # the recorded size: only the footer read tells
    assert_both_exit_3_alike(config, file, "is altered (999 rows, the ledger says 1,000)")


def test_36_a_partition_of_its_recorded_size_without_its_footer_exits_3_on_spark_as_on_duckdb(lake):
    config, lake = lake
    file = partition(lake)
    data = file.read_bytes()
    file.write_bytes(data[:-TAIL] + bytes(TAIL))
    assert_both_exit_3_alike(config, file, "is truncated (no readable Parquet footer)")


def test_37_a_partition_verify_found_altered_exits_3_on_spark_as_on_duckdb(lake):
    config, lake = lake
    file = partition(lake)
    times = file.stat()
    file.write_bytes(page_flipped(file.read_bytes(), "BilledCost"))
    os.utime(file, ns=(times.st_atime_ns, times.st_mtime_ns))  # bit rot keeps the time: only verify's hash tells
    assert spendlake(config, "verify").exit_code == 3
    assert_both_exit_3_alike(config, file, "found by `spendlake verify`")


def assert_both_exit_3_naming(config: Path, file: Path, spark_says: str, command: str) -> None:
    """Both engines exit 3 naming `file`; the reasons are each reader's own (DuckDB's decoder
    names the file itself; Spark's failure is traced to it)."""
    duckdb, spark = spendlake(config, *ATTRIBUTE), spendlake(config, *ATTRIBUTE, "--engine", "spark")
    assert duckdb.exit_code == 3 and spark.exit_code == 3, (duckdb.output, spark.output)
    for output in (duckdb.output, spark.output):
        assert f"error: {file}: " in output and "Traceback" not in output, output
    assert spark_says in spark.output and command in spark.output, spark.output


def test_37_bytes_altered_in_a_data_page_of_a_partition_are_traced_to_it_on_spark(lake):
    config, lake = lake
    shutil.rmtree(lake.table_dir(ROLLUP_TABLE))  # the period rolled up from the raw lines
    file = partition(lake)
    file.write_bytes(page_flipped(file.read_bytes(), "BilledCost"))
    assert_both_exit_3_naming(config, file, "is altered (its SHA-256 differs from the one recorded at commit)",
                              "run `spendlake ingest --source trey` to restore it")


def test_37_bytes_altered_in_a_data_page_of_a_stored_rollup_are_traced_to_it_on_spark(lake):
    config, lake = lake
    [file] = lake.table_dir(ROLLUP_TABLE).rglob("*.parquet")
    file.write_bytes(page_flipped(file.read_bytes(), "cp_end"))
    unseen_by_its_stat(lake, file)  # else DuckDB's read re-hashes it (its stat changed) and rolls up the raw lines
    assert_both_exit_3_naming(config, file, "this lake file cannot be read, it is damaged (",
                              "delete it and run `spendlake rollup`, which writes it again")


def test_a_verify_state_of_the_wrong_shape_is_named_on_spark_as_on_duckdb(lake):
    """The Spark lake read `_state/verify.json` without its shape: a problem edited to
    {"source": 1} was a KeyError traceback there, where the DuckDB read named the key."""
    config, lake = lake
    state = lake.root / "_state" / "verify.json"
    state.write_text('{"problems": [{"source": 1}]}')
    for engine in ([], ["--engine", "spark"]):
        result = spendlake(config, *ATTRIBUTE, *engine)
        assert result.exit_code == 3, (engine, result.output)
        assert f"{state}: state file is unreadable: problems[0].source: must be text" in result.output, result.output


def test_a_period_spark_rolls_up_from_its_raw_lines_is_said_once_as_on_duckdb(lake, monkeypatch):
    from service.attribution import rollup_told

    config, lake = lake
    shutil.rmtree(lake.table_dir(ROLLUP_TABLE))  # the periods rolled up from the raw lines
    monkeypatch.setattr(rollup_told, "NOTE_LINES", 1)  # as a 10M-line month is
    duckdb, spark = spendlake(config, *ATTRIBUTE), spendlake(config, *ATTRIBUTE, "--engine", "spark")
    assert duckdb.exit_code == 0 and spark.exit_code == 0, (duckdb.output, spark.output)
    notes = [line for line in spark.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and notes == [line for line in duckdb.stderr.splitlines() if line.startswith("note: ")]
    assert "have no stored rollup for this config" in notes[0] and notes[0].endswith("`spendlake rollup` stores them")
