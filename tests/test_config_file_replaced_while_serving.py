"""RELIABILITY 43: the config file of a running `serve` removed or replaced under it. The running
config goes on (its jobs run, nothing ends in a traceback) and the log says the file does not
load rather than asking for a SIGHUP that would be refused."""

from __future__ import annotations

import os

from service.core.config import load_config
from service.core.lake import Lake
from service.serve.config_watch import BACK_MESSAGE, GONE_MESSAGE, ConfigWatch, as_read
from service.serve.service import verify_lake


def test_a_config_file_turned_into_a_symlink_loop_leaves_the_running_configs_jobs_running(tmp_path):
    """The verify, daily and ingest jobs each open Lake.of(config), which resolved the config's
    path: a loop raised "RuntimeError: Symlink loop" and every job failed with a traceback."""
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(f"lake: {tmp_path / 'lake'}\n")
    config = load_config(config_file)
    config_file.unlink()
    os.symlink(tmp_path / "other.yaml", config_file)
    os.symlink(config_file, tmp_path / "other.yaml")

    lake = Lake.of(config)
    assert lake.config_file == config_file and lake.root == tmp_path / "lake"
    verify_lake(config)  # an empty lake: nothing damaged, the job succeeds


def test_a_removed_config_file_is_said_gone_and_said_back_once_put_back(tmp_path):
    """`rm spendlake.yaml` under a running service logged "config changed on disk; send SIGHUP
    to load it", and that SIGHUP was refused ("cannot read the config"); then the CLI's "config file
    not found — pass --config PATH or set $SPENDLAKE_CONFIG" (it was passed), and nothing once put back."""
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(f"lake: {tmp_path / 'lake'}\n")
    said = []
    watch = ConfigWatch(config_file, said.append, as_read(config_file), validate=lambda: load_config(config_file))
    config_file.unlink()
    assert watch.check() and said == [f"{GONE_MESSAGE} ({config_file})"]
    assert watch.check() and len(said) == 1  # said once
    config_file.write_text(f"lake: {tmp_path / 'lake'}\n")  # put back as it was: the log says it reads again
    assert not watch.check() and said[1:] == [f"{BACK_MESSAGE} ({config_file})"]
