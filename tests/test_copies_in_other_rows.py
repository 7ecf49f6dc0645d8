"""A copy of an export in other bytes than any copy check reads (break52): the same rows saved again
with every field quoted (a spreadsheet's or pandas' save), or a Parquet conversion of the CSV beside
it, were summed twice, exit 0, `--check` ok (a legacy CUR's bare CSV files too: cells53). Each file of a delivery of several loose files is
fingerprinted by its rows (service.core.row_prints): one holding another's periods and rows is a
copy of it, skipped with a byte copy's line and `status` record (service.ingest.row_copies)."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from billing_helpers import failures
from layout_exports import duckdb_sums, lake_sums

from service.core.lake import Lake
from service.ingest.status import copies_skipped
from tests.test_copies_in_other_bytes import skipped
from tests.test_delivery_layout import lines, run
from tests.conftest import SAMPLES
from tests.test_ingest_hardening import FOCUS


LEGACY = SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv"


def original(export: Path) -> Path:
    (export / "2024-09").mkdir(parents=True)
    path = export / "2024-09" / "cost.csv"
    path.write_bytes(FOCUS.read_bytes())
    return path


def requoted(path: Path, to: Path, change: str | None = None) -> None:
    """The rows saved again with every field quoted; `change`: line 2's BilledCost made that."""
    rows = list(csv.reader(path.open(encoding="utf-8-sig")))
    if change is not None:
        rows[1][rows[0].index("BilledCost")] = change
    to.parent.mkdir(parents=True, exist_ok=True)
    with to.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, quoting=csv.QUOTE_ALL).writerows(rows)


def converted(path: Path, to: Path) -> None:
    """A Parquet conversion of the CSV, its types as DuckDB guesses them."""
    to.parent.mkdir(parents=True, exist_ok=True)
    duckdb.execute(f"COPY (SELECT * FROM read_csv('{path}', nullstr=['', 'NULL'])) TO '{to}' (FORMAT parquet)")


def same_content(copy: Path, first: Path) -> str:
    return f"src {copy}: skipped, the same content as {first} (a copy: its rows are read once)"


@pytest.mark.parametrize("make, name", [(requoted, "2024-09 (copy)/cost.csv"), (converted, "converted/cost.parquet")])
def test_the_same_rows_in_other_bytes_are_read_once(tmp_path, make, name):
    export = tmp_path / "export"
    first = original(export)
    once = duckdb_sums("focus", export)
    make(first, export / name)
    for _ in range(2):  # the second run reads nothing and says the copy again
        lake, result = run(tmp_path, "focus", export)
        assert failures(result) == [], lines(result)
        assert lake_sums(lake) == once  # was twice: USD 40.560453457980 for September
        assert skipped(result) == [same_content(export / name, first)], lines(result)
    assert "unchanged" in lines(result)[-1]
    [note] = copies_skipped(lake)
    assert f"{export / name}, the same as {first}" in note.text


def test_rows_differing_in_one_value_are_no_copy(tmp_path):
    export = tmp_path / "export"
    first = original(export)
    requoted(first, export / "2024-09 (copy)" / "cost.csv", change="99")
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and skipped(result) == [], lines(result)
    assert lake_sums(lake) == duckdb_sums("focus", export)  # both files' rows, as they differ


def test_a_copy_of_an_original_corrected_since_stays_skipped_and_counts_once_the_original_is_gone(tmp_path):
    export = tmp_path / "export"
    first = original(export)
    copy = export / "2024-09 (copy)" / "cost.csv"
    requoted(first, copy)
    run(tmp_path, "focus", export)
    requoted(FOCUS, first, change="99")  # the exporter's correction
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [], lines(result)
    assert skipped(result) == [], lines(result)  # a stale copy is said in a line of its own
    stale = f"src {copy}: skipped, a stale copy of {first}"
    assert any(line.startswith(stale) for line in lines(result)), lines(result)
    assert lake_sums(lake) == duckdb_sums("focus", first.parent)
    first.unlink()
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and lake_sums(lake) == duckdb_sums("focus", copy.parent), lines(result)


def test_a_copy_added_after_its_original_was_ingested_leaves_the_period_as_it_was(tmp_path):
    export = tmp_path / "export"
    first = original(export)
    lake, result = run(tmp_path, "focus", export)
    ledger = lake.ledger()
    converted(first, export / "converted" / "cost.parquet")
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and skipped(result) == [same_content(export / "converted" / "cost.parquet", first)]
    assert {o.status for o in result.outcomes} == {"skipped", "unchanged"}, lines(result)
    assert lake.ledger() == ledger and lake_sums(lake) == duckdb_sums("focus", first.parent)


