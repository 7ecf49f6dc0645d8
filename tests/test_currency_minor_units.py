"""A bill in yen is shown in whole yen, as its invoice is: GCP's export in JPY (the koku sample with
its costs in yen, half-yen lines included) reads `JPY 3,344` in `status`, `attribute` and the
report, never `3,344.00`; a half yen rounds up as the invoice rounds it, and JSON and CSV keep
every decimal. Other currencies keep their own minor unit (EUR cents, KWD fils)."""

from __future__ import annotations

import csv
import json
import re
from decimal import Decimal

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from conftest import SAMPLES
from service.cli.main import cli
from test_focus_toolkit_fixtures import TOOLKIT
from service.core.units import money_text

YEN_PER_MILLIONTH = Decimal(104_500_000)  # the sample's 5e-06 USD lines become 522.5 yen


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    root = tmp_path_factory.mktemp("yen")
    rows = list(csv.DictReader((SAMPLES / "gcp" / "koku_gcp_standard_export_202011.csv").open(newline="")))
    (root / "export").mkdir()
    with (root / "export" / "billing.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            row["credits"] = re.sub(r"'amount': ([-0-9.e]+)",
                                    lambda m: f"'amount': {Decimal(m.group(1)) * YEN_PER_MILLIONTH}", row["credits"])
            writer.writerow({**row, "cost": str(Decimal(row["cost"]) * YEN_PER_MILLIONTH), "currency": "JPY"})
    path = root / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(root / "lake"), "sources": [
        {"name": "gcp", "kind": "gcp-billing", "location": str(root / "export")}]}))
    assert CliRunner().invoke(cli, ["--config", str(path), "ingest"]).exit_code == 0
    return path


@pytest.fixture(scope="module")
def toolkit_in_yen(tmp_path_factory):
    """The toolkit's GCP month billed in yen: committed use discounts, and a budget in yen."""
    root = tmp_path_factory.mktemp("toolkit-yen")
    (root / "export").mkdir()
    source = TOOLKIT / "generate" / "gcp-1.2" / "focus_1_2_cost_and_usage_gcp.csv.gz"
    duckdb.sql(f"COPY (SELECT * REPLACE ('JPY' AS BillingCurrency) FROM read_csv('{source}', all_varchar = true)) "
               f"TO '{root / 'export' / 'cost.csv'}' (HEADER)")
    path = root / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(root / "lake"), "sources": [
        {"name": "gcp", "kind": "focus", "location": str(root / "export")}], "budgets": [
        {"name": "all-yen", "dimension": "team", "value": "unallocated", "amount": 1000000, "currency": "JPY"}]}))
    assert CliRunner().invoke(cli, ["--config", str(path), "ingest"]).exit_code == 0
    return path


def run(config, *args) -> str:
    result = CliRunner().invoke(cli, ["--config", str(config), *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_status_and_attribute_tables_show_whole_yen(config):
    status = run(config, "status", "--format", "table")
    assert " 3,344 " in status and "3,344.00" not in status
    spend = run(config, "attribute", "--since", "2020-11-01", "--until", "2020-12-01", "--format", "table")
    assert " 3,344 " in spend and "3,344.00" not in spend
    exact = json.loads(run(config, "attribute", "--since", "2020-11-10", "--until", "2020-11-11", "--format", "json"))
    assert exact["totals"] == [{"currency": "JPY", "cost": "1149.500000000000"}]


def test_the_report_shows_whole_yen_and_keeps_every_decimal_in_json(config, tmp_path):
    run(config, "report", "--date", "2020-11-10", "--out", str(tmp_path))
    folder = tmp_path / "2020-11-10"
    summary = (folder / "summary.md").read_text()
    # was 'JPY 1,149.50 (+120.0% vs JPY 522.50)' and 'JPY 3,344.00': sen no yen invoice has
    assert "- Day, billed (JPY): JPY 1,150 (+120.0% vs JPY 523)" in summary
    assert "- Month to date, billed (JPY): JPY 3,344" in summary.splitlines()
    html = (folder / "report.html").read_text()
    assert "JPY 3,344<" in html and "JPY 3,344.00" not in html
    headlines = {h["label"]: h["value"] for h in json.loads((folder / "report.json").read_text())["headlines"]}
    assert headlines["Day, billed (JPY)"] == "1149.500000000000"


def test_each_currency_keeps_its_own_minor_unit():
    assert [money_text(Decimal("1234.5675"), of=code) for code in ("JPY", "EUR", "KWD", None)] == [
        "1,235", "1,234.57", "1,234.568", "1,234.57"]
    assert money_text(Decimal("0.5"), "JPY") == "JPY 1"


def test_commitments_and_budgets_in_yen_show_whole_yen(toolkit_in_yen):
    commitments = run(toolkit_in_yen, "commitments", "--since", "2026-05-01", "--until", "2026-06-01",
                      "--format", "table")
    totals = [line for line in commitments.splitlines() if line.startswith("│ total")]
    assert totals and re.search(r"│ +1,207 │ +829 │ +378 │", totals[0])  # was 1,206.60 │ 829.05 │ 377.55
    budgets = run(toolkit_in_yen, "budgets", "--format", "table")
    assert re.search(r"│ JPY +│ 1,000,000 │ +4,586 │", budgets)  # was 1,000,000.00 │ 4,586.15


def test_a_budget_in_yen_warns_in_whole_yen():
    from service.core.config import parse_config
    from service.findings.budgets import BudgetStatus
    from service.findings.forecast import Forecast

    [budget] = parse_config({"budgets": [{"name": "all-yen", "dimension": "team", "value": "nlp",
                                          "amount": "1000000", "currency": "JPY"}]}).budgets
    status = BudgetStatus(budget, Forecast(*map(Decimal, (500_000, 810_000, 700_000, 900_000, 10))), "2026-11")
    assert "forecast to reach 81.0% of JPY 1,000,000 by the month's end" in status.warning  # was 1,000,000.00
