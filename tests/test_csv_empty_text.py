"""An empty text cell is NULL in the lake, whether a CSV leaves the field empty or quotes it
("") and whether a Parquet file holds it as an empty string. The CSV reader already reads an
empty field as NULL, so its text columns are not compared to '' again (bench/README.md)."""

from __future__ import annotations

from pathlib import Path

import duckdb
from billing_helpers import failures, ingest_files

from connectors.exportfile import open_table, text

HEADER = ("BilledCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd,ServiceName,RegionId,"
          "ResourceId,ChargeCategory,InvoiceId")
ROWS = ('1.00,USD,2024-06-01T00:00:00Z,2024-06-02T00:00:00Z,2024-06-03T00:00:00Z,"",,"",,""',
        '2.00,USD,2024-06-01T00:00:00Z,2024-06-03T00:00:00Z,2024-06-04T00:00:00Z,,"",,"",',
        '4.00,USD,2024-06-01T00:00:00Z,2024-06-04T00:00:00Z,2024-06-05T00:00:00Z," ",eu,i-1,usage,INV-1')
TEXTS = "ServiceName, RegionId, ResourceId, ChargeCategory, InvoiceId"


def test_an_empty_cell_quoted_or_not_is_null_in_every_text_column_of_a_focus_csv_and_parquet(tmp_path):
    csv = tmp_path / "csv" / "focus.csv"
    csv.parent.mkdir()
    csv.write_text("\n".join((HEADER, *ROWS)) + "\n")
    parquet = tmp_path / "parquet" / "focus.parquet"
    parquet.parent.mkdir()
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{csv}', all_varchar = true, nullstr = 'NULL')) TO '{parquet}'")
    assert duckdb.sql(f"SELECT count(*) FROM '{parquet}' WHERE ServiceName = ''").fetchall() == [(2,)]  # '' kept
    for kind in ("csv", "parquet"):
        lake, result = ingest_files(tmp_path / f"lake-{kind}", ("focus", "focus", tmp_path / kind))
        assert failures(result) == []
        rows = lake.query().execute(f"SELECT BilledCost, {TEXTS} FROM costs ORDER BY BilledCost").fetchall()
        assert [row[1:] for row in rows] == [(None,) * 5, (None,) * 5, (" ", "eu", "i-1", "Usage", "INV-1")], kind


def test_a_csv_field_is_taken_as_the_reader_gives_it_and_a_parquet_text_is_compared_to_empty(tmp_path):
    csv = tmp_path / "focus.csv"
    csv.write_text("\n".join((HEADER, *ROWS)) + "\n")
    parquet = tmp_path / "focus.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{csv}', all_varchar = true)) TO '{parquet}'")
    con = duckdb.connect()
    for path, read_blank_as_null in ((csv, True), (parquet, False)):
        table = open_table(con, Path(path), str(path))
        assert text(table, "ServiceName") == ('CAST("ServiceName" AS VARCHAR)' if read_blank_as_null
                                              else "nullif(CAST(\"ServiceName\" AS VARCHAR), '')"), path
    # a CSV read without '' among its null strings keeps the comparison
    assert text(open_table(con, csv, str(csv), nullstr=("NULL",)), "ServiceName").startswith("nullif(")
