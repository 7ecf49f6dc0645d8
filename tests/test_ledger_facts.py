"""The ledger's other facts of a partition are proven as its sums are: a ledger edited by hand
or a flipped byte in `_ledger/deliveries.json` that changes a partition's tag keys (what
attribution reads instead of the lines' Tags) or its data_through (freshness, the report's day)
is found by `spendlake verify`, and `ingest` reads the period again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv"
BY_ENV = ["attribute", "--since", "2024-01-01", "--until", "2025-01-01", "--by", "env", "--format", "json"]


def spendlake(config: Path, *args: str):
    return CliRunner().invoke(cli, ["--config", str(config), *args])


@pytest.fixture
def config(tmp_path):
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLE, tmp_path / "export" / SAMPLE.name)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({
        "lake": str(tmp_path / "lake"),
        "sources": [{"name": "trey", "kind": "focus", "location": str(tmp_path / "export")}],
        "attribution": {"dimensions": {"env": {"tags": ["env"]}}}}))
    assert spendlake(path, "ingest").exit_code == 0
    return path


def edit_ledger(config: Path, change) -> None:
    ledger = config.parent / "lake" / "_ledger" / "deliveries.json"
    data = json.loads(ledger.read_text())
    [entry] = [e for e in data["entries"] if e["billing_period"] == "2024-06"]
    change(entry)
    ledger.write_text(json.dumps(data, indent=1))


def verified_row(config: Path) -> dict:
    result = spendlake(config, "verify", "--format", "json")
    assert result.exit_code == 3, result.output
    [row] = [r for r in json.loads(result.output.split("\nerror:")[0]) if r["check"] != "ok"]
    return row


def rows_by_env(config: Path) -> list:
    result = spendlake(config, *BY_ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["rows"]  # notes go to stderr as well


def test_a_ledger_whose_tag_keys_lost_one_fails_verify_and_ingest_reads_the_period_again(config):
    before = rows_by_env(config)
    assert any(row["env"] == "prod" for row in before)
    edit_ledger(config, lambda entry: entry.update(tag_keys=[k for k in entry["tag_keys"] if k != "env"]))
    row = verified_row(config)
    assert row["check"] == "altered" and row["billing_period"] == "2024-06"
    assert "tag keys" in row["detail"] and "env" in row["detail"], row["detail"]
    query = spendlake(config, *BY_ENV)
    assert query.exit_code == 3 and "altered" in query.output, query.output
    assert "committed" in spendlake(config, "ingest").output
    assert spendlake(config, "verify").exit_code == 0
    assert rows_by_env(config) == before


def test_a_ledger_whose_data_through_moved_ahead_fails_verify_and_ingest_reads_the_period_again(config):
    sources = spendlake(config, "status", "--sources", "--format", "json")
    through = json.loads(sources.output)[0]["data_through"]
    edit_ledger(config, lambda entry: entry.update(data_through="2099-12-25T00:00:00Z"))
    row = verified_row(config)
    assert row["check"] == "altered" and "2099-12-25T00:00:00Z" in row["detail"], row["detail"]
    assert "committed" in spendlake(config, "ingest").output
    assert spendlake(config, "verify").exit_code == 0
    again = spendlake(config, "status", "--sources", "--format", "json")
    assert json.loads(again.output)[0]["data_through"] == through
