"""The rollup build that ends an ingest cannot run (a damaged table it reads, a full disk): the
ingest's periods stand (exit 0) and the command says so as its own `warning:` on stderr, naming
the file and what to run, as its other warnings do, never as a log line
('2026-12-05T20:58:38.527Z WARNING service.ingest.rollups: ...'); a full disk is said once."""

from __future__ import annotations

import re

import duckdb
import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.errors import resource_error
from service.core.lake import Lake
from service.ingest import rollups
from tests.conftest import SAMPLES
from tests.test_inventory_integrity import JOBS, snapshot

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\S+ WARNING ", re.M)
NOT_REFRESHED = "warning: attribution rollups or metric tops not refreshed"


def spendlake(config, *args):
    return CliRunner().invoke(cli, ["--config", str(config), *args])


@pytest.fixture
def lake(tmp_path):
    """A FOCUS bill and a jobs-file snapshot on shared clusters, ingested."""
    (tmp_path / "jobs.csv").write_text(JOBS)
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "focus.csv").write_bytes((SAMPLES / "focus" / "focus_1.0_sample_1000.csv").read_bytes())
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({
        "lake": str(tmp_path / "lake"),
        "sources": [{"name": "bill", "kind": "focus", "location": str(tmp_path / "export")}],
        "inventory": [{"name": "trace", "kind": "jobs-file", "path": str(tmp_path / "jobs.csv")}],
        "attribution": {"clusters": {}}}))
    for command in ("inventory", "ingest"):
        result = spendlake(config, command)
        assert result.exit_code == 0, result.output
    return config, tmp_path / "lake"


def test_a_damaged_jobs_snapshot_under_an_ingest_is_its_warning_naming_the_file_and_the_command(lake):
    config, root = lake
    file = snapshot(Lake(root))
    file.unlink()
    result = spendlake(config, "ingest")
    assert result.exit_code == 0, result.output
    assert "bill " in result.stdout and "unchanged" in result.stdout, result.output
    [line] = [line for line in result.stderr.splitlines() if "not refreshed" in line]
    assert line.startswith(NOT_REFRESHED), result.stderr
    assert str(file) in line and "is missing" in line and "spendlake inventory --source trace" in line
    assert not LOG_LINE.search(result.stderr), result.stderr


def test_a_full_disk_under_the_rollup_build_says_disk_full_once(lake, monkeypatch):
    config, root = lake
    staged = root / "_staging" / "attribution_rollup-1.parquet"

    def full_disk(lake, config):  # as the lake's writer raises it: DuckDB's words, named and explained
        raise resource_error(duckdb.IOException(f'IO Error: Could not write file "{staged}": No space left on '
                                                "device"), where=str(staged))
    monkeypatch.setattr(rollups, "materialise", full_disk)
    result = spendlake(config, "ingest")
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.stderr.splitlines() if "not refreshed" in line]
    assert line.startswith(NOT_REFRESHED) and line.count("disk full") == 1 and str(staged) in line, line
    assert "free disk space" in line and not LOG_LINE.search(result.stderr), result.stderr
