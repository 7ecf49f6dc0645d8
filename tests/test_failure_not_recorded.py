"""A source's failure the `sources` state could not record (break47 #12: a full disk while an
ingest writes `_state/sources.json`) is still counted where `status` and the service read it:
the CLI ingest's count lived in its own memory and died with it, so the source read `not
ingested`, failures_total 0, while every run failed. The failure is marked in the lake
(service/core/failure_marks.py: a full disk still makes a file's name) and counted once."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from conftest import REPO, SAMPLES, state_refused
from service.cli.main import cli
from service.core import failure_marks, staging
from service.core.config import load_config
from service.core.lake import Lake
from service.ingest import freshness
from service.ingest.freshness import NO_ERROR
from service.serve.families import source_families

FOCUS = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"


@pytest.fixture
def config(tmp_path):
    (tmp_path / "export").mkdir()
    shutil.copy(FOCUS, tmp_path / "export" / "part-1.csv")
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "focus", "kind": "focus", "location": str(tmp_path / "export")}]}))
    return path


def invoke(config, *args):
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def source_row(config) -> dict:
    """`spendlake status`'s row of the source, in a process of its own, as after the ingest's."""
    command = [sys.executable, "-m", "service", "--config", str(config), "status", "--sources", "--format", "json"]
    result = subprocess.run(command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                            text=True, timeout=120)
    [row] = [row for row in json.loads(result.stdout) if row.get("source") == "focus" and "state" in row]
    return row


def failures_metric(config, monkeypatch) -> float:
    """spendlake_source_failures_total of the service, another process than the ingest's."""
    monkeypatch.setattr(freshness, "_UNRECORDED", {})
    [_, _, failures] = source_families(load_config(str(config)), Lake(config.parent / "lake"))
    return {s.labels["source"]: s.value for s in failures.samples if s.name.endswith("_total")}["focus"]


def fail_on_a_full_disk(config, monkeypatch, room_for_the_error: bool):
    """An ingest whose staged file and whose `sources` record both meet a full disk."""
    real = staging.pq.ParquetWriter.__init__
    with monkeypatch.context() as full, state_refused("sources", errno.ENOSPC, "No space left on device"):
        full.setattr(staging.pq.ParquetWriter, "__init__",
                     lambda self, path, *args, **kw: real(self, "/dev/full", *args, **kw))
        if not room_for_the_error:
            def no_room(fd, data):
                raise OSError(errno.ENOSPC, "No space left on device")
            full.setattr(failure_marks, "_write_all", no_room)
        return invoke(config, "ingest")


@pytest.mark.parametrize("room_for_the_error", [True, False])
def test_11_a_failure_a_full_disk_kept_out_of_the_state_is_counted_by_status_and_the_service(
        config, monkeypatch, room_for_the_error):
    result = fail_on_a_full_disk(config, monkeypatch, room_for_the_error)
    assert result.exit_code == 3 and "focus (periods from data): FAILED" in result.output, result.output
    [mark] = failure_marks.marks(config.parent / "lake")
    error = result.output.splitlines()[-1]
    assert error.endswith(f"this run committed nothing; the source's failure is counted from {mark.path} (`status`, "
                          "the service) until its state can be written"), error  # not 'what was committed above'
    row = source_row(config)  # main: `not ingested`, failures_total 0, no error
    assert (row["state"], row["failures_total"]) == ("failing", 1), row
    if room_for_the_error:
        assert "disk full" in row["last_error"] and "focus" in mark.path.name
    else:
        assert row["last_error"] == NO_ERROR and mark.path.stat().st_size == 0
    assert failures_metric(config, monkeypatch) == 1  # spendlake_source_failures_total

    rerun = invoke(config, "ingest")  # the disk freed: the state counts the failure, and the mark goes
    assert rerun.exit_code == 0 and "committed" in rerun.output, rerun.output
    record = json.loads((config.parent / "lake" / "_state" / "sources.json").read_text())["focus"]
    assert record["failures_total"] == 1 and record["last_run_failed"] is False
    assert record["unrecorded_counted"] == [mark.path.name] and not failure_marks.marks(config.parent / "lake")
    row = source_row(config)
    assert row["failures_total"] == 1 and row["last_error"] is None and row["state"] != "failing", row


def test_a_mark_left_after_the_state_counted_it_is_counted_once(config, monkeypatch):
    """A reader between the state's write and the mark's removal, or a mark that could not be
    removed, sees both: the record names the marks it counts."""
    fail_on_a_full_disk(config, monkeypatch, True)
    with monkeypatch.context() as kept:
        kept.setattr(failure_marks, "remove", lambda found: None)
        assert invoke(config, "ingest").exit_code == 0
    [mark] = failure_marks.marks(config.parent / "lake")
    record = json.loads((config.parent / "lake" / "_state" / "sources.json").read_text())["focus"]
    assert record["unrecorded_counted"] == [mark.path.name] and record["failures_total"] == 1
    assert source_row(config)["failures_total"] == 1 and failures_metric(config, monkeypatch) == 1  # not 2
    for _ in range(2):  # the next write removes it, the one after its name: counted once throughout
        assert invoke(config, "ingest").exit_code == 0
        assert not failure_marks.marks(config.parent / "lake") and source_row(config)["failures_total"] == 1
    record = json.loads((config.parent / "lake" / "_state" / "sources.json").read_text())["focus"]
    assert record["failures_total"] == 1 and "unrecorded_counted" not in record


