"""A bill the cloud delivers again with other figures for the days it already held (a restatement)
changes the report's figures, and the report says so under the Bills table: when, and from what."""

from __future__ import annotations

import csv
import json
import shutil
from decimal import Decimal

import pytest
from click.testing import CliRunner

from conftest import SAMPLES
from service.cli.main import cli

CUR = SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv"


def spendlake(config_file, *args):
    return CliRunner().invoke(cli, ["--config", str(config_file), *args], catch_exceptions=False)


def ingested_cur(tmp_path):
    """The config of a lake holding the anonymous CUR's November, ingested once."""
    (tmp_path / "export").mkdir()
    shutil.copy(CUR, tmp_path / "export" / "cur.csv")
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: cur, kind: aws-cur, location: '{tmp_path / 'export'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    return config


def bills_table(tmp_path, config, day: str) -> dict:
    assert spendlake(config, "report", "--date", day, "--out", str(tmp_path / "out")).exit_code == 0
    data = json.loads((tmp_path / "out" / day / "report.json").read_text())
    return next(t for s in data["sections"] if s["key"] == "bills" for t in s["tables"] if t["key"] == "bills")


def rewrite(path, change) -> None:
    """The CUR file with `change(header, row)` applied to its first usage line of 13 November; a
    line it returns is added to the file."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    header, start, kind = rows[0], rows[0].index("lineItem/UsageStartDate"), rows[0].index("lineItem/LineItemType")
    row = next(r for r in rows[1:] if r[start].startswith("2023-11-13") and r[kind] == "Usage")
    if (added := change(header, row)) is not None:
        rows.append(added)
    with open(path, "w", newline="") as handle:
        csv.writer(handle).writerows(rows)


def test_a_bill_delivered_again_with_other_figures_for_the_same_days_is_said_restated(tmp_path):
    """The anonymous CUR's November delivered again with a usage line of the 13th USD 1.00 dearer and
    its data still through 14 November 04:00: the report of the 13th went from a USD 1.68 bill to
    2.68 (month to date 1.63 to 2.63) with nothing said; a finance reader who tied yesterday's copy
    to the invoice could not tell the cloud restated the month. A note under the Bills table says it."""
    config = ingested_cur(tmp_path)
    before = bills_table(tmp_path, config, "2023-11-13")
    assert not [n for n in before.get("notes", []) if "restated" in n]
    first = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]["ingested_at"]

    def dearer(header, row):
        cost = header.index("lineItem/UnblendedCost")
        row[cost] = str(Decimal(row[cost]) + 1)
    rewrite(tmp_path / "export" / "cur.csv", dearer)
    assert spendlake(config, "ingest").exit_code == 0
    after = bills_table(tmp_path, config, "2023-11-13")
    assert Decimal(after["rows"][0]["billed_cost"]) == Decimal(before["rows"][0]["billed_cost"]) + 1
    entry = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    assert [n for n in after["notes"] if "restated" in n] == [
        f"Bill 2023-11 / cur / USD restated: delivered again at {entry['ingested_at'][:16].replace('T', ' ')} UTC, "
        f"its data still through 2023-11-14 04:00 UTC, it bills $2.68 where the delivery of "
        f"{first[:16].replace('T', ' ')} UTC billed $1.68 ($1.00 more): the figures above that count its "
        "lines changed with it."]


def a_day_later(header, row) -> list[str]:
    """A usage line of the 15th like `row`, USD 1.00: the month grown by a day."""
    later = list(row)
    for column in ("lineItem/UsageStartDate", "lineItem/UsageEndDate", "identity/TimeInterval"):
        later[header.index(column)] = later[header.index(column)].replace("2023-11-14", "2023-11-16").replace(
            "2023-11-13", "2023-11-15")
    later[header.index("lineItem/UnblendedCost")] = "1"
    return later


def test_a_bill_delivered_again_with_a_later_day_and_other_figures_for_the_days_it_held_is_said_restated(tmp_path):
    """AWS's month to date delivered again reaching the 15th, and a usage line of the 13th USD 1.00
    dearer: the data's end moved, so the change was taken for the month growing (the bill USD 1.68
    became 3.68 with nothing said). The days the first delivery held whole (before the 14th) are
    compared by the day sums the ledger keeps: USD 1.00 more there is a restatement."""
    config = ingested_cur(tmp_path)
    first = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    held = sum(Decimal(billed) for day, (billed, _) in first["days"]["USD"].items() if day < "2023-11-14")

    def dearer_and_a_day_later(header, row):
        cost = header.index("lineItem/UnblendedCost")
        row[cost] = str(Decimal(row[cost]) + 1)
        return a_day_later(header, row)
    rewrite(tmp_path / "export" / "cur.csv", dearer_and_a_day_later)
    assert spendlake(config, "ingest").exit_code == 0
    entry = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    assert entry["data_through"] > first["data_through"]  # the month grew: taken for growth alone before
    assert [n for n in bills_table(tmp_path, config, "2023-11-15")["notes"] if "restated" in n] == [
        f"Bill 2023-11 / cur / USD restated: delivered again at {entry['ingested_at'][:16].replace('T', ' ')} UTC, "
        f"its data now through {entry['data_through'][:16].replace('T', ' ')} UTC, for the usage of the days before 2023-11-14 it bills "
        f"${held + 1:.2f} where the delivery of {first['ingested_at'][:16].replace('T', ' ')} UTC, its data through "
        f"2023-11-14 04:00 UTC, billed ${held:.2f} ($1.00 more, besides the days it adds): the figures above "
        "that count those days changed with it."]


def test_a_bill_delivered_again_with_a_later_day_is_no_restatement(tmp_path):
    """AWS delivers the month to date again each day: a delivery reaching further is the month growing."""
    config = ingested_cur(tmp_path)

    rewrite(tmp_path / "export" / "cur.csv", a_day_later)
    assert spendlake(config, "ingest").exit_code == 0
    entry = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    assert entry["data_through"] > entry["replaced"]["data_through"]  # the ledger keeps the figures it replaced
    assert not [n for n in bills_table(tmp_path, config, "2023-11-13").get("notes", []) if "restated" in n]


@pytest.mark.parametrize("later", [False, True], ids=["the same days", "a day later"])
def test_a_change_under_the_cent_is_no_restatement(tmp_path, later):
    """A line of the 13th delivered again USD 0.001 dearer (a late line's fraction) changes no figure the
    report shows: 'restated ... ($0.00 more)' said nothing but alarm (review42)."""
    config = ingested_cur(tmp_path)
    first = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    bill = sum(Decimal(t["billed_cost"]) for t in first["totals"])
    assert (bill + Decimal("0.001")).quantize(Decimal("0.01")) == bill.quantize(Decimal("0.01"))

    def a_fraction_dearer(header, row):
        cost = header.index("lineItem/UnblendedCost")
        row[cost] = str(Decimal(row[cost]) + Decimal("0.001"))
        return a_day_later(header, row) if later else None
    rewrite(tmp_path / "export" / "cur.csv", a_fraction_dearer)
    assert spendlake(config, "ingest").exit_code == 0
    entry = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    assert entry["delivery_id"] != first["delivery_id"] and entry["sha256"] != first["sha256"]  # delivered again, its figures changed
    assert not [n for n in bills_table(tmp_path, config, "2023-11-15").get("notes", []) if "restated" in n]
