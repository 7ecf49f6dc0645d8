"""Copies of a file among the files one delivery reads whole, where no loose-file copy check ran
(cells53): every oci-cost report file is one delivery, and so was every file of an aws-cur Athena
month without its period manifest. A plain copy beside the original (a browser's second download,
`… (1).csv`; a `cp`) doubled the bill, exit 0, `attribute --check` ok. Now the copy is skipped in
one line naming its original, and `attribute --check` totals the source's rows once."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tracemalloc
from decimal import Decimal
from pathlib import Path

import duckdb
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from conftest import DATA

from connectors.oci_cost import OciCostConnector
from service.cli.main import cli
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.status import copies_skipped
from tests.test_aws_cur import line, write_athena_month

ORACLE = DATA / "oci-oracle" / "reports" / "cost-csv" / "0000000030000269.csv"


def ingest_and_check(tmp_path: Path, kind: str, location: Path) -> tuple[str, dict[str, Decimal]]:
    """`ingest`'s output, and `attribute --check`'s billed source total per period (each ok)."""
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"),
                                      "sources": [{"name": "src", "kind": kind, "location": str(location)}]}))
    runner = CliRunner()
    ingested = runner.invoke(cli, ["--config", str(config), "ingest"])
    assert ingested.exit_code == 0, ingested.output
    checked = runner.invoke(cli, ["--config", str(config), "attribute", "--check", "--format", "json"])
    assert checked.exit_code == 0, checked.output
    rows = json.loads(checked.stdout)
    assert all(row["ok"] for row in rows), rows
    return ingested.output, {row["billing_period"]: Decimal(row["source_total"]) for row in rows
                             if row["cost"] == "billed"}


def read_once(tmp_path: Path, kind: str, location: Path, copy: Path, first: Path, same: str) -> dict[str, Decimal]:
    """Ingest twice (the second run reads nothing new), each run saying the copy skipped; the second's
    `attribute --check` billed totals."""
    for _ in range(2):
        output, totals = ingest_and_check(tmp_path, kind, location)
        assert f"src {copy}: skipped, the same {same} as {first} (a copy: its rows are read once)" in output, output
    assert "unchanged" in output
    return totals


def copied_later(original: Path, name: str) -> Path:
    """A byte copy of `original` beside it, written after it."""
    copy = original.with_name(name)
    shutil.copyfile(original, copy)
    return copy


def gunzipped(original: Path, name: str) -> Path:
    """`gzip -dk` of the report: its text beside it, in other bytes and size, of the report's time (gzip
    gives the file it unzips the time of the gzip), under a shorter name."""
    copy = original.with_name(name)
    copy.write_bytes(gzip.decompress(original.read_bytes()))
    written = original.stat()
    os.utime(copy, ns=(written.st_atime_ns, written.st_mtime_ns))
    return copy


def saved_by_pandas(original: Path, name: str) -> Path:
    """The report as pandas saves it (break53b B8): a cost's 18th decimal rewritten by its float
    (`0.012264277499950943` → `…942`), `False` as `false`, `2.323760000E-9` as `2.32376e-09`."""
    copy = original.with_name(name)
    pd.read_csv(original).to_csv(copy, index=False)
    return copy


@pytest.mark.parametrize("name, make, copy_name, same", [
    ("0000000030000269.csv", copied_later, "0000000030000269 (1).csv", "bytes"),
    ("0000000030000269.csv.gz", gunzipped, "0000000030000269.csv", "content"),
    ("0000000030000269.csv", saved_by_pandas, "0000000030000269-copy.csv", "content")])
def test_an_oci_report_downloaded_twice_unzipped_or_saved_again_beside_is_read_once(tmp_path, name, make, copy_name,
                                                                                     same):
    """On main: 42 rows, USD 0.240568718112 for Oracle's 21 rows of 0.120284359056 (the pandas save
    after cells53 too, exit 0, no word: its bytes and text are another's, its rows what they bill)."""
    folder = tmp_path / "bucket" / "reports" / "cost-csv"
    folder.mkdir(parents=True)
    first = folder / name
    first.write_bytes(gzip.compress(ORACLE.read_bytes()) if name.endswith(".gz") else ORACLE.read_bytes())
    copy = make(first, copy_name)
    assert read_once(tmp_path, "oci-cost", tmp_path / "bucket", copy, first, same) == {
        "2023-11": Decimal("0.120284359056")}
    assert Lake(tmp_path / "lake").query().execute("SELECT count(*) FROM costs").fetchone() == (21,)
    [note] = copies_skipped(Lake(tmp_path / "lake"))
    assert f"{copy}, the same as {first}" in note.text


