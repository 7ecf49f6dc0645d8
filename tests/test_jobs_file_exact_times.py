"""jobs-file reads Parquet numeric times exactly: DECIMAL epoch seconds keep their milliseconds
(a float would round 1796032800.123 to .12299990654), integer epoch milliseconds too, column-wise
and row by row alike."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.test_jobs_file import jobs, run
from tests.test_jobs_file_traces import files_read_row_wise, row_wise

STARTS = [datetime(2026, 11, 30, 10, 0, 0, 123000), datetime(2026, 11, 30, 11, 0, 0, 999000)]
ENDS = [datetime(2026, 11, 30, 12, 0, 0, 1000), None]


@pytest.mark.parametrize("reader", ["column-wise", "row-wise"])
@pytest.mark.parametrize("time_format, kind, starts, ends", [
    ("seconds", pa.decimal128(18, 3), [Decimal("1796032800.123"), Decimal("1796036400.999")],
     [Decimal("1796040000.001"), None]),
    ("seconds", pa.decimal128(20, 6), [Decimal("1796032800.123000"), Decimal("1796036400.999000")],
     [Decimal("1796040000.001000"), None]),
    ("seconds", pa.decimal128(24, 9), [Decimal("1796032800.123000000"), Decimal("1796036400.999000000")],
     [Decimal("1796040000.001000000"), None]),
    ("milliseconds", pa.int64(), [1796032800123, 1796036400999], [1796040000001, None]),
    ("milliseconds", pa.decimal128(16, 0), [Decimal(1796032800123), Decimal(1796036400999)],
     [Decimal(1796040000001), None]),
])
def test_decimal_and_integer_epoch_times_in_parquet_are_read_to_the_millisecond(tmp_path, monkeypatch, reader,
                                                                                 time_format, kind, starts, ends):
    pq.write_table(pa.table({"job_id": ["a", "b"], "gpus": [8, 2], "start_time": pa.array(starts, kind),
                             "end_time": pa.array(ends, kind)}), tmp_path / "jobs.parquet")
    read_row_wise = files_read_row_wise(monkeypatch)
    if reader == "row-wise":
        row_wise(monkeypatch)
    outcome = run(tmp_path, tmp_path / "jobs.parquet", time_format=time_format)
    assert outcome.error is None, outcome.error
    assert jobs(tmp_path, "job_id, start_time, end_time") == [("a", STARTS[0], ENDS[0]), ("b", STARTS[1], ENDS[1])]
    assert len(read_row_wise) == (reader == "row-wise")  # column-wise: no file left to the row reader


def test_decimal_times_a_microsecond_holds_are_counted_in_sql(tmp_path, monkeypatch):
    """Each distinct time in Python costs ~6 CPU s per 1M rows (bench/README.md): a DECIMAL with no
    more decimals than a microsecond holds is counted in SQL; a finer one (nanoseconds) is
    Python's, which rounds half to even as the row reader does."""
    import connectors.jobs_file as jobs_file

    parsed: list = []
    count_time = jobs_file.parse_count_time
    monkeypatch.setattr(jobs_file, "parse_count_time", lambda value, *args: parsed.append(value) or count_time(
        value, *args))
    pq.write_table(pa.table({"job_id": ["a"], "gpus": [8], "start_time": pa.array([Decimal("1796032800.123")],
                                                                                  pa.decimal128(18, 3)),
                             "end_time": pa.array([Decimal("1796040000.0000005")], pa.decimal128(20, 7))}),
                   tmp_path / "jobs.parquet")
    assert run(tmp_path, tmp_path / "jobs.parquet", time_format="seconds").error is None
    assert parsed == [Decimal("1796040000.0000005")]
    assert jobs(tmp_path, "start_time, end_time") == [(STARTS[0], datetime(2026, 11, 30, 12))]
