"""A source's record written by a clock that ran ahead (RELIABILITY 11, 28): its last success
and data_through dated weeks ahead hid every later failure (state `ok`, /readyz ready) and
kept the source fresh until the calendar caught up."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from tests.conftest import DATA

AHEAD = "2099-01-01T00:00:00Z"


def spendlake(config: Path, *args: str):
    return CliRunner().invoke(cli, ["--config", str(config), *args])


@pytest.mark.parametrize("command, section, entry, data", [
    ("ingest", "sources", {"kind": "focus", "location": "files"}, DATA / "focus-toolkit" / "convert" /
     "aws-1.3-synthetic-csv"),
    ("inventory", "inventory", {"kind": "aws-tags", "path": "files"}, DATA / "inventory" / "tags")])
def test_a_failure_after_a_success_recorded_by_a_clock_ahead_is_failing(tmp_path, command, section, entry, data):
    shutil.copytree(data, tmp_path / "files")
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": "lake", section: [{"name": "src", **entry}]}))
    assert spendlake(config, command).exit_code == 0
    state_file = tmp_path / "lake" / "_state" / "sources.json"
    state = json.loads(state_file.read_text())
    state["src"]["last_success"] = AHEAD  # as the run would have written it with its clock in 2099
    if "data_through" in state["src"]:
        state["src"]["data_through"] = AHEAD
    state_file.write_text(json.dumps(state))
    shutil.rmtree(tmp_path / "files")
    assert spendlake(config, command).exit_code == 3
    result = spendlake(config, "status", "--sources", "--format", "json")
    [row] = json.loads(result.output)
    assert row["state"] == "failing", row
    now = datetime.now(timezone.utc)
    success = datetime.fromisoformat(row["last_success"].replace("Z", "+00:00"))
    assert now - timedelta(minutes=5) < success < now, row
    if row["data_through"] and section == "inventory":
        assert datetime.fromisoformat(row["data_through"].replace("Z", "+00:00")) < now, row
