"""A bill the cloud delivers again with other figures for the days it already held (a restatement)
changes the report's figures, and the report says so under the Bills table: when, and from what."""

from __future__ import annotations

import csv
import json
import shutil
from decimal import Decimal

from click.testing import CliRunner

from conftest import SAMPLES
from service.cli.main import cli

CUR = SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv"


def spendlake(config_file, *args):
    return CliRunner().invoke(cli, ["--config", str(config_file), *args], catch_exceptions=False)


def bills_table(tmp_path, config, day: str) -> dict:
    assert spendlake(config, "report", "--date", day, "--out", str(tmp_path / "out")).exit_code == 0
    data = json.loads((tmp_path / "out" / day / "report.json").read_text())
    return next(t for s in data["sections"] if s["key"] == "bills" for t in s["tables"] if t["key"] == "bills")


def rewrite(path, change) -> None:
    """The CUR file with `change(header, row)` applied to its first usage line of 13 November."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    header, start, kind = rows[0], rows[0].index("lineItem/UsageStartDate"), rows[0].index("lineItem/LineItemType")
    row = next(r for r in rows[1:] if r[start].startswith("2023-11-13") and r[kind] == "Usage")
    change(header, row)
    with open(path, "w", newline="") as handle:
        csv.writer(handle).writerows(rows)


def test_a_bill_delivered_again_with_other_figures_for_the_same_days_is_said_restated(tmp_path):
    """The anonymous CUR's November delivered again with a usage line of the 13th USD 1.00 dearer and
    its data still through 14 November 04:00: the report of the 13th went from a USD 1.68 bill to
    2.68 (month to date 1.63 to 2.63) with nothing said; a finance reader who tied yesterday's copy
    to the invoice could not tell the cloud restated the month. A note under the Bills table says it."""
    (tmp_path / "export").mkdir()
    shutil.copy(CUR, tmp_path / "export" / "cur.csv")
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: cur, kind: aws-cur, location: '{tmp_path / 'export'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
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
        f"its data still through 2023-11-14 04:00 UTC, it bills USD 2.68 where the delivery of "
        f"{first[:16].replace('T', ' ')} UTC billed USD 1.68 (USD 1.00 more): the figures above that count its "
        "lines changed with it."]


def test_a_bill_delivered_again_with_a_later_day_is_no_restatement(tmp_path):
    """AWS delivers the month to date again each day: a delivery reaching further is the month growing."""
    (tmp_path / "export").mkdir()
    shutil.copy(CUR, tmp_path / "export" / "cur.csv")
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: cur, kind: aws-cur, location: '{tmp_path / 'export'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0

    def a_day_later(header, row):  # the 15th's usage, USD 1.00 more in the bill
        for column in ("lineItem/UsageStartDate", "lineItem/UsageEndDate", "identity/TimeInterval"):
            row[header.index(column)] = row[header.index(column)].replace("2023-11-14", "2023-11-16").replace(
                "2023-11-13", "2023-11-15")
        row[header.index("lineItem/UnblendedCost")] = "1"
    rewrite(tmp_path / "export" / "cur.csv", a_day_later)
    assert spendlake(config, "ingest").exit_code == 0
    entry = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    assert entry["data_through"] > entry["replaced"]["data_through"]  # the ledger keeps the figures it replaced
    assert not [n for n in bills_table(tmp_path, config, "2023-11-13").get("notes", []) if "restated" in n]
