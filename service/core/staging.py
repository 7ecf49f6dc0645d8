"""Staging one cost delivery: the rows go to Parquet files under a staging directory, one
per billing period, before the lake moves them into place (service.core.lake)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import duckdb

from service.core.errors import DataError

PERIOD_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
DATA_FILE = "data.parquet"


def stage_periods(con: duckdb.DuckDBPyConnection, view: str, stage: Path,
                  periods: Sequence[str] | None) -> dict[str, Path]:
    """Write the rows of `view` under `stage`; return billing period → staged file.

    A delivery of one declared period (a manifest's) becomes one plain file: a partitioned
    COPY under the writer's memory limit buffers and spills, and takes twice the CPU. Its
    periods are then read back from the file, so a row of another period is caught the same.
    """
    if periods is not None and len(periods) == 1:
        target = stage / f"billing_period={periods[0]}" / DATA_FILE
        target.parent.mkdir(parents=True)
        con.execute(f"COPY (SELECT * FROM {view}) TO '{target}' (FORMAT parquet, COMPRESSION zstd)")
        found = [p for (p,) in con.execute(
            "SELECT DISTINCT strftime(BillingPeriodStart, '%Y-%m') FROM read_parquet(?)", [str(target)]).fetchall()]
        for value in found:
            _check_period(value)
        return {p: target for p in [periods[0], *found]}
    con.execute(
        f"COPY (SELECT *, strftime(BillingPeriodStart, '%Y-%m') AS billing_period FROM {view}) "
        f"TO '{stage}' (FORMAT parquet, PARTITION_BY (billing_period), COMPRESSION zstd, WRITE_PARTITION_COLUMNS false)"
    )
    staged: dict[str, Path] = {}
    for part_dir in sorted(stage.glob("billing_period=*")):
        period = _check_period(part_dir.name.split("=", 1)[1])
        files = sorted(part_dir.glob("*.parquet"))
        if len(files) != 1:  # DuckDB writes one file per partition unless told otherwise
            raise DataError(f"expected one staged file for {period}, found {len(files)}")
        staged[period] = files[0]
    return staged


def _check_period(value: str | None) -> str:
    if value is None or not PERIOD_RE.match(value):
        raise DataError(f"rows with an invalid or missing BillingPeriodStart ({value!r})",
                        hint="every cost row needs a billing period")
    return value
