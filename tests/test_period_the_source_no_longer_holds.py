"""A damaged cost partition of a period the source no longer holds (the export's retention, an
export re-created without its history): every query refuses it and names `spendlake ingest` as
the fix, and ingest, which reads no delivery of that period, fails it naming the ways out (a
backup, `spendlake forget SOURCE --period P`) instead of passing over it with exit 0 (break54's F7)."""

from __future__ import annotations

import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.lake import Lake
from tests.conftest import SAMPLES

TREY = SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv"  # 2024-06
SAMPLE = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"  # 2024-09 and 2024-10
WINDOW = ["--since", "2024-09-01", "--until", "2024-11-01"]  # never reads June


def spendlake(config: Path, *args: str, input: str | None = None):
    return CliRunner().invoke(cli, ["--config", str(config), *args], input=input)


@pytest.fixture
def config(tmp_path) -> Path:
    """A FOCUS source of three periods whose export then lost June (its file gone)."""
    export = tmp_path / "export"
    export.mkdir()
    for sample in (TREY, SAMPLE):
        shutil.copy(sample, export / sample.name)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"),
                                    "sources": [{"name": "trey", "kind": "focus", "location": str(export)}]}))
    assert spendlake(path, "ingest").exit_code == 0
    (export / TREY.name).unlink()
    kept = spendlake(path, "ingest")  # a period none of whose files is left keeps what the lake holds
    assert kept.exit_code == 0 and "2024-06" not in kept.output, kept.output
    return path


def june(config: Path) -> Path:
    return config.parent / "lake" / "costs" / "source=trey" / "billing_period=2024-06" / "data.parquet"


def damage(config: Path, how: str) -> None:
    if how == "missing":
        june(config).unlink()
    else:
        with open(june(config), "r+b") as handle:
            handle.truncate(1000)


@pytest.mark.parametrize("how", ["missing", "truncated"])
def test_ingest_fails_a_damaged_period_the_source_no_longer_holds_naming_a_backup_and_forget(config, how):
    damage(config, how)
    result = spendlake(config, "ingest")
    assert result.exit_code == 3, result.output
    assert (f"trey 2024-06: FAILED: {june(config)}: its cost partition is {how}" in result.output
            and "the source no longer holds 2024-06, so ingest cannot restore it — restore it from a backup, or run "
                "`spendlake forget trey --period 2024-06` to drop the period" in result.output), result.output
    assert "trey 2024-09, 2024-10: unchanged" in result.output  # the periods it holds are read as ever
    for args in (["attribute", *WINDOW], ["status"], ["verify"]):  # each names the same way out
        query = spendlake(config, *args)
        assert query.exit_code == 3 and "`spendlake forget trey --period 2024-06`" in query.output, (args, query.output)


def test_a_damaged_period_the_source_still_holds_is_restored_not_failed(config):
    damage(config, "truncated")
    shutil.copy(TREY, config.parent / "export" / TREY.name)
    result = spendlake(config, "ingest")
    assert result.exit_code == 0 and "FAILED" not in result.output, result.output
    assert "trey 2024-06: committed 1000 rows USD 193.807689048914" in result.output


def test_forget_period_drops_the_damaged_period_and_queries_answer_again_tied_out(config):
    damage(config, "truncated")
    lake = Lake(config.parent / "lake")
    rollups = [p for p in (lake.root / "attribution_rollup" / "source=trey").glob("billing_period=2024-06/*")]
    assert rollups  # derived from June when it was whole: forget drops them too
    result = spendlake(config, "forget", "trey", "--period", "2024-06", "--yes")
    assert result.exit_code == 0, result.output
    assert "forgot trey 2024-06: 1,000 cost rows" in result.output
    assert sorted(e.billing_period for e in lake.ledger()) == ["2024-09", "2024-10"]
    assert not june(config).parent.exists() and not any(p.exists() for p in rollups)
    assert not list((lake.root / "_ledger").rglob("billing_period=2024-06"))  # the rollups' records went too
    again = spendlake(config, "ingest")
    assert again.exit_code == 0 and "FAILED" not in again.output, again.output
    for args in (["attribute", *WINDOW], ["status"], ["verify"]):
        assert spendlake(config, *args).exit_code == 0, args
    check = json.loads(spendlake(config, "attribute", "--check", "--format", "json").output)
    assert all(row["ok"] for row in check)
    totals = json.loads(spendlake(config, "attribute", *WINDOW, "--format", "json").output)["totals"]
    ledger = sum(t.billed_cost for e in lake.ledger() for t in e.totals)
    assert sum(Decimal(t["cost"]) for t in totals) == ledger == Decimal("20.520226728990")


def test_forget_period_refuses_a_period_the_ledger_does_not_hold_and_asks_first(config):
    refused = spendlake(config, "forget", "trey", "--period", "2024-07", "--yes")
    assert refused.exit_code == 2
    assert "the lake holds no period 2024-07 of source 'trey' — periods it holds: 2024-06, 2024-09, 2024-10" \
        in refused.output, refused.output
    unanswered = spendlake(config, "forget", "trey", "--period", "2024-06", input="n\n")
    assert unanswered.exit_code == 2 and "not confirmed: nothing was removed" in unanswered.output
    assert "`spendlake forget trey --period 2024-06 --yes`" in unanswered.output
    assert june(config).exists() and len(Lake(config.parent / "lake").ledger()) == 3
