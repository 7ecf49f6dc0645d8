"""An empty BilledCost or EffectiveCost cell of a FOCUS file fails the file (break52): it was read
as nothing billed by ingest, status, check and report, while `export` filled it from the other
column (service.export.focus), one bill and two totals. FOCUS says neither MAY be null, and no
export we have writes one (the samples, tests/data and focus-data-toolkit's output hold none):
the file fails naming its line and column, as a `NaN` does, exit 3."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb
import pytest

from tests.test_ingest_hardening import FOCUS, config_file, invoke


def with_empty(to: Path, column: str, value: str = "", row: int = 187) -> None:
    rows = list(csv.reader(FOCUS.open(encoding="utf-8-sig")))
    rows[row][rows[0].index(column)] = value
    with to.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


@pytest.mark.parametrize("column, value", [("BilledCost", ""), ("EffectiveCost", ""), ("BilledCost", "NULL")])
def test_an_empty_cost_cell_fails_its_file_naming_line_and_column(tmp_path, column, value):
    export = tmp_path / "export"
    (export / "2024-09").mkdir(parents=True)
    with_empty(export / "2024-09" / "bill.csv", column, value)
    config = config_file(tmp_path, tmp_path / "lake", export)
    result = invoke(config, "ingest")
    assert result.exit_code == 3, result.output
    assert f"bill.csv: could not read the delivery: line 188, column {column}: empty, where FOCUS requires an " \
           "amount (a cost MUST NOT be null)" in result.output, result.output
    assert "committed" not in result.output


def test_a_null_cost_in_parquet_fails_its_file_and_its_periods(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    with_empty(tmp_path / "bad.csv", "EffectiveCost")
    duckdb.execute(f"COPY (SELECT * FROM read_csv('{tmp_path / 'bad.csv'}', all_varchar=true)) "
                   f"TO '{export / 'bad.parquet'}' (FORMAT parquet)")
    with_empty(export / "good.csv", "BilledCost", "1.14")
    result = invoke(config_file(tmp_path, tmp_path / "lake", export), "ingest")
    assert result.exit_code == 3, result.output
    assert str(export / "bad.parquet") + ": could not read the delivery: column EffectiveCost: empty, where " \
           "FOCUS requires an amount (a cost MUST NOT be null)" in result.output, result.output
    assert "committed" not in result.output  # the good file's periods too: none is committed without one of its files
