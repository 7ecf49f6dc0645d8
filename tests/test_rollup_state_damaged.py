"""A damaged `_state/rollups_superseded.json` (truncated by a full disk or a hand edit) stopped
every rollup build until the file was deleted, and the CLI said so in a log line
(`...Z WARNING service.ingest.rollups: ...`): it is read as absent now, one `warning:` names it."""

from __future__ import annotations

import json
import shutil

import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.lake import Lake
from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"


def test_a_truncated_superseded_rollups_file_is_read_as_absent_with_one_warning_and_rollups_are_built(tmp_path):
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLE, tmp_path / "export")
    config = tmp_path / "spendlake.yaml"
    source = {"name": "f", "kind": "focus", "location": str(tmp_path / "export")}
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [source]}))
    assert CliRunner().invoke(cli, ["--config", str(config), "ingest"]).exit_code == 0
    state = Lake(tmp_path / "lake").state_file("rollups_superseded")
    state.write_text(state.read_text()[:5])  # {"sin
    result = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if "rollups_superseded.json" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: "), result.output
    assert " WARNING " not in result.output
    assert "since" in json.loads(state.read_text())  # written whole again by the build
    rollup = CliRunner().invoke(cli, ["--config", str(config), "rollup"])  # the file is whole again: no warning
    assert rollup.exit_code == 0 and "warning" not in rollup.output.lower(), rollup.output


def test_the_service_logs_the_damaged_file_as_a_warning_of_its_ingest_job(tmp_path, caplog):
    """`serve` runs the same ingest: the warning the CLI prints reaches the service's log."""
    from service.core.config import load_config
    from service.serve.service import run_ingest

    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLE, tmp_path / "export")
    config = tmp_path / "spendlake.yaml"
    source = {"name": "f", "kind": "focus", "location": str(tmp_path / "export")}
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [source]}))
    run_ingest(load_config(config))
    state = Lake(tmp_path / "lake").state_file("rollups_superseded")
    state.write_text(state.read_text()[:5])
    caplog.clear()
    with caplog.at_level("WARNING"):
        run_ingest(load_config(config))
    said = [r.getMessage() for r in caplog.records if "rollups_superseded.json" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("ingest: "), said


def test_inventory_says_the_damaged_file_as_its_warning_on_stderr_not_as_a_log_line(tmp_path):
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLE, tmp_path / "export")
    (tmp_path / "jobs.csv").write_text("job_id,start_time,end_time,gpus,nodes,cluster,state,run_id,team,job_type\n"
                                       "7001,2024-09-02T00:00:00Z,2024-09-02T08:00:00Z,4,gpu-001,west,COMPLETED,"
                                       "pretrain-7b,nlp,pretrain\n")
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "f", "kind": "focus", "location": str(tmp_path / "export")}], "inventory": [
        {"name": "jobs", "kind": "jobs-file", "path": str(tmp_path / "jobs.csv")}]}))
    assert CliRunner().invoke(cli, ["--config", str(config), "ingest"]).exit_code == 0
    state = Lake(tmp_path / "lake").state_file("rollups_superseded")
    state.write_text(state.read_text()[:5])
    result = CliRunner().invoke(cli, ["--config", str(config), "inventory"])
    assert result.exit_code == 0, result.output
    said = [line for line in result.stderr.splitlines() if "rollups_superseded.json" in line]
    assert len(said) == 1 and said[0].startswith("warning: "), result.output
    assert " WARNING " not in result.output and "rollups_superseded" not in result.stdout
    assert "since" in json.loads(state.read_text())
