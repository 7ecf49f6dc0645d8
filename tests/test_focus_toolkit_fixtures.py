"""The focus-data-toolkit fixtures (tests/data/focus-toolkit) prove themselves: the reference
sums are what DuckDB computes from the committed files, every bundle is byte for byte what the
toolkit wrote (its own SHA256SUMS), and converting to FOCUS 1.4 moved no money."""

from __future__ import annotations

import csv
import hashlib
import os
from pathlib import Path

import duckdb
import pytest

TOOLKIT = Path(__file__).parent / "data" / "focus-toolkit"

# 1.4 cost files and the generated file each was converted from.
CONVERTED_FROM = {
    "convert/aws-1.3-synthetic-csv/synthetic_focus_1_4_cost_and_usage.csv": "generate/aws-1.3/focus_1_3_cost_and_usage_aws.csv.gz",
    "convert/aws-1.3-strict-parquet/focus_1_4_cost_and_usage.parquet": "generate/aws-1.3/focus_1_3_cost_and_usage_aws.csv.gz",
    "convert/azure-1.3-synthetic-parquet/synthetic_focus_1_4_cost_and_usage.parquet": "generate/azure-1.3/focus_1_3_cost_and_usage_azure.csv.gz",
    "convert/gcp-1.2-synthetic-parquet-hive/synthetic_focus_1_4_cost_and_usage": "generate/gcp-1.2/focus_1_2_cost_and_usage_gcp.csv.gz",
    "convert/azure-1.2-strict-parquet-hive/focus_1_4_cost_and_usage": "generate/azure-1.2/focus_1_2_cost_and_usage_azure.csv.gz",
    "duckdb/aws-1.2-hive-subaccount": "generate/aws-1.2/focus_1_2_cost_and_usage_aws.csv.gz",
}


def reference() -> list[dict[str, str]]:
    with (TOOLKIT / "reference_sums.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def test_reference_sums_are_what_duckdb_computes(monkeypatch):
    monkeypatch.chdir(TOOLKIT)
    relation = duckdb.sql((TOOLKIT / "reference_sums.sql").read_text())
    columns = relation.columns
    computed = [{name: "" if value is None else str(value) for name, value in zip(columns, row)}
                for row in relation.fetchall()]
    assert computed == reference()
    assert {row["dataset"] for row in computed} == {"CostAndUsage", "ContractCommitment", "BillingPeriod",
                                                    "InvoiceDetail"}


@pytest.mark.parametrize("bundle", sorted(p.name for p in (TOOLKIT / "convert").iterdir()))
def test_each_bundle_is_what_the_toolkit_wrote(bundle):
    folder = TOOLKIT / "convert" / bundle
    listed = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        listed[name] = digest
    on_disk = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert on_disk == set(listed) | {"SHA256SUMS", "_run.json"}
    for name, digest in listed.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize("converted", sorted(CONVERTED_FROM))
def test_conversion_keeps_every_row_and_cent(converted):
    rows = {(row["file"], row["billing_period_start"], row["currency"]): row for row in reference()
            if row["dataset"] == "CostAndUsage"}
    mine = {key[1:]: row for key, row in rows.items() if key[0] == converted}
    source = {key[1:]: row for key, row in rows.items() if key[0] == CONVERTED_FROM[converted]}
    assert mine and mine.keys() == source.keys()
    for key in mine:
        for measure in ("n_rows", "billed", "effective", "list", "contracted"):
            assert mine[key][measure] == source[key][measure], (key, measure)


def test_fixtures_stay_small():
    size = sum(os.path.getsize(p) for p in TOOLKIT.rglob("*") if p.is_file())
    assert size < 1024 * 1024