def test_the_oci_copy_check_reads_a_report_beside_its_unzipped_text_a_chunk_at_a_time(tmp_path):
    """review54 item 3: each compared file was held whole, decompressed whole and split in lines just
    to list the deliveries (1.36 GB RSS for a 417 MB report beside its `gzip -dk`); now each is read
    through a MiB at a time, the rows after the header told from its first bytes."""
    folder = tmp_path / "bucket" / "reports" / "cost-csv"
    folder.mkdir(parents=True)
    header, rows = ORACLE.read_bytes().split(b"\n", 1)
    text = header + b"\n" + rows * (24_000_000 // len(rows))
    report = folder / "0000000030000269.csv.gz"
    report.write_bytes(gzip.compress(text, compresslevel=1))
    copy = gunzipped(report, "0000000030000269.csv")
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "src", "kind": "oci-cost", "location": str(tmp_path / "bucket")}]})
    connector = OciCostConnector(config.sources[0])
    tracemalloc.start()
    try:
        [delivery] = connector.deliveries()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(text) / 3, f"{peak:,} bytes held to compare two files of {len(text):,} bytes of text"
    assert delivery.files == (str(report),) and str(copy) in connector.copies


def rewritten(original: Path, name: str) -> Path:
    """The rows written again, in other bytes (another compression), beside the original."""
    copy = original.with_name(name)
    duckdb.execute(f"COPY (SELECT * FROM read_parquet('{original}')) TO '{copy}' (FORMAT parquet, COMPRESSION zstd)")
    return copy


@pytest.mark.parametrize("make, same", [(copied_later, "bytes"), (rewritten, "content")])
def test_a_copy_in_an_athena_month_without_its_manifest_is_read_once(tmp_path, make, same):
    """On main the month's files were one delivery: USD 13.00 for the 6.50 AWS billed."""
    write_athena_month(tmp_path, [line("2026-09", "1.25"), line("2026-09", "2", kind="Tax"), line("2026-09", "3.25")])
    first = tmp_path / "cur" / "report" / "report" / "year=2026" / "month=9" / "report-00001.snappy.parquet"
    copy = make(first, "report-00001 (copy).snappy.parquet")
    assert read_once(tmp_path, "aws-cur", tmp_path / "cur", copy, first, same) == {"2026-09": Decimal("6.50")}


def test_oci_reports_of_a_header_alone_are_no_copies(tmp_path):
    """Two six-hour reports of no usage hold the same bytes, a header, and nothing twice: no line says a copy."""
    folder = tmp_path / "bucket" / "reports" / "cost-csv"
    folder.mkdir(parents=True)
    shutil.copyfile(ORACLE, folder / ORACLE.name)
    header = ORACLE.read_text(encoding="utf-8").splitlines(keepends=True)[0]
    for number in ("0000000030000270", "0000000030000271"):
        (folder / f"{number}.csv").write_text(header, encoding="utf-8")
    output, totals = ingest_and_check(tmp_path, "oci-cost", tmp_path / "bucket")
    assert "skipped" not in output and totals == {"2023-11": Decimal("0.120284359056")}, output


def test_an_oci_report_of_the_same_sums_billing_other_resources_is_no_copy(tmp_path):
    """The rows compared are what they bill: a second report of the same count and cost sums whose two
    lines' resources are swapped is another bill, both counted (USD 0.240568718112, twice 0.120284359056)."""
    folder = tmp_path / "bucket" / "reports" / "cost-csv"
    folder.mkdir(parents=True)
    shutil.copyfile(ORACLE, folder / ORACLE.name)
    rows = pd.read_csv(ORACLE, dtype=str, keep_default_na=False)
    rows.loc[[0, 1], "product/resourceId"] = rows.loc[[1, 0], "product/resourceId"].to_list()
    rows.to_csv(folder / "0000000030000270.csv", index=False)
    output, totals = ingest_and_check(tmp_path, "oci-cost", tmp_path / "bucket")
    assert "skipped" not in output and totals == {"2023-11": Decimal("0.240568718112")}, output


def test_an_oci_copy_found_by_its_rows_stays_skipped_when_the_next_report_arrives(tmp_path):
    """The copy remembered is taken out of the delivery the next report changes: the month is the two
    reports, the copy still told, never summed (USD 0.120284359056 + the new report's 1.5)."""
    folder = tmp_path / "bucket" / "reports" / "cost-csv"
    folder.mkdir(parents=True)
    first = folder / ORACLE.name
    shutil.copyfile(ORACLE, first)
    copy = saved_by_pandas(first, "0000000030000269-copy.csv")
    ingest_and_check(tmp_path, "oci-cost", tmp_path / "bucket")
    rows = pd.read_csv(ORACLE, dtype=str, keep_default_na=False).head(1)
    rows["lineItem/referenceNo"], rows["cost/myCost"] = "new-line", "1.5"
    rows.to_csv(folder / "0000000030000270.csv", index=False)
    output, totals = ingest_and_check(tmp_path, "oci-cost", tmp_path / "bucket")
    assert f"src {copy}: skipped, the same content as {first}" in output, output
    assert totals == {"2023-11": Decimal("1.620284359056")}, output
