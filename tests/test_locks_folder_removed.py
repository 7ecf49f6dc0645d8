"""`rm -rf <lake>/_locks` while an ingest holds the lock (RELIABILITY 12, 25): the lock file and its
`.held/` folder both gone, a second ingest made and locked new ones and committed, and the first
then committed over it. The first holder checks, before it publishes its ledger or a snapshot
record, that its lock is still the one in place; it is not: it publishes nothing and says so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.errors import LakeBusyError
from service.core.lake import Lake
from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"
# an ingest that stops before its commit until the file argv[2] exists
PAUSED_INGEST = """
import pathlib, sys, time
from service.core.config import load_config
from service.core.lake import Lake
from service.ingest.billing import ingest

go, announce = pathlib.Path(sys.argv[2]), Lake.announce
def paused(self, entries):
    print("staged", flush=True)
    while not go.exists():
        time.sleep(0.02)
    return announce(self, entries)
Lake.announce = paused
result = ingest(load_config(sys.argv[1]))
print("\\n".join(line for outcome in result.outcomes for line in outcome.lines()), flush=True)
"""


def paused_ingest(tmp_path, script):
    """A FOCUS sample's config, and an ingest of it by `script` in a process of its own, paused."""
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLE, tmp_path / "export")
    config = tmp_path / "spendlake.yaml"
    source = {"name": "f", "kind": "focus", "location": str(tmp_path / "export")}
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [source]}))
    return config, subprocess.Popen([sys.executable, "-c", script, str(config), str(tmp_path / "go")],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_an_ingest_whose_locks_folder_was_removed_while_it_ran_publishes_nothing_over_the_second_one(tmp_path):
    config, first = paused_ingest(tmp_path, PAUSED_INGEST)
    try:
        assert first.stdout.readline().strip() == "staged"
        shutil.rmtree(tmp_path / "lake" / "_locks")  # taken for a stale lock
        second = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
        assert second.exit_code == 0, second.output  # let in: the first's locks are gone
        ledger = Lake(tmp_path / "lake").ledger_file.read_bytes()  # the second's commit
        (tmp_path / "go").touch()
        said, _ = first.communicate(timeout=60)
    finally:
        first.kill()
    assert "lock this process held was removed or replaced while held" in said, said
    assert "nothing of this change is published" in said and "_locks" in said, said
    assert Lake(tmp_path / "lake").ledger_file.read_bytes() == ledger  # nothing of the first over it


# an ingest that stops after its announcement, before its first data file is placed, until argv[2] exists
PAUSED_AFTER_ANNOUNCING = """
import pathlib, sys, time
from service.core import commit
from service.core.config import load_config
from service.ingest.billing import ingest

go, install = pathlib.Path(sys.argv[2]), commit.install
def paused(staged, target):
    if not go.exists():
        print("announced", flush=True)
    while not go.exists():
        time.sleep(0.02)
    return install(staged, target)
commit.install = paused
result = ingest(load_config(sys.argv[1]))
"""


def test_an_ingest_whose_locks_folder_was_removed_after_its_announcement_places_no_data_file_over_the_second_one(tmp_path):
    """Removed between the first's announcement and its placing (review44 feared the first would put
    its partitions over the second's, the lock being checked only before the ledger): the second
    writer starts the staging area afresh, so the first has no staged file left to place, and its
    settling is refused by the lock check: the second's partitions and ledger stand, verified."""
    config, first = paused_ingest(tmp_path, PAUSED_AFTER_ANNOUNCING)
    try:
        assert first.stdout.readline().strip() == "announced"
        shutil.rmtree(tmp_path / "lake" / "_locks")  # taken for a stale lock
        second = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
        assert second.exit_code == 0, second.output
        placed = partitions(tmp_path / "lake")  # the second's
        (tmp_path / "go").touch()
        said, _ = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode != 0 and "nothing of this change is published" in said, said
    assert partitions(tmp_path / "lake") == placed  # none replaced by the first's files
    verified = CliRunner().invoke(cli, ["--config", str(config), "verify"])
    assert verified.exit_code == 0, verified.output


def partitions(lake):
    return {path: (path.stat().st_ino, path.read_bytes()) for path in lake.glob("costs/source=f/*/data.parquet")}


@pytest.mark.parametrize("removed", ["the lock file", "the folder", "both"])
def test_a_holder_publishes_while_one_of_its_lock_file_and_folder_is_in_place(tmp_path, removed):
    from service.core.files import write_json_atomic

    lake = Lake(tmp_path / "lake")
    with lake.lock("ingest"):
        if removed != "the folder":
            (lake.locks / "ingest.lock").unlink()
        if removed != "the lock file":
            shutil.rmtree(lake.locks / "ingest.held")
        if removed == "both":
            with pytest.raises(LakeBusyError, match=r"ingest\.lock: the lake's ingest lock .* removed or replaced"):
                write_json_atomic(lake.ledger_file, {"entries": []})
            assert not lake.ledger_file.exists()
        else:  # no second writer can hold it beside this one: published
            write_json_atomic(lake.ledger_file, {"entries": []})
    write_json_atomic(lake.ledger_file, {"entries": []})  # let go: nothing to check
    write_json_atomic(tmp_path / "elsewhere.json", {})


def test_a_serve_whose_service_lock_was_removed_still_publishes_under_the_writers_lock_it_takes(tmp_path):
    from service.core.files import write_json_atomic

    lake = Lake(tmp_path / "lake")
    with lake.lock("service"):
        shutil.rmtree(lake.locks)
        with lake.lock("ingest"):  # its next job
            write_json_atomic(lake.ledger_file, {"entries": []})
    assert lake.ledger_file.exists()
