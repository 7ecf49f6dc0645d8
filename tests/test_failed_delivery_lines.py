"""A failed delivery of many files says which file failed in a line a person can read
(RELIABILITY 40): an export partitioned by hour holds hundreds of files, and the FAILED line
listed every one of them before the error that names the one at fault."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from service.core.config import parse_config
from service.core.files import files_named
from service.ingest.billing import ingest

HOURS = 40


def hour_file(path: Path, hour: int, cost: str) -> None:
    path.parent.mkdir(parents=True)
    start = datetime(2024, 5, 1 + hour // 24, hour % 24, tzinfo=timezone.utc)
    pq.write_table(pa.table({
        "BilledCost": [cost], "BillingCurrency": ["USD"],
        "BillingPeriodStart": pa.array([datetime(2024, 5, 1, tzinfo=timezone.utc)], pa.timestamp("us", "UTC")),
        "ChargePeriodStart": pa.array([start], pa.timestamp("us", "UTC")),
    }), path)


def test_40_a_failed_delivery_of_many_files_names_the_bad_one_and_counts_the_rest(tmp_path):
    export = tmp_path / "export"
    for hour in range(HOURS):
        hour_file(export / f"hour={hour:03d}" / "part-0.parquet", hour, "oops" if hour == 17 else "1.25")
    result = ingest(parse_config({"lake": str(tmp_path / "lake"),
                                  "sources": [{"name": "hourly", "kind": "focus", "location": str(export)}]}))
    [line] = [line for outcome in result.failed for line in outcome.lines()]
    bad = export / "hour=017" / "part-0.parquet"
    assert f"{bad}: column BilledCost: not a number: oops" in line
    assert f"and {HOURS - 5} more files" in line
    assert line.count("part-0.parquet") <= 6, line  # five listed, and the one at fault


def test_a_few_files_are_each_named():
    assert files_named(["a", "b"], "location") == "a, b"
    assert files_named([], "location") == "location"
    assert files_named([str(n) for n in range(1200)], "x") == "0, 1, 2, 3, 4 and 1,195 more files"
