"""`spendlake demo` end to end: generate, ingest, show; deterministic and safe to re-run."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal

from click.testing import CliRunner

from connectors.synthetic import generate_organisation
from service.cli import cli

ARGS = ["demo", "--days", "3", "--start", "2026-10-30", "--seed", "5"]  # three days across a month boundary


def lake_files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


def test_demo_generates_ingests_and_shows_the_lake(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    first = runner.invoke(cli, ARGS)
    assert first.exit_code == 0, first.output
    assert "ml-org 2026-10: committed" in first.output and "ml-org 2026-11: committed" in first.output
    assert "spendlake status" in first.output
    report = tmp_path / "spendlake-data" / "reports" / "2026-11-01"
    assert "report: spendlake-data/reports/2026-11-01/report.html" in first.output
    written = {p.name: p.read_bytes() for p in report.iterdir()}
    lake = tmp_path / "spendlake-data" / "lake"
    # the lake is where spendlake looks without a config, so `status` needs no flags
    shown = runner.invoke(cli, ["status", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.output)
    assert [(r["source"], r["billing_period"], r["currency"], r["final"]) for r in rows] == [
        ("ml-org", "2026-10", "USD", True), ("ml-org", "2026-11", "USD", False)]
    expected = generate_organisation(tmp_path / "expected", days=3, start=date(2026, 10, 30), seed=5)
    assert [(r["rows"], Decimal(r["billed_cost"]), Decimal(r["effective_cost"])) for r in rows] == [
        (p.rows, p.billed_cost, p.effective_cost) for p in expected.periods]

    before = lake_files(lake)
    ledger = (lake / "_ledger" / "deliveries.json").read_bytes()
    second = runner.invoke(cli, ARGS)
    assert second.exit_code == 0, second.output
    assert second.output.count("unchanged") == 2 and "committed" not in second.output
    assert lake_files(lake) == before
    assert {p.name: p.read_bytes() for p in report.iterdir()} == written
    assert (lake / "_ledger" / "deliveries.json").read_bytes() == ledger


def test_demo_config_is_written_and_valid(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, [*ARGS, "--dir", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    config = tmp_path / "d" / "demo" / "spendlake.yaml"
    checked = runner.invoke(cli, ["--config", str(config), "config", "validate"])
    assert checked.exit_code == 0, checked.output
    assert str(tmp_path / "d" / "lake") in checked.output
