"""Relative paths in a config file are read from the file's folder, whatever the working
directory (README: Configuration): cron, a systemd unit or another shell read the same
exports and write the same lake as a run from the config's folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.config import load_config

DATA = Path(__file__).parent / "data"
FOCUS = DATA / "samples" / "focus" / "focus_1.0_sample_1000.csv"


def relative_config(tmp_path: Path) -> Path:
    """A config in `deploy/` naming everything relative to that folder."""
    folder = tmp_path / "deploy"
    (folder / "exports").mkdir(parents=True)
    shutil.copy(FOCUS, folder / "exports" / "focus.csv")
    shutil.copytree(DATA / "inventory" / "tags", folder / "tags")
    shutil.copytree(DATA / "inventory" / "s3", folder / "s3")
    config = folder / "spendlake.yaml"
    config.write_text(yaml.safe_dump({
        "lake": "./lake",
        "sources": [{"name": "focus", "kind": "focus", "location": "./exports"}],
        "inventory": [{"name": "tags", "kind": "aws-tags", "path": "tags/get-resources.json"},
                      {"name": "s3", "kind": "s3-objects", "path": "./s3/listing.csv",
                       "lifecycle_path": "s3/lifecycle.json",
                       "inventory_manifests": ["s3://inv-dest/daily/manifest.json"]}],
        "report": {"out": "./reports"},
    }))
    return config


def test_relative_paths_are_read_from_the_config_files_folder(tmp_path, monkeypatch):
    config = relative_config(tmp_path)
    folder = config.parent
    monkeypatch.chdir(tmp_path)  # not the config's folder
    loaded = load_config(str(Path("deploy") / "spendlake.yaml"))
    assert loaded.lake == folder / "lake"
    assert loaded.sources[0].location == str(folder / "exports")
    tags, s3 = loaded.inventory
    assert tags.path == str(folder / "tags" / "get-resources.json")
    assert (s3.path, s3.lifecycle_path) == (str(folder / "s3" / "listing.csv"), str(folder / "s3" / "lifecycle.json"))
    assert s3.inventory_manifests == ("s3://inv-dest/daily/manifest.json",)  # URLs stay as written
    assert loaded.report.out == str(folder / "reports")


def test_a_lake_under_home_is_there_not_in_a_folder_named_tilde_beside_the_config(tmp_path):
    config = tmp_path / "spendlake.yaml"
    config.write_text("lake: ~/spendlake-lake\n")
    assert load_config(str(config)).lake == Path.home() / "spendlake-lake"


def test_absolute_and_home_paths_stay_as_written(tmp_path):
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "a", "kind": "focus", "location": "/srv/exports/a"},
        {"name": "b", "kind": "focus", "location": "~/exports/b"},
        {"name": "c", "kind": "aws-cur2", "location": "s3://bucket/prefix"}]}))
    assert [s.location for s in load_config(str(config)).sources] == [
        "/srv/exports/a", "~/exports/b", "s3://bucket/prefix"]


def test_commands_run_from_another_working_directory_read_the_configs_exports(tmp_path, monkeypatch):
    config = relative_config(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    runner = CliRunner()
    ingest = runner.invoke(cli, ["--config", str(config), "ingest"])
    assert ingest.exit_code == 0, ingest.output
    assert "committed" in ingest.output and "no such file" not in ingest.output
    inventory = runner.invoke(cli, ["--config", str(config), "inventory", "--source", "tags"])
    assert inventory.exit_code == 0, inventory.output
    assert (config.parent / "lake" / "costs").is_dir()
    assert not any(elsewhere.iterdir())  # nothing written in the working directory


@pytest.mark.parametrize(("entry", "key"), [
    ({"sources": [{"name": "a", "kind": "focus", "location": "gs://bucket/exports"}]}, "sources[0].location"),
    ({"report": {"out": "s3:/bucket/reports"}}, "report.out"),
    ({"inventory": [{"name": "s", "kind": "s3-objects", "inventory_manifests": ["s3:/inv/manifest.json"]}]},
     "inventory[0].inventory_manifests[0]")])
def test_a_url_of_another_store_or_a_mistyped_s3_url_is_a_config_error(tmp_path, entry, key):
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), **entry}))
    result = CliRunner().invoke(cli, ["--config", str(config), "config", "validate"])
    assert result.exit_code == 2, result.output
    assert f"spendlake.yaml: {key}: '" in result.output and "is neither a local path nor s3://bucket/prefix" in result.output


@pytest.mark.parametrize("command", [["report"], ["export", "--format", "focus"]], ids=" ".join)
@pytest.mark.parametrize("out", ["gs://bucket/reports", "s3:/bucket/reports", "https://example.com/r"])
def test_an_out_that_is_no_local_folder_nor_s3_is_refused_not_written_to_a_folder_named_after_it(
        tmp_path, monkeypatch, command, out):
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake")}))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["--config", str(config), *command, "--out", out])
    assert result.exit_code == 2, result.output
    assert f"--out: {out!r} is neither a local path nor s3://bucket/prefix" in result.output
    assert [p.name for p in tmp_path.iterdir() if p.name != "lake"] == ["spendlake.yaml"]


def test_no_config_beside_the_demos_names_the_config_the_demo_wrote(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPENDLAKE_CONFIG", raising=False)
    plain = CliRunner().invoke(cli, ["attribute", "--since", "7d"])
    assert plain.exit_code == 2 and "(`spendlake demo` writes an example)" in plain.stderr
    demo = tmp_path / "spendlake-data" / "demo" / "spendlake.yaml"  # the README's first command left it here
    demo.parent.mkdir(parents=True)
    demo.write_text("lake: ../lake\n")
    after = CliRunner().invoke(cli, ["attribute", "--since", "7d"])
    assert after.exit_code == 2
    assert after.stderr.rstrip().endswith("the demo's is spendlake-data/demo/spendlake.yaml: pass --config "
                                          "spendlake-data/demo/spendlake.yaml, or set $SPENDLAKE_CONFIG to it")
