"""Rows without BillingCurrency are kept (the lake allows a null currency); the CLI names that
currency `(no currency)` rather than printing `None` or a blank, and JSON keeps the null."""

from __future__ import annotations

import csv
import json

import pytest
import yaml
from click.testing import CliRunner

from conftest import SAMPLES
from service.cli.main import cli
from service.core.units import NO_CURRENCY


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "220")  # every column of the tables is shown
    rows = list(csv.DictReader((SAMPLES / "focus" / "focus_1.0_sample_1000.csv").open(newline="")))
    for row in rows[:3]:
        row["BillingCurrency"] = ""
    (tmp_path / "export").mkdir()
    with (tmp_path / "export" / "bill.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "focus", "kind": "focus", "location": str(tmp_path / "export")}]}))
    return path


def run(config, *args):
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_ingest_status_and_check_name_a_null_currency(config):
    ingested = run(config, "ingest")
    assert f"USD 20.280209869090, {NO_CURRENCY} 0.000016859900" in ingested
    assert "None" not in ingested
    status = [line for line in run(config, "status", "--format", "table").splitlines() if "│ 3 " in line or " 3 │" in line]
    assert status and NO_CURRENCY in status[0]
    check = run(config, "attribute", "--check", "--format", "table")
    assert check.count(NO_CURRENCY) == 3  # billed, effective and list cost of 2024-09
    spend = run(config, "attribute", "--since", "2024-01-01", "--format", "table")
    assert NO_CURRENCY in spend and "None" not in spend


def test_json_keeps_a_null_currency(config):
    run(config, "ingest")
    rows = json.loads(run(config, "status", "--format", "json"))
    assert [row["currency"] for row in rows if row["rows"] == 3] == [None]
    checked = json.loads(run(config, "attribute", "--check", "--format", "json"))
    assert None in {row["currency"] for row in checked}


def test_the_report_names_a_null_currency_not_dollars(config, tmp_path):
    run(config, "ingest")
    run(config, "report", "--date", "2024-09-30", "--out", str(tmp_path / "reports"))
    summary = (tmp_path / "reports" / "2024-09-30" / "summary.md").read_text()
    html = (tmp_path / "reports" / "2024-09-30" / "report.html").read_text()
    # was 'Day (None): $0.00' and 'unallocated: $0.00' beside the USD lines: finance read two dollar figures
    assert "- Day, billed (no currency): (no currency) 0.00" in summary
    assert "- unallocated: (no currency) 0.00" in summary and "- unallocated: $20.52" in summary
    assert "(None)" not in summary + html
