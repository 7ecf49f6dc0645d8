"""A source's errors name it as its config errors do: by its place in the file's list
(`sources[0].location`, `inventory[1].columns`), the path a user finds in the YAML, whether the
config is refused or a run fails on what the entry points at."""

from __future__ import annotations

import yaml
from click.testing import CliRunner

from service.cli.main import cli


def written(tmp_path, data: dict) -> str:
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), **data}))
    return str(path)


def inventory(tmp_path, columns: dict) -> list[dict]:
    (tmp_path / "jobs").mkdir(exist_ok=True)
    (tmp_path / "jobs" / "a.csv").write_text("job_id,start_time,end_time,gpus\n1,2026-11-01T00:00:00,"
                                             "2026-11-01T01:00:00,8\n")
    return [{"name": "tags-prod", "kind": "aws-tags", "path": str(tmp_path / "nope")},
            {"name": "slurm", "kind": "jobs-file", "path": str(tmp_path / "jobs"), "columns": columns}]


def test_an_inventory_sources_run_errors_name_its_entry_as_its_config_errors_do(tmp_path):
    refused = CliRunner().invoke(cli, ["--config", written(tmp_path, {"inventory": inventory(tmp_path, {
        "nope": "job_idx"})}), "inventory"])
    assert refused.exit_code == 2 and "inventory[1].columns.nope: 'job_idx' is not a jobs-file column" in \
        refused.output, refused.output
    failed = CliRunner().invoke(cli, ["--config", written(tmp_path, {"inventory": inventory(tmp_path, {
        "nope": "job_id"})}), "inventory"])
    assert failed.exit_code == 3, failed.output
    assert "tags-prod (aws-tags): FAILED: " in failed.output and "no such file or directory — check inventory[0].path" \
        in failed.output, failed.output
    assert "inventory[1].columns maps 'nope' to 'job_id', and the file has no column 'nope'" in failed.output
    assert "fix the name in inventory[1].columns" in failed.output and "inventory.slurm" not in failed.output


def test_a_billing_sources_run_errors_name_its_entry_as_its_config_errors_do(tmp_path):
    sources = [{"name": "cur-prod", "kind": "aws-cur", "location": str(tmp_path / "nocur")}]
    failed = CliRunner().invoke(cli, ["--config", written(tmp_path, {"sources": sources}), "ingest"])
    assert failed.exit_code == 3 and "no such file or directory — check sources[0].location" in failed.output, \
        failed.output