@pytest.mark.parametrize("later", [False, True])
def test_a_bare_legacy_cur_saved_again_with_every_field_quoted_is_read_once(tmp_path, later):
    """aws-cur read its bare files two at a time (parts_are_files False), so no file's rows were
    fingerprinted: the sample beside its quoted copy committed 2,562 rows, USD 3.364617394800, exit 0,
    `--check` ok. `later`: the copy added once its original was ingested (a period of a ledger entry)."""
    export = tmp_path / "export"
    export.mkdir()
    first = export / "cur.csv"
    first.write_bytes(LEGACY.read_bytes())
    if later:
        run(tmp_path, "aws-cur", export)
    requoted(first, export / "backup" / "cur.csv")
    for _ in range(2):  # the second run reads nothing and says the copy again
        lake, result = run(tmp_path, "aws-cur", export)
        assert failures(result) == [], lines(result)
        assert skipped(result) == [same_content(export / "backup" / "cur.csv", first)], lines(result)
        assert lake.query().execute("SELECT count(*), sum(BilledCost) FROM costs").fetchall() == [
            (1281, Decimal("1.682308697400"))]
    [note] = copies_skipped(lake)
    assert f"{export / 'backup' / 'cur.csv'}, the same as {first}" in note.text


def pandas_saved(path: Path, to: Path) -> None:
    """The rows as pandas saves them by default: its float text (`25.200000000000004` →
    `…003`), NA text (`N/A`, `None` → empty) and whole numbers of a column with empty cells (`…440.0`)."""
    to.parent.mkdir(parents=True, exist_ok=True)
    rows = pd.read_csv(path)
    rows.to_parquet(to) if to.suffix == ".parquet" else rows.to_csv(to, index=False)


@pytest.mark.parametrize("kind, sample, name", [
    ("focus", SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv", "resaved.csv"),
    ("focus", SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv", "converted.parquet"),
    ("aws-cur", LEGACY, "resaved.csv")])
def test_an_export_saved_again_by_pandas_is_read_once(tmp_path, kind, sample, name):
    """break53b B1: the 17-digit float quantities of Microsoft's FOCUS sample differed in their last
    digit, so the re-save was no copy: 2000 rows, USD 387.615378097828 for 193.807689048914, exit 0;
    the legacy CUR's 2,562 rows, USD 3.364617394800 for 1.682308697400."""
    export = tmp_path / "export"
    export.mkdir()
    first = export / f"export{sample.suffix}"
    first.write_bytes(sample.read_bytes())
    once = duckdb_sums(kind, export)
    pandas_saved(first, export / name)
    lake, result = run(tmp_path, kind, export)
    assert failures(result) == [], lines(result)
    assert skipped(result) == [same_content(export / name, first)], lines(result)
    assert lake_sums(lake) == once


def test_rows_of_the_same_count_and_sums_billing_other_resources_are_no_copy(tmp_path):
    """The exact print compares what the rows bill: two lines' resources swapped (a file of the same
    periods, count and cost sums, its dollars on other resources) is another bill, both read."""
    export = tmp_path / "export"
    first = original(export)
    rows = list(csv.reader(first.open(encoding="utf-8-sig")))
    column = rows[0].index("ResourceId")
    rows[1][column], rows[2][column] = rows[2][column], rows[1][column]
    (export / "other").mkdir()
    with (export / "other" / "cost.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and skipped(result) == [], lines(result)
    assert lake_sums(lake) == duckdb_sums("focus", export)


def test_a_pandas_save_of_an_account_id_read_as_a_number_is_still_a_copy(tmp_path):
    """pandas reads an AWS account id `012345678901` as a number and writes `12345678901`."""
    export = tmp_path / "export"
    first = original(export)
    rows = list(csv.reader(first.open(encoding="utf-8-sig")))
    column = rows[0].index("SubAccountId")
    for row in rows[1:]:
        row[column] = "012345678901"
    with first.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    pandas_saved(first, export / "resaved.csv")
    assert "012345678901" not in (export / "resaved.csv").read_text()  # its leading zero dropped
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [], lines(result)
    assert skipped(result) == [same_content(export / "resaved.csv", first)], lines(result)
    assert lake_sums(lake) == duckdb_sums("focus", first.parent)


def test_a_pandas_save_in_another_folder_of_a_file_under_a_hive_key_it_holds_itself_is_still_a_copy(tmp_path):
    """The Hive keys' columns are printed for every file compared: a FOCUS file with its own ServiceName
    under ServiceName=x/ (its column wins over the folder) and its pandas save under backup/ bill the
    same rows: one copy, read once."""
    export = tmp_path / "export"
    first = export / "ServiceName=x" / "cost.csv"
    first.parent.mkdir(parents=True)
    first.write_bytes(FOCUS.read_bytes())
    pandas_saved(first, export / "backup" / "cost.csv")
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [], lines(result)
    assert skipped(result) == [same_content(export / "backup" / "cost.csv", first)], lines(result)
    assert lake_sums(lake) == duckdb_sums("focus", first.parent)
