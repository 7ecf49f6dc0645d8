"""bench/ingest_bench.py's bare copy writes the file the lake writes (issue 13 item 6): the lake's
compression and row groups and, on a FOCUS CSV, its exact types where DuckDB's sniffer reads
others; `--bare defaults` keeps the copy of earlier sessions (bench/README.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import ingest_bench  # noqa: E402

HEADER = '"BilledCost","BillingAccountId","ChargePeriodStart","ConsumedQuantity","Tags"\n'
LINES = ['"0.100000000001","210987654321","2026-10-02T17:00:00.000Z",0.0000000000000014,"{""team"":""a""}"\n',
         '"0.2","210987654321","2026-10-02T18:00:00.000Z",3,""\n']


def bare_copy(tmp_path: Path, form: str) -> pq.ParquetFile:
    export = tmp_path / "export.csv"
    export.write_text(HEADER + "".join(LINES))
    types = ingest_bench.lake_types(ingest_bench.LAYOUTS["focus-csv"], [str(export)]) if form == "lake" else {}
    out = tmp_path / f"{form}.parquet"
    subprocess.run([sys.executable, "-c", ingest_bench.BARE_COPY, str(out), form, json.dumps(types), str(export)],
                   check=True, capture_output=True)
    return pq.ParquetFile(out)


def test_the_bare_copy_of_a_focus_csv_writes_the_lakes_exact_types_and_compression(tmp_path):
    written = bare_copy(tmp_path, "lake")
    schema = written.schema_arrow
    assert (str(schema.field("BilledCost").type), str(schema.field("ConsumedQuantity").type),
            str(schema.field("BillingAccountId").type), str(schema.field("Tags").type)) == (
        "decimal128(38, 12)", "decimal128(38, 16)", "string", "string")
    rows = written.read().to_pylist()
    assert [r["BilledCost"] for r in rows] == [Decimal("0.100000000001"), Decimal("0.2")]
    assert [r["ConsumedQuantity"] for r in rows] == [Decimal("0.0000000000000014"), Decimal("3")]
    assert {r["BillingAccountId"] for r in rows} == {"210987654321"}
    assert written.metadata.row_group(0).column(0).compression == "ZSTD"


def test_the_bare_copy_with_duckdbs_defaults_is_the_earlier_sessions_sniffed_snappy_copy(tmp_path):
    written = bare_copy(tmp_path, "defaults")
    schema = written.schema_arrow
    assert (str(schema.field("BilledCost").type), str(schema.field("BillingAccountId").type)) == ("double", "int64")
    assert written.metadata.row_group(0).column(0).compression == "SNAPPY"


def test_only_a_focus_csv_is_given_the_lakes_types(tmp_path):
    export = tmp_path / "export.csv"
    export.write_text(HEADER)
    assert ingest_bench.lake_types(ingest_bench.LAYOUTS["focus-csv"], [str(export)]) == {
        "BilledCost": "DECIMAL(38,12)", "BillingAccountId": "VARCHAR", "ConsumedQuantity": "DECIMAL(38,16)"}
    assert ingest_bench.lake_types(ingest_bench.LAYOUTS["cur2-csv.gz"], [str(export)]) == {}
    assert ingest_bench.lake_types(ingest_bench.LAYOUTS["focus-parquet"], [str(export)]) == {}
