"""An export saved again by a spreadsheet or pandas with its costs cut to fewer significant digits
(Excel's General format, `float_format='%.12g'`) beside the original (break54 F3): the row print
compared costs exactly, so the save was no copy and the period summed twice, `--strict` included
(Microsoft's FOCUS sample: 2,000 rows, USD 387.62 for 193.81). Now its rows pair up with the
original's with each cost rounded to the save's digits (service.core.row_prints LEVELS)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from billing_helpers import failures
from layout_exports import duckdb_sums, lake_sums

from tests.conftest import SAMPLES
from tests.test_copies_in_other_bytes import skipped
from tests.test_copies_in_other_rows import same_content
from tests.test_delivery_layout import lines, run

MICROSOFT = SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv"
FOCUS = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"


def cut(path: Path, to: Path, digits: str, change: tuple[int, float] | None = None) -> None:
    """The rows saved by pandas with its floats written in `digits` (`%.12g`); `change`: that row's
    BilledCost multiplied by that factor first."""
    rows = pd.read_csv(path, low_memory=False)
    if change is not None:
        rows.loc[change[0], "BilledCost"] *= change[1]
    to.parent.mkdir(parents=True, exist_ok=True)
    rows.to_csv(to, index=False, float_format=digits)


def export_of(tmp_path: Path, sample: Path) -> tuple[Path, Path]:
    export = tmp_path / "export"
    export.mkdir()
    first = export / "orig.csv"
    first.write_bytes(sample.read_bytes())
    return export, first


@pytest.mark.parametrize("sample", [MICROSOFT, FOCUS], ids=["microsoft", "focus"])
@pytest.mark.parametrize("digits", ["%.12g", "%.10g"])
def test_a_save_with_costs_cut_to_fewer_digits_is_a_copy(tmp_path, sample, digits):
    export, first = export_of(tmp_path, sample)
    once = duckdb_sums("focus", export)
    copy = export / "resaved.csv"
    cut(first, copy, digits)
    for _ in range(2):  # the second run reads nothing and says the copy again
        lake, result = run(tmp_path, "focus", export)
        assert failures(result) == [], lines(result)
        assert skipped(result) == [same_content(copy, first)], lines(result)
        assert lake_sums(lake) == once  # was twice: 2,000 rows, USD 387.615378097825 for Microsoft's


def test_a_save_with_one_cost_changed_beyond_its_digits_is_no_copy(tmp_path):
    """The save's digits carry a cost of row 5 other than the original's: both files count."""
    export, first = export_of(tmp_path, MICROSOFT)
    cut(first, export / "resaved.csv", "%.10g", change=(5, 1.000001))
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and skipped(result) == [], lines(result)
    assert lake_sums(lake) == duckdb_sums("focus", export)


def test_two_files_of_every_digit_differing_at_the_eleventh_are_no_copy(tmp_path):
    """Rounded to 10 digits their rows are the same, but neither was cut to 10: no save of the other."""
    export, first = export_of(tmp_path, MICROSOFT)
    cut(first, export / "other.csv", "%.17g", change=(5, 1 + 1e-11))
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and skipped(result) == [], lines(result)
    assert lake_sums(lake) == duckdb_sums("focus", export)
