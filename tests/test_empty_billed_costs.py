"""An emptied billed-cost cell of an AWS (legacy CUR, CUR 2.0), Google, Azure or OCI billing export
fails its file naming the column and, in a CSV file, the line, exit 3, and the other sources commit,
as FOCUS's empty BilledCost does (connectors/empty_costs.py). It was read as nothing billed and no
effective cost, exit 0, `attribute --check` ok: the line's dollars were gone from every total
without a word (cells53: the legacy CUR sample with line 925's lineItem/UnblendedCost, 0.16641,
emptied committed USD 1.515898697400 for the sample's 1.682308697400; the Azure sample's line 4,
USD 8.544996647742 for 8.545007786742; Oracle's report's line 6, 0.119573627873 for 0.120284359055).
AWS documents only BlendedCost blank (Discount lines), Google gives every row its `cost`, Azure and
Oracle every line its cost (their FOCUS exports' BilledCost); no sample holds an empty one."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from tests.aws_exports import cur2_table, line, local_put, to_bytes, write_cur2
from tests.conftest import DATA, SAMPLES
from tests.test_ingest_hardening import invoke

LEGACY = SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv"
GCP = SAMPLES / "gcp" / "koku_gcp_standard_export_202011.csv"
FOCUS = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"
NDJSON = DATA / "gcp" / "detailed_export_2024-05.jsonl"
AZURE = SAMPLES / "azure" / "ea_actual_trey_research_small.csv"
OCI = DATA / "oci-oracle" / "reports" / "cost-csv" / "0000000030000269.csv"
REFUSED = " — re-export the file, or fill in the cost the bill has for that line"


def emptied(source: Path, to: Path, column: str, row: int) -> None:
    """`source` (CSV) written to `to` with `row`'s (1: the first after the header) `column` empty."""
    rows = list(csv.reader(source.open(encoding="utf-8-sig")))
    rows[row][rows[0].index(column)] = ""
    to.parent.mkdir(parents=True, exist_ok=True)
    with to.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


def beside_focus(tmp_path: Path, kind: str, location: Path) -> Path:
    """A config reading `location` as `kind` and, as a second source, the FOCUS sample."""
    config = tmp_path / "spendlake.yaml"
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "bill", "kind": kind, "location": str(location)},
        {"name": "focus", "kind": "focus", "location": str(FOCUS)}]}))
    return config


def failed_alone(config: Path, said: str) -> str:
    """Ingest fails the one source saying `said`, exit 3, and commits the FOCUS source."""
    result = invoke(config, "ingest")
    assert result.exit_code == 3, result.output
    assert said + REFUSED in result.output, result.output
    assert "bill" not in " ".join(line for line in result.output.splitlines() if "committed" in line), result.output
    assert "focus 2024-09: committed 999 rows" in result.output, result.output
    return result.output


@pytest.mark.parametrize("kind, sample, column, row, said", [
    ("aws-cur", LEGACY, "lineItem/UnblendedCost", 924, "the Cost and Usage Report gives every line an amount"),
    ("gcp-billing", GCP, "cost", 1, "the Cloud Billing export gives every row an amount"),
    ("azure-cost", AZURE, "Cost", 3, "Cost Management's cost details give every line an amount"),
    ("oci-cost", OCI, "cost/myCost", 5, "Oracle's cost report gives every line an amount")])
def test_an_emptied_billed_cost_of_a_sample_fails_its_file_naming_line_and_column(tmp_path, kind, sample, column, row,
                                                                                   said):
    export = tmp_path / "export" / sample.name
    emptied(sample, export, column, row)
    failed_alone(beside_focus(tmp_path, kind, export.parent),
                 f"{export}: could not read the delivery: line {row + 1}, column {column}: empty, where {said}")


@pytest.mark.parametrize("fmt, said", [("csv.gz", "line 3, column line_item_unblended_cost"),
                                       ("parquet", "column line_item_unblended_cost")])
