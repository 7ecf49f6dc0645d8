"""A writer refused names the holder as it is: `serve`'s jobs hold the `ingest` lock, and a CLI
ingest beside them said "another spendlake ingest holds the lake (pid N)" of the serve process."""

from __future__ import annotations

import os

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core import locks
from service.core.errors import LakeBusyError
from service.core.lake import Lake
from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"


def test_an_ingest_refused_while_serves_jobs_hold_the_lake_names_spendlake_serve(tmp_path, monkeypatch):
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": []}))
    lake = Lake(tmp_path / "lake")
    monkeypatch.setattr(locks, "_command", "spendlake serve")  # as the CLI records it for `serve`
    with lake.lock("ingest"):  # a start-up job of serve
        assert lake.lock_holder("ingest") == locks.holder()  # a commit's pending_by still matches its holder
        result = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
    assert result.exit_code == 3, result.output
    assert f"another spendlake serve holds the lake (pid {os.getpid()} on " in result.output, result.output


def test_a_writer_not_started_from_the_cli_is_named_by_its_lock(tmp_path, monkeypatch):
    lake = Lake(tmp_path / "lake")
    monkeypatch.setattr(locks, "_command", "")  # a library caller: no command recorded
    with lake.lock("ingest"):
        with pytest.raises(LakeBusyError, match=rf": another spendlake ingest holds the lake \(pid {os.getpid()} on "):
            with lake.lock("ingest"):
                pass


@pytest.mark.parametrize("args, lock, command", [
    (["rules", "run", "--since", "30d"], "findings", "spendlake rules run"),
    (["ingest", "--source", "f"], "ingest", "spendlake ingest"),
])
def test_the_lock_records_the_whole_command_path_and_none_of_its_arguments(tmp_path, args, lock, command):
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "f", "kind": "focus", "location": str(SAMPLE.parent)}]}))
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exit_code == 0, result.output
    # the holder's line, then its command: what a writer refused beside it names
    assert (tmp_path / "lake" / "_locks" / f"{lock}.lock").read_text().split("\n")[1] == command
