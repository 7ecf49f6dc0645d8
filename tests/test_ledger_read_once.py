"""The ledger is parsed once per state of its file: a command (and serve's threads) reads it many
times between writes, and a large ledger costs far more to parse than to read; a ledger written
again (other bytes) is parsed again. An unchanged delivery does not read it a second time unless
its files were found moved with their location."""

from __future__ import annotations

import json
import shutil

import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core import ledger_file
from service.core.lake import Lake
from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"


def lake_of(tmp_path) -> str:
    (tmp_path / "export").mkdir()
    shutil.copy2(SAMPLE, tmp_path / "export" / "part-0.csv")
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "f", "kind": "focus", "location": str(tmp_path / "export")}]}))
    run(config, "ingest")
    return str(config)


def run(config, *args: str) -> None:
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exit_code == 0, result.output


def counted(monkeypatch, target, name: str) -> list[int]:
    calls = [0]
    original = getattr(target, name)

    def count(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, count)
    return calls


def test_attribute_and_status_parse_an_unchanged_ledger_once(tmp_path, monkeypatch):
    config = lake_of(tmp_path)
    for command in (["attribute", "--since", "2000-01-01", "--by", "team"], ["status"]):
        monkeypatch.setattr(ledger_file, "_PARSED", {}, raising=False)  # as a new process finds it
        parses = counted(monkeypatch, ledger_file, "parse_ledger_state")
        run(config, *command)
        assert parses == [1], command


def test_a_ledger_written_again_with_other_figures_is_parsed_again_and_the_same_bytes_are_not(tmp_path, monkeypatch):
    Lake(lake_of(tmp_path) and tmp_path / "lake").ledger()
    file = tmp_path / "lake" / "_ledger" / "deliveries.json"
    parses = counted(monkeypatch, ledger_file, "parse_ledger_state")
    first = ledger_file.read_ledger_state(file)
    assert ledger_file.read_ledger_state(file) is first and parses == [0]  # parsed by the ingest already
    data = json.loads(file.read_bytes())
    data["entries"][0]["rows"] += 1
    edited = file.with_suffix(".new")
    edited.write_text(json.dumps(data))
    edited.replace(file)  # a new file, as the lake writes it
    again = ledger_file.read_ledger_state(file)
    assert parses == [1] and again.entries[0].rows == first.entries[0].rows + 1 and again.stamp != first.stamp
    same = file.with_suffix(".new")
    same.write_bytes(file.read_bytes())
    same.replace(file)
    stamp = ledger_file.ledger_stamp(file)
    assert ledger_file.read_ledger_state(file).stamp == stamp != again.stamp and parses == [1]


def test_an_unchanged_delivery_does_not_move_its_files_in_the_ledger(tmp_path, monkeypatch):
    config = lake_of(tmp_path)
    moves = counted(monkeypatch, Lake, "moved_files")
    run(config, "ingest")
    assert moves == [0]
