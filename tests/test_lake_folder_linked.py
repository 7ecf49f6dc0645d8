"""A lake folder moved to another disk and linked back (break54's F4): DuckDB reads only inside the
lake (its sandbox) and refused the file with a Permission Error, which every command called damage,
"delete it and run `spendlake ingest`": following it deleted good committed data, and `verify`
counted the partition `altered`. Now the link is named, with its target and the fix, exit 3."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.errors import DataError
from tests.attribution_helpers import add_jobs, declared_sources, line, make_lake
from tests.test_clusters_allocation import job

PERIOD = "costs/source=cur/billing_period=2026-11"
SNAPSHOT = "jobs/source=slurm/snapshot_date=2026-11-03"


def lake_and_config(tmp_path):
    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "10", tags={"team": "nlp"})])
    add_jobs(lake, [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"], run_id="r1")])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake, inventory=True),
                                    "attribution": {"clusters": {}}}))
    return lake, path


def moved_and_linked(lake, folder: str):
    """`folder` of the lake moved to another place and a link to it left in its stead."""
    link = lake.root / folder
    target = lake.root.parent / "other-disk" / folder.replace("/", "_")
    target.parent.mkdir()
    link.rename(target)
    link.symlink_to(target)
    return link, target


def run(path, *args):
    return CliRunner().invoke(cli, ["--config", str(path), *args])


@pytest.mark.parametrize("folder", ["costs", PERIOD, "jobs", SNAPSHOT])
def test_a_folder_linked_out_of_the_lake_is_named_by_every_command_never_called_damaged(tmp_path, folder):
    lake, path = lake_and_config(tmp_path)
    link, target = moved_and_linked(lake, folder)
    for command in [("attribute", "--since", "2026-11-01", "--until", "2026-11-05", "--by", "team"),
                    ("runs", "--since", "2026-11-01", "--until", "2026-11-05"), ("attribute", "--check"),
                    ("status",), ("verify",)]:
        result = run(path, *command)
        said = " ".join(result.output.split())
        assert result.exit_code == 3, (command, result.output)
        assert (f"{link} is a symbolic link to {target}, outside the lake: DuckDB reads only inside the lake "
                "(its sandbox) — move the folder back, or mount the disk there") in said, (command, said)
        assert "damaged" not in said and "altered" not in said, (command, said)
    assert [f.name for f in target.rglob("*.parquet")]  # nothing deleted


def test_verify_records_no_damage_for_a_linked_period(tmp_path):
    lake, path = lake_and_config(tmp_path)
    moved_and_linked(lake, PERIOD)
    assert run(path, "verify").exit_code == 3
    assert not lake.read_state("verify").get("problems")


def test_a_folder_linked_inside_the_lake_is_read_as_before(tmp_path):
    lake, path = lake_and_config(tmp_path)
    link = lake.root / PERIOD
    moved = lake.root / "_moved"
    moved.mkdir()
    link.rename(moved / "period")
    link.symlink_to(moved / "period")
    result = run(path, "attribute", "--since", "2026-11-01", "--until", "2026-11-05", "--by", "team")
    assert result.exit_code == 0 and "nlp" in result.output, result.output
    for command in (("attribute", "--check"), ("verify",)):
        result = run(path, *command)
        assert result.exit_code == 0 and "symbolic link" not in result.output, (command, result.output)


def test_a_staging_area_linked_out_of_the_lake_is_named_and_its_files_kept(tmp_path):
    lake, _ = lake_and_config(tmp_path)
    lake.staging.mkdir(exist_ok=True)
    (lake.staging / "left.tmp").write_text("x")
    link, target = moved_and_linked(lake, "_staging")
    with pytest.raises(DataError) as raised:
        lake.clean_staging()
    assert str(raised.value).startswith(f"{link} is a symbolic link to {target}, outside the lake: ")
    assert str(raised.value).endswith("— remove the link (spendlake makes the folder again), or mount the disk there")
    assert (target / "left.tmp").exists() and link.is_symlink()


def test_a_partition_file_linked_out_of_the_lake_is_named_not_called_damaged(tmp_path):
    lake, path = lake_and_config(tmp_path)
    link, target = moved_and_linked(lake, f"{PERIOD}/data.parquet")
    result = run(path, "attribute", "--since", "2026-11-01", "--until", "2026-11-05", "--by", "team")
    said = " ".join(result.output.split())
    assert result.exit_code == 3 and "damaged" not in said, said
    assert (f"{link} is a symbolic link to {target}, outside the lake: DuckDB reads only inside the lake (its sandbox) "
            "— copy the file in place of the link") in said


def test_the_api_names_a_period_folder_linked_out_of_the_lake_in_its_503(tmp_path):
    from service.core.config import load_config
    from tests.test_service_http import api_for

    lake, path = lake_and_config(tmp_path)
    moved_and_linked(lake, SNAPSHOT)  # past the partition checks: the sandbox's refusal, named by the API
    token = "a-token-of-16-characters-at-least"
    answer = api_for(load_config(path), token=token).handle(
        "/api/v1/runs", {"since": ["2026-11-01"], "until": ["2026-11-05"]}, f"Bearer {token}")
    error = json.loads(answer.body)["error"]
    assert answer.status == 503 and error["where"] == f"the lake's {SNAPSHOT}", error
    assert error["message"].startswith(f"the lake's {SNAPSHOT} is a symbolic link to "), error
    assert error["hint"] == "move the folder back, or mount the disk there", error