def test_an_empty_unblended_cost_of_cur_2_fails_its_file(tmp_path, fmt, said):
    con = duckdb.connect()
    rows = [line(cost="2.5"), line(cost=""), line(cost="4")]
    [uri] = write_cur2(local_put(tmp_path / "export"), prefix="", export="cur2", period="2026-10", execution="e1",
                       fmt=fmt, parts=[to_bytes(con, cur2_table(con, rows), tmp_path, fmt)])
    part = str(tmp_path / "export" / uri.split("/", 3)[3])
    failed_alone(beside_focus(tmp_path, "aws-cur2", tmp_path / "export"),
                 f"{part}: could not read the delivery: {said}: empty, where the Cost and Usage Report gives every "
                 "line an amount")


def test_a_null_gcp_cost_in_json_lines_fails_its_file_naming_the_column(tmp_path):
    export = tmp_path / "export" / "gcp.jsonl"
    export.parent.mkdir()
    rows = [json.loads(text) for text in NDJSON.read_text().splitlines()]
    rows[0]["cost"] = None
    export.write_text("".join(json.dumps(row) + "\n" for row in rows))
    failed_alone(beside_focus(tmp_path, "gcp-billing", export.parent),
                 f"{export}: could not read the delivery: column cost: empty, where the Cloud Billing export gives "
                 "every row an amount")


def test_an_empty_cost_in_the_second_file_of_a_focus_run_is_told_at_that_file_and_line(tmp_path):
    """Two CSV files of one header are one read (folder_export.same_schema_runs): the error named
    the second file inside the message of both, and no line."""
    rows = list(csv.reader(FOCUS.open(encoding="utf-8-sig")))
    export = tmp_path / "export"
    export.mkdir()
    for name, part in (("a.csv", rows[:500]), ("b.csv", [rows[0], *rows[500:]])):
        with (export / name).open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows(part)
    emptied(export / "b.csv", export / "b.csv", "BilledCost", 10)
    config = tmp_path / "spendlake.yaml"
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "focus", "kind": "focus", "location": str(export)}]}))
    result = invoke(config, "ingest")
    assert result.exit_code == 3, result.output
    assert f"FAILED: {export / 'b.csv'}: could not read the delivery: line 11, column BilledCost: empty, where FOCUS " \
           "requires an amount (a cost MUST NOT be null)" + REFUSED in result.output, result.output


def test_blank_costs_aws_leaves_blank_and_a_gzip_legacy_cur_still_commit(tmp_path):
    """The guard: only the billed cost must be there. A Usage line's empty reservation and Savings
    Plans columns (as in the legacy sample: all 1281 lines) and an empty public cost commit."""
    export = tmp_path / "export"
    export.mkdir()
    with gzip.open(export / "cur.csv.gz", "wb") as out, LEGACY.open("rb") as sample:
        shutil.copyfileobj(sample, out)
    con = duckdb.connect()
    write_cur2(local_put(tmp_path / "cur2"), prefix="", export="cur2", period="2026-10", execution="e1", fmt="parquet",
               parts=[to_bytes(con, cur2_table(con, [line(cost="3", pricing__publicOnDemandCost="")]), tmp_path,
                               "parquet")])
    config = tmp_path / "spendlake.yaml"
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "cur", "kind": "aws-cur", "location": str(export)},
        {"name": "cur2", "kind": "aws-cur2", "location": str(tmp_path / "cur2")}]}))
    result = invoke(config, "ingest")
    assert result.exit_code == 0, result.output
    assert "cur 2023-11: committed 1281 rows USD 1.682308697400" in result.output, result.output
    assert "cur2 2026-10: committed 1 rows USD 3.000000000000" in result.output, result.output
    assert Decimal("1.682308697400") == Decimal(next(r for r in csv.DictReader((SAMPLES / "reference_sums.csv").open())
                                                     if r["file"].startswith("aws/"))["billed"])