def test_forget_removes_the_sources_marks(config):
    assert invoke(config, "ingest").exit_code == 0
    failure_marks.leave(config.parent / "lake", "focus", "2026-11-30T05:00:00Z", "disk full")
    config.write_text(config.read_text().replace("name: focus", "name: renamed"))
    assert invoke(config, "forget", "focus", "--yes").exit_code == 0
    assert not failure_marks.marks(config.parent / "lake")


def test_the_marks_folder_is_made_while_the_disk_has_room(config, monkeypatch):
    """A new folder takes a data block a full disk may not have (a name in an existing one takes
    none): a run that records its state makes the marks' folder, so a later full disk's first
    mark needs no new folder."""
    assert invoke(config, "ingest").exit_code == 0
    lake = config.parent / "lake"
    assert failure_marks.folder(lake).is_dir() and not failure_marks.marks(lake)
    export = config.parent / "export" / "part-1.csv"
    export.write_text("".join(export.read_text().splitlines(keepends=True)[:-1]))  # a new delivery
    real_mkdir = failure_marks.Path.mkdir

    def full(self, *args, **kwargs):  # the marks' folder, were it still to be made, finds no block
        if self == failure_marks.folder(lake) and not self.exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(failure_marks.Path, "mkdir", full)
    result = fail_on_a_full_disk(config, monkeypatch, True)
    assert result.exit_code == 3, result.output
    assert [mark.source for mark in failure_marks.marks(lake)] == ["focus"], result.output


def test_a_state_in_place_whose_folder_could_not_be_synced_counts_the_runs_failure_once(config, monkeypatch):
    """write_json_atomic renames the state into place, then syncs its folder: that sync failing (EIO)
    raised an OSError as a write that never happened does, so the failed run left a mark beside the
    state that already counted it, failures_total 2 for one failure. Now the state in place is its
    record (files.NotSynced), no mark is left, and the error says the state is written."""
    from service.core import files

    real_sync = files.fsync_path

    def sync(path):
        if path.name == "_state":
            raise OSError(errno.EIO, "Input/output error")
        real_sync(path)

    real = staging.pq.ParquetWriter.__init__
    with monkeypatch.context() as broken:
        broken.setattr(files, "fsync_path", sync)
        broken.setattr(staging.pq.ParquetWriter, "__init__",
                       lambda self, path, *args, **kw: real(self, "/dev/full", *args, **kw))
        result = invoke(config, "ingest")
    assert result.exit_code == 3 and "focus (periods from data): FAILED" in result.output, result.output
    assert result.output.splitlines()[-1].endswith(
        "this run committed nothing; the source's state is written, its folder not synced (a crash may lose this "
        "run's record; the marks it counts stay until one is synced)"), result.output
    assert not failure_marks.marks(config.parent / "lake")  # was a mark of the failure the state counts
    record = json.loads((config.parent / "lake" / "_state" / "sources.json").read_text())["focus"]
    assert record["failures_total"] == 1 and "disk full" in record["last_error"]
    assert source_row(config)["failures_total"] == 1 and failures_metric(config, monkeypatch) == 1  # was 2


def test_a_reader_across_the_states_write_and_the_marks_removal_never_sees_the_count_dip(config, monkeypatch):
    """A reader took the state (not yet counting a mark), then the next run wrote the state counting
    it and removed it, then the reader listed the marks (none): failures_total 0 once between 1 and
    1. The marks are read first: a mark removed after is in any state read after."""
    fail_on_a_full_disk(config, monkeypatch, True)
    lake = Lake(config.parent / "lake")
    assert len(failure_marks.marks(lake.root)) == 1 and freshness.sources_state(lake)["focus"]["failures_total"] == 1
    writer: list = []

    def between(read):
        def reading(*args, **kwargs):
            found = read(*args, **kwargs)
            if not writer:  # the reader's first read: the next run writes the state and removes the mark
                writer.append("running")
                writer[0] = invoke(config, "ingest")
            return found
        return reading

    with monkeypatch.context() as interleaved:
        interleaved.setattr(failure_marks, "marks", between(failure_marks.marks))
        interleaved.setattr(Lake, "read_state", between(Lake.read_state))
        assert freshness.sources_state(lake)["focus"]["failures_total"] == 1  # was 0
    assert writer[0].exit_code == 0 and not failure_marks.marks(lake.root)
    assert freshness.sources_state(lake)["focus"]["failures_total"] == 1
