"""A source the running `spendlake serve` still serves (its config edited to rename it, no SIGHUP
yet: service/core/serving.py) is no orphan to forget: `status` says to reload the service first,
naming its pid, and `forget` refuses (exit 3) until the reload."""

from __future__ import annotations

import os
import shutil
import signal
import time

import pytest
from servicekit import start_serve, write_config

from service.core.config import load_config
from service.core.lake import Lake
from service.core.serving import STATE, serving
from tests.test_lake_integrity import SAMPLE, partition, spendlake
from tests.test_service_serve import served

@pytest.mark.slow  # a `spendlake serve` subprocess
def test_a_source_the_running_serve_still_serves_is_not_forgotten_until_it_reloads(tmp_path):
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLE, tmp_path / "export" / SAMPLE.name)

    def declaring(name: str):
        return write_config(tmp_path, {"lake": str(tmp_path / "lake"), "service": {"listen": "127.0.0.1:0"},
                                       "sources": [{"name": name, "kind": "focus", "location": str(tmp_path / "export")}]})

    config = declaring("trey")
    assert spendlake(config, "ingest").exit_code == 0
    proc, _ = start_serve(config)
    try:
        declaring("trey-b")  # renamed in the file; the service still runs the config that names trey
        status = spendlake(config, "status")
        assert status.exit_code == 0, status.output
        assert f"spendlake serve (pid {proc.pid} on " in status.output and f"`kill -HUP {proc.pid}`" in status.output
        assert "forget trey` removes it" not in status.output.split("still serves it")[0]  # was advised at once
        refused = spendlake(config, "forget", "trey", "--yes")
        assert refused.exit_code == 3, refused.output  # was 0: the service's API then read nothing of trey
        assert f"spendlake serve (pid {proc.pid} on " in refused.output and "still serves trey" in refused.output
        assert partition(Lake(tmp_path / "lake")).exists()
        proc.send_signal(signal.SIGHUP)
        served(proc, 2)  # serving the file as it is: trey is an orphan to it too
        assert "`spendlake forget trey` removes it" in spendlake(config, "status").output
        deadline = time.monotonic() + 60
        while "holds the lake" in (gone := spendlake(config, "forget", "trey", "--yes")).output \
                and time.monotonic() < deadline:  # the reloaded service's first ingest holds the lake a moment
            time.sleep(0.5)
        assert gone.exit_code == 0, gone.output
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, "".join(proc.output)



def test_only_the_record_of_the_service_holding_the_lake_is_read(tmp_path):
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLE, tmp_path / "export" / SAMPLE.name)
    path = write_config(tmp_path, {"lake": str(tmp_path / "lake"), "sources": [
        {"name": "trey", "kind": "focus", "location": str(tmp_path / "export")}]})
    assert spendlake(path, "ingest").exit_code == 0
    running = load_config(path)  # what a service started now runs
    path.write_text(path.read_text().replace("name: trey", "name: trey-b"))
    lake = Lake.of(running)
    lake.write_state(STATE, {"holder": "4242 on gone #0", "config": str(path), "sources": ["trey"]})  # it died
    assert "`spendlake forget trey` removes it" in spendlake(path, "status").output
    with serving(lake, running):  # this process as the service, its lock held
        assert f"spendlake serve (pid {os.getpid()} on " in spendlake(path, "status").output
        assert spendlake(path, "forget", "trey", "--yes").exit_code == 3
    assert "`spendlake forget trey` removes it" in spendlake(path, "status").output  # let go: its record is not read


def test_a_reloaded_service_that_could_not_record_its_sources_is_not_read_as_serving_the_old_ones(tmp_path,
                                                                                                   monkeypatch):
    """After SIGHUP the reloaded service takes the lock in the same process (the same holder()); when
    its record could not be written, its predecessor's (declaring trey) was read as its own and forget
    refused a source no longer served (review50 9). The record goes as the lock is let go."""
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLE, tmp_path / "export" / SAMPLE.name)
    path = write_config(tmp_path, {"lake": str(tmp_path / "lake"), "sources": [
        {"name": "trey", "kind": "focus", "location": str(tmp_path / "export")}]})
    assert spendlake(path, "ingest").exit_code == 0
    running = load_config(path)  # what the service started on
    path.write_text(path.read_text().replace("name: trey", "name: trey-b"))
    reloaded = load_config(path)  # what SIGHUP reads
    lake = Lake.of(running)
    with serving(lake, running):
        assert spendlake(path, "forget", "trey", "--yes").exit_code == 3

    def full(name, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Lake, "write_state", lambda self, name, data: full(name, data) if name == STATE else None)
    with serving(Lake.of(reloaded), reloaded):  # the successor, its record not written
        monkeypatch.undo()
        assert "still serves" not in spendlake(path, "status").output
        assert spendlake(path, "forget", "trey", "--yes").exit_code == 0
    assert not lake.state_file(STATE).exists()  # let go: nothing left to read as a service's
