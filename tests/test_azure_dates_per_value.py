"""An Azure cost details CSV's dates are parsed by the stager once per distinct text
(connectors/azure_dates.py, service.core.per_value), as a FOCUS CSV's times are: the lake holds
exactly the periods the per-line SQL gives (every spelling Azure writes, padding, a billing period
left blank on lines not yet invoiced, so billed in the day's month), and a bad date in a later
batch fails the delivery naming the file, the column and the value."""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

import service.core.staging as staging
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import ingest
from tests.test_times_per_value import converted_texts, per_line

DAYS = ["09/02/2023", "9/3/2023", "2023-09-04T00:00:00.0000000Z", " 09/05/2023 ", "2023-09-06"]
PERIOD_STARTS = ["09/01/2023", "", "   ", "9/1/2023"]  # blank: MCA's line not yet invoiced
PERIOD_ENDS = ["09/30/2023", "", "2023-09-30"]


def azure_export(folder: Path, rows: int, extra: list[list[str]] = ()) -> Path:
    folder.mkdir(parents=True)
    with open(folder / "costs.csv", "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["BillingPeriodStartDate", "BillingPeriodEndDate", "Date", "Cost", "BillingCurrency",
                         "ChargeType"])
        writer.writerows([[PERIOD_STARTS[n % 4], PERIOD_ENDS[n % 3], DAYS[n % 5], n, "USD", "Usage"]
                          for n in range(rows)])
        writer.writerows(extra)
    return folder


def lake_rows(lake: Path) -> list[tuple]:
    files = [str(p) for p in lake.glob("costs/**/data.parquet")]
    return sorted(duckdb.connect().execute(
        "SELECT BilledCost, BillingPeriodStart, BillingPeriodEnd, ChargePeriodStart, ChargePeriodEnd "
        "FROM read_parquet(?, hive_partitioning = false)", [files]).fetchall())


def test_azure_dates_parsed_once_per_distinct_text_equal_the_per_line_parse(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "BATCH_ROWS", 300)  # many batches, each with repeats
    export = azure_export(tmp_path / "export", 3_000)
    converted = converted_texts(monkeypatch)
    [outcome] = ingest(azure_config(tmp_path / "lake", export)).outcomes
    assert outcome.error is None, outcome.error
    # each billing period text once (its own date marked P, or the day marked D where it is blank), each day once
    starts = {f"P{p}" for p in PERIOD_STARTS if p.strip()} | {f"D{d}" for d in DAYS}
    ends = {f"P{p}" for p in PERIOD_ENDS if p.strip()} | {f"D{d}" for d in DAYS}
    assert converted == {"BillingPeriodStart": len(starts), "BillingPeriodEnd": len(ends),
                         "ChargePeriodStart": len(DAYS), "ChargePeriodEnd": len(DAYS)}
    kept = lake_rows(tmp_path / "lake")
    assert {row[1:3] for row in kept} == {(datetime(2023, 9, 1), datetime(2023, 10, 1))}
    assert {row[3] for row in kept} == {datetime(2023, 9, day) for day in range(2, 7)}
    per_line(monkeypatch)
    [outcome] = ingest(azure_config(tmp_path / "lake-per-line", export)).outcomes
    assert outcome.error is None and kept == lake_rows(tmp_path / "lake-per-line")


def azure_config(lake: Path, location: Path):
    return parse_config({"lake": str(lake), "sources": [{"name": "bill", "kind": "azure-cost",
                                                         "location": str(location)}]})


@pytest.mark.parametrize("bad, column", [(["09/01/2023", "09/30/2023", "13/40/2023", "1", "USD", "Usage"], "Date"),
                                         (["Sept 1st", "09/30/2023", "09/02/2023", "1", "USD", "Usage"],
                                          "BillingPeriodStartDate")])
def test_a_bad_date_in_a_later_batch_fails_naming_file_column_and_value(tmp_path, monkeypatch, bad, column):
    monkeypatch.setattr(staging, "BATCH_ROWS", 300)
    export = azure_export(tmp_path / "export", 1_000, [bad])
    cfg = azure_config(tmp_path / "lake", export)
    [outcome] = ingest(cfg).outcomes
    message = str(outcome.error)
    value = bad[2] if column == "Date" else bad[0]
    assert f"column {column}: not a date (%m/%d/%Y, or ISO 8601): {value}" in message, message
    assert str(export / "costs.csv") in message and "line 1002" in message, message
    assert Lake(cfg.lake).ledger() == []
