"""A loose Parquet file's billing periods come from its footer statistics when they settle
them (one month, no nulls), so ingest reads its rows once, not twice; otherwise the rows
are read for them as before."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from billing_helpers import failures
from layout_exports import focus, lake_sums

from connectors.file_facts import parquet_periods
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest import survey
from service.ingest.billing import ingest


def write(path: Path, values: list, kind: pa.DataType, column: str = "BillingPeriodStart") -> Path:
    pq.write_table(pa.table({column: pa.array(values, kind), "BilledCost": [1] * len(values)}), path,
                   row_group_size=2)
    return path


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


@pytest.mark.parametrize(("values", "kind", "want"), [
    ([utc(2024, 5, 1)] * 3, pa.timestamp("us", "UTC"), ["2024-05"]),
    ([utc(2024, 5, 1), utc(2024, 5, 31, 23)], pa.timestamp("ms", "UTC"), ["2024-05"]),
    ([datetime(2024, 5, 1)] * 2, pa.timestamp("us"), ["2024-05"]),  # naive: read as UTC
    ([date(2024, 5, 1)] * 3, pa.date32(), ["2024-05"]),
    # 2024-05-31 22:30 at -02:00 is June in UTC, the month the rows read as
    ([datetime(2024, 5, 31, 22, 30, tzinfo=timezone(timedelta(hours=-2)))] * 2, pa.timestamp("us", "UTC"), ["2024-06"]),
    ([utc(2024, 5, 1), utc(2024, 6, 1)], pa.timestamp("us", "UTC"), None),  # two months: read the rows
    ([utc(2024, 5, 1), utc(2024, 5, 1), utc(2024, 7, 1)], pa.timestamp("us", "UTC"), None),  # in two row groups
    ([utc(2024, 5, 1), None], pa.timestamp("us", "UTC"), None),  # a null: the rows say which line fails
    (["2024-05-01"] * 2, pa.string(), None),  # text: parsed by the read
    ([], pa.timestamp("us", "UTC"), None),  # no rows
])
def test_parquet_periods_from_the_footer(tmp_path, values, kind, want):
    assert parquet_periods(write(tmp_path / "f.parquet", values, kind), "billingperiodstart") == want


def test_parquet_periods_without_the_column_or_not_parquet(tmp_path):
    assert parquet_periods(write(tmp_path / "f.parquet", [utc(2024, 5, 1)], pa.timestamp("us", "UTC"), "Other"),
                           "BillingPeriodStart") is None
    (tmp_path / "g.parquet").write_bytes(b"not parquet at all")
    assert parquet_periods(tmp_path / "g.parquet", "BillingPeriodStart") is None


def test_a_focus_parquet_folder_is_planned_from_footers_without_reading_rows(tmp_path, monkeypatch):
    export = tmp_path / "export"
    for name, rows in {"SubAccountId=1/a.parquet": [("2024-05", "USD", "1.25"), ("2024-05", "USD", "2")],
                       "SubAccountId=2/b.parquet": [("2024-05", "EUR", "0.5")],
                       "c.parquet": [("2024-06", "USD", "3")]}.items():
        (export / name).parent.mkdir(parents=True, exist_ok=True)
        focus(export / name, rows)

    def no_read(parts, uri):
        raise AssertionError(f"{uri} was read for its periods")

    monkeypatch.setattr(survey, "_read_periods", no_read)
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "src", "kind": "focus", "location": str(export)}]})
    result = ingest(config)
    assert failures(result) == []
    assert lake_sums(Lake(config.lake)) == {("2024-05", "USD"): Decimal("3.25"), ("2024-05", "EUR"): Decimal("0.5"),
                                            ("2024-06", "USD"): Decimal("3")}


def test_a_parquet_file_of_two_months_is_still_read_for_its_periods(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    focus(export / "a.parquet", [("2024-05", "USD", "1"), ("2024-06", "USD", "2")])
    focus(export / "b.parquet", [("2024-06", "USD", "4")])
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "src", "kind": "focus", "location": str(export)}]})
    result = ingest(config)
    assert failures(result) == []
    assert lake_sums(Lake(config.lake)) == {("2024-05", "USD"): Decimal("1"), ("2024-06", "USD"): Decimal("6")}
