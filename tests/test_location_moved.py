"""A source's `location` moved to another path with the same files (`cp -a` or `rsync -a` to a new
disk, `mv` across file systems: new inodes and change times, the same paths under it, sizes and
modification times) is "unchanged", not every period committed again; its ledger entries name the
files where they are now. Files copied without their times are read again. Neither ever counts a
period twice (RELIABILITY 1, 39)."""

from __future__ import annotations

import shutil

import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.lake import Lake
from tests.conftest import SAMPLES

FILES = {"a/part-0.csv": SAMPLES / "focus" / "focus_1.0_sample_1000.csv",  # one name: each file found by its path
         "b/part-0.csv": SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv"}


def ingest(tmp_path, location) -> list[str]:
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "f", "kind": "focus", "location": str(location)}]}))
    result = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def figures(tmp_path) -> dict:
    return {e.billing_period: (e.delivery_id, e.rows, e.totals, e.ingested_at, e.sha256)
            for e in Lake(tmp_path / "lake").ledger()}


def exported(tmp_path):
    export = tmp_path / "export"
    for key, sample in FILES.items():
        (export / key).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(sample, export / key)
    return export


def test_a_location_copied_with_its_times_to_another_disk_is_unchanged_and_the_ledger_names_the_new_files(tmp_path):
    export = exported(tmp_path)
    assert any("committed" in line for line in ingest(tmp_path, export))
    before = figures(tmp_path)
    moved = shutil.copytree(export, tmp_path / "disk2" / "billing")  # copy2: the times kept, new inodes
    shutil.rmtree(export)
    for _ in range(2):  # and again: the move is remembered
        said = ingest(tmp_path, moved)
        assert said and all(": unchanged (delivery" in line for line in said), said
        assert figures(tmp_path) == before
    files = {uri for e in Lake(tmp_path / "lake").ledger() for uri in e.files}
    assert files == {str(moved / key) for key in FILES}
    (moved / "a" / "part-0.csv").write_text((moved / "a" / "part-0.csv").read_text().replace("\n", "\r\n"))  # re-exported
    said = ingest(tmp_path, moved)
    assert any("committed" in line for line in said) and any("unchanged" in line for line in said), said
    assert {p: f[1:3] for p, f in figures(tmp_path).items()} == {p: f[1:3] for p, f in before.items()}


def test_a_location_copied_without_its_times_is_read_again_and_counts_once(tmp_path):
    export = exported(tmp_path)
    ingest(tmp_path, export)
    before = figures(tmp_path)
    copied = shutil.copytree(export, tmp_path / "copy", copy_function=shutil.copy)  # new modification times
    said = ingest(tmp_path, copied)
    assert all("committed" in line for line in said), said
    assert {p: f[1:3] for p, f in figures(tmp_path).items()} == {p: f[1:3] for p, f in before.items()}
    assert {uri for e in Lake(tmp_path / "lake").ledger() for uri in e.files} == {str(copied / k) for k in FILES}
