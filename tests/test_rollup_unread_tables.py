"""The rollup and metric-tops build reads the costs, resource tags and job records alone: a
damaged table it does not read (the findings, the plans) stopped it on every ingest, as the
build's connection opened a view over every table of the lake ('warning: attribution rollups
or metric tops not refreshed ...: findings table ... is missing')."""

from __future__ import annotations

import shutil
from decimal import Decimal

import pytest
import yaml
from click.testing import CliRunner

from rules.base import Finding
from service.cli.main import cli
from service.core.lake import Lake
from service.findings.store import store_findings
from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"
PLAN = ["estimate", "--params", "7B", "--tokens", "1T", "--gpu", "H100", "--gpus", "64", "--mfu", "0.4",
        "--price-per-gpu-hour", "4", "--project", "llm-7b", "--start", "2026-11-20"]


def billed_lake(tmp_path):
    """A FOCUS sample's lake with a finding stored and a plan registered."""
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLE, tmp_path / "export")
    config = tmp_path / "spendlake.yaml"
    source = {"name": "f", "kind": "focus", "location": str(tmp_path / "export")}
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [source],
                                       "attribution": {"clusters": {}}}))
    spendlake = CliRunner().invoke
    assert spendlake(cli, ["--config", str(config), "ingest"]).exit_code == 0
    lake = Lake(tmp_path / "lake")
    store_findings(lake, [Finding(id="a1", rule="idle-gpu", severity="warning", resource_id="i-1", team="eval",
                                  category="waste", impact_usd=Decimal(1), monthly_waste_usd=Decimal(1),
                                  summary="idle for 6 hours")])
    assert spendlake(cli, ["--config", str(config), *PLAN, "--register", "plan-a"]).exit_code == 0
    return config, lake, spendlake


@pytest.mark.parametrize("table", ["findings", "plans"])
def test_a_missing_table_the_build_does_not_read_stops_no_rollup_or_metric_tops_build(tmp_path, table):
    config, lake, spendlake = billed_lake(tmp_path)
    [damaged] = lake.table_dir(table).glob("source=*/snapshot=current/data.parquet")
    damaged.unlink()
    derived = [*lake.table_dir("attribution_rollup").rglob("*.parquet"), *lake.table_dir("metric_tops").rglob("*.parquet")]
    assert derived
    for file in derived:  # stale after a config change: built again by the next writer
        file.unlink()
    result = spendlake(cli, ["--config", str(config), "ingest"])
    assert result.exit_code == 0 and "not refreshed" not in result.output, result.output
    assert list(lake.table_dir("attribution_rollup").rglob("*.parquet"))
    assert list(lake.table_dir("metric_tops").rglob("*.parquet"))
    verified = spendlake(cli, ["--config", str(config), "verify"])  # the damage is still said where it is
    assert verified.exit_code == 3 and str(damaged) in verified.output, verified.output


# what reads neither table: the lines, the runs, the plans (of findings), the findings (of plans)
READERS = {"findings": [["plans", "--format", "json"], ["export", "--format", "focus", "--out", "{out}"],
                        ["runs", "--since", "30d", "--format", "json"],
                        ["attribute", "--since", "30d", "--by", "team", "--format", "json"]],
           "plans": [["findings", "--format", "json"], ["export", "--format", "focus", "--out", "{out}"],
                     ["runs", "--since", "30d", "--format", "json"]]}


@pytest.mark.parametrize("table", ["findings", "plans"])
def test_a_damaged_table_a_command_does_not_read_stops_none_of_its_answers(tmp_path, table):
    config, lake, spendlake = billed_lake(tmp_path)
    [damaged] = lake.table_dir(table).glob("source=*/snapshot=current/data.parquet")
    damaged.write_bytes(damaged.read_bytes()[:damaged.stat().st_size // 2])
    for args in READERS[table]:
        args = [arg.format(out=tmp_path / "out") for arg in args]
        result = spendlake(cli, ["--config", str(config), *args])
        assert result.exit_code == 0 and str(damaged) not in result.output, (args, result.output)
    assert list((tmp_path / "out").rglob("cost_and_usage.parquet"))
    read = spendlake(cli, ["--config", str(config), *(["plans"] if table == "plans" else ["findings"])])
    assert read.exit_code == 3 and str(damaged) in read.output, read.output  # a command that reads it still says so
