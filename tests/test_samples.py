"""Every real sample export ingests with its kind, and its sums equal reference_sums.csv.

reference_sums.csv was computed from the raw files (reference_sums.sql) with DECIMAL(38,12)
on text, per file and provider. An empty cell means the export does not carry that figure:
Azure leaves it NULL (an actual export has no amortized cost, and the reverse); GCP's
EffectiveCost is cost + credits, so it must equal BilledCost + x_credits.
"""

from __future__ import annotations

import csv
from decimal import Decimal

import pytest
from billing_helpers import failures, ingest_files, sums
from conftest import SAMPLES

KIND_BY_FILE = {
    "aws/legacy_cur_csv_anonymous_sample.csv": "aws-cur",
    "focus/focus_1.0_sample_1000.csv": "focus",
    "focus/azure_focus_1.0_trey_research_1000.csv": "focus",
    "gcp/koku_gcp_standard_export_202011.csv": "gcp-billing",
    "gcp/koku_gcp_detailed_export_2022-08-01.csv": "gcp-billing",
    "azure/ea_actual_anonymous_sample.csv": "azure-cost",
    "azure/ea_actual_trey_research_small.csv": "azure-cost",
    "azure/ea_amortized_trey_research_small.csv": "azure-cost",
}
# the legacy CUR sample has 200+ columns and takes seconds to ingest: only the full suite reads it
SAMPLE_CASES = [pytest.param(file, marks=pytest.mark.slow) if file.startswith("aws/legacy_cur") else file
                for file in sorted(KIND_BY_FILE)]


def reference() -> dict[str, list[dict[str, str]]]:
    by_file: dict[str, list[dict[str, str]]] = {}
    with open(SAMPLES / "reference_sums.csv", newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            by_file.setdefault(row["file"], []).append(row)
    return by_file


def test_every_sample_file_has_a_kind_and_reference_sums():
    data_files = sorted(p.relative_to(SAMPLES).as_posix() for p in SAMPLES.rglob("*")
                        if p.is_file() and p.parent != SAMPLES)
    assert data_files == sorted(KIND_BY_FILE) == sorted(reference())


@pytest.mark.parametrize("file", SAMPLE_CASES)
def test_sample_sums_equal_the_reference(tmp_path, file):
    lake, result = ingest_files(tmp_path, ("sample", KIND_BY_FILE[file], SAMPLES / file))
    assert failures(result) == []
    got = {(provider, currency): (rows, billed, effective) for provider, currency, rows, billed, effective in sums(lake)}
    expected = reference()[file]
    assert sorted(got) == sorted((row["provider"], row["cur"]) for row in expected)
    for row in expected:
        rows, billed, effective = got[(row["provider"], row["cur"])]
        assert rows == int(row["n_rows"]), row
        assert billed == (Decimal(row["billed"]) if row["billed"] else None), row
        if row["effective"]:
            assert effective == Decimal(row["effective"]), row
        elif KIND_BY_FILE[file] == "gcp-billing":
            [(credits,)] = lake.query().execute("SELECT sum(x_credits) FROM costs").fetchall()
            assert effective == billed + credits, row
        else:
            assert effective is None, row
