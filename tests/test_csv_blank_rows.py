"""A spreadsheet's save of an export can end in rows with fields but no values (`,,,,`, rows it
once formatted): they are no charge, so the export commits as without them, where they failed
the file as 'rows with an invalid or missing BillingPeriodStart (None)'."""

from __future__ import annotations

import csv

import pytest
from billing_helpers import failures, ingest_files, sums
from conftest import SAMPLES


@pytest.mark.parametrize("sample, kind", [
    ("azure/ea_actual_trey_research_small.csv", "azure-cost"),
    ("focus/focus_1.0_sample_1000.csv", "focus"),
])
def test_trailing_blank_rows_of_a_spreadsheet_save_are_left_out(tmp_path, sample, kind):
    text = (SAMPLES / sample).read_text(encoding="utf-8-sig")
    columns = len(next(csv.reader([text.splitlines()[0]])))
    saved = tmp_path / "saved" / "export.csv"
    saved.parent.mkdir()
    saved.write_text(text.replace("\n", "\r\n") + ("," * (columns - 1) + "\r\n") * 3, encoding="utf-8-sig",
                     newline="")
    plain, _ = ingest_files(tmp_path / "plain", ("s", kind, SAMPLES / sample))
    lake, result = ingest_files(tmp_path / "spreadsheet", ("s", kind, saved.parent))
    assert failures(result) == []
    assert sums(lake) == sums(plain)
