"""A lock file removed while held (an operator clearing what looks like a stale lock, a cleaner
of old files) is still the lake's lock (RELIABILITY 12, 25): a second writer that made the file
again was let in beside the first, and its start-up cleaning removed the first one's staged
files, so the first ingest failed every period with 'no such file or directory'."""

from __future__ import annotations

import os
import shutil
import threading

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.errors import DataError, LakeBusyError
from service.core.lake import Lake
from tests.conftest import SAMPLES

SAMPLE = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"


@pytest.mark.parametrize("name", ["ingest", "service", "findings"])
def test_a_lock_whose_file_was_removed_while_held_still_refuses_a_second_holder(tmp_path, name):
    lake = Lake(tmp_path / "lake")
    with lake.lock(name):
        (lake.locks / f"{name}.lock").unlink()
        with pytest.raises(LakeBusyError, match=f"another spendlake {name} holds the lake.*removed"):
            with lake.lock(name):
                pass
    with lake.lock(name):  # once the holder let go, the lock is free again
        pass


def test_an_ingest_after_the_lock_file_of_a_running_one_was_removed_is_refused_and_leaves_its_stage(tmp_path):
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLE, tmp_path / "export")
    config = tmp_path / "spendlake.yaml"
    source = {"name": "f", "kind": "focus", "location": str(tmp_path / "export")}
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [source]}))
    lake = Lake(tmp_path / "lake")
    with lake.lock("ingest"):  # an ingest staging its deliveries
        staged = lake.root / "_staging" / "costs-0123456789abcdef"
        staged.mkdir(parents=True)
        (lake.locks / "ingest.lock").unlink()
        result = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
        assert result.exit_code == 3 and "holds the lake" in result.output, result.output
        assert staged.is_dir() and not lake.ledger()
    assert CliRunner().invoke(cli, ["--config", str(config), "ingest"]).exit_code == 0


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_readers_see_a_writer_whose_lock_file_was_removed_or_replaced_and_wait_for_its_commit(tmp_path, how):
    from service.core import locks, snapshot
    from service.core.ledger import LedgerState

    lake = Lake(tmp_path / "lake")
    assert lake.lock_holder("ingest") is None
    with lake.lock("ingest"):
        (lake.locks / "ingest.lock").unlink()
        if how == "replaced":
            (lake.locks / "ingest.lock").write_text("4242 on a-host-long-gone\n")
        assert lake.writing("ingest")
        in_flight = LedgerState(entries=(), pending=(), pending_by=locks.holder(), stamp=(0,))
        assert snapshot._committing(lake, in_flight)  # its pending entries are a commit readers wait for
    assert lake.lock_holder("ingest") is None and not lake.writing("ingest")


def test_a_reader_looking_at_the_lock_as_a_writer_takes_it_does_not_refuse_the_writer(tmp_path):
    import fcntl
    import os
    import threading

    lake = Lake(tmp_path / "lake")
    with lake.lock("ingest"):
        pass
    looking = os.open(lake.locks / "ingest.held", os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(looking, fcntl.LOCK_SH)  # as lock_holder holds it, for a moment
    threading.Timer(0.05, os.close, [looking]).start()
    with lake.lock("ingest"):
        assert lake.writing("ingest")


def test_a_held_guard_that_is_a_file_is_refused_naming_it_not_silently_skipped(tmp_path):
    lake = Lake(tmp_path / "lake")
    lake.locks.mkdir(parents=True)
    (lake.locks / "ingest.held").write_text("")  # a file where the writer locks a folder
    with pytest.raises(DataError, match=r"ingest\.held is a file, not the folder.*rm .*ingest\.held") as caught:
        with lake.lock("ingest"):
            pass
    assert caught.value.exit_code == 3
    (lake.locks / "ingest.held").unlink()
    with lake.lock("ingest"):  # the folder is made again and guards the lock
        (lake.locks / "ingest.lock").unlink()
        with pytest.raises(LakeBusyError):
            with lake.lock("ingest"):
                pass


def test_a_reader_goes_on_at_once_past_a_dead_ingests_pending_entries_while_a_writer_with_a_removed_lock_file_runs(
        tmp_path, monkeypatch):
    """An ingest killed mid-commit left pending entries; a `spendlake rollup` then holds the lock and
    its lock file was removed: the holder was not known, so taken for the entries' writer, and every
    reader waited 10 s; it is named in `_locks/ingest.held/` too, another than the entries' writer."""
    import json
    import subprocess
    import sys

    from service.core import locks, snapshot
    from tests.test_lake import rows_relation

    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    monkeypatch.setattr(Lake, "record", lambda self, entries: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        lake.commit_costs(con, rows_relation(con, [("2026-10-01", "USD", "10.5", "INV1")]),
                          source="cur", delivery_id="d1", periods=None)
    monkeypatch.undo()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ledger = json.loads(lake.ledger_file.read_text())
    ledger["pending_by"] = ledger["pending_by"].replace(str(os.getpid()), str(dead.pid), 1)
    lake.ledger_file.write_text(json.dumps(ledger))
    reads = []
    with lake.lock("ingest"):
        (lake.locks / "ingest.lock").unlink()
        assert lake.lock_holder("ingest") == locks.holder()
        assert not snapshot._committing(lake, lake.ledger_state())
        assert snapshot.read_consistently(lake, lambda snap: reads.append(snap.in_flight)) is None
    assert reads == [False]
    with lake.lock("ingest"):  # its name removed from the folder too: not known, it may be the one
        (lake.locks / "ingest.lock").unlink()
        (lake.locks / "ingest.held" / "holder").unlink()
        assert lake.lock_holder("ingest") == "" and snapshot._committing(lake, lake.ledger_state())


@pytest.mark.parametrize("planted", ["ingest.lock", "ingest.held", "ingest.held/holder"])
def test_a_symbolic_link_planted_for_a_lock_file_is_refused_naming_it_and_the_file_it_points_to_is_untouched(
        tmp_path, planted):
    """The lock file and its holder were opened following links: a link planted in `_locks/` had
    ingest and verify truncate the file it pointed to, outside the lake, and write the holder in it."""
    lake = Lake(tmp_path / "lake")
    (lake.locks / "ingest.held").mkdir(parents=True)
    victim = tmp_path / ("victim_dir" if planted == "ingest.held" else "victim")
    victim.mkdir() if planted == "ingest.held" else victim.write_text("precious\n")
    if planted == "ingest.held":
        (lake.locks / "ingest.held").rmdir()
    (lake.locks / planted).symlink_to(victim)
    with pytest.raises(DataError, match=rf"{planted} is a symbolic link \(to {victim}\).*rm ") as caught:
        with lake.lock("ingest"):
            pass
    assert caught.value.exit_code == 3
    assert (sorted(p.name for p in victim.iterdir()) == [] if victim.is_dir() else victim.read_text() == "precious\n")
    (lake.locks / planted).unlink()
    with lake.lock("ingest"):  # the file made again, a lock as before
        pass


@pytest.mark.parametrize("planted", ["link", "fifo"])
def test_a_reader_asking_who_holds_the_lake_opens_no_link_or_fifo_planted_for_the_holder(tmp_path, planted):
    """`lock_holder` read `<name>.held/holder` following links, where the lock opens it with O_NOFOLLOW:
    a link planted there had every reader looking for a commit in flight read the file it pointed to
    (its text named as the holder), and a FIFO held the reader for good. Both read as unwritten ("")."""
    lake = Lake(tmp_path / "lake")
    victim = tmp_path / "victim"
    victim.write_text("secret\n")
    with lake.lock("ingest"):
        (lake.locks / "ingest.lock").unlink()  # the folder tells who holds it
        holder = lake.locks / "ingest.held" / "holder"
        holder.unlink()
        holder.symlink_to(victim) if planted == "link" else os.mkfifo(holder)
        found = []
        reader = threading.Thread(target=lambda: found.append(lake.lock_holder("ingest")), daemon=True)
        reader.start()
        reader.join(10)
        if reader.is_alive():  # let the blocked reader go before failing
            os.close(os.open(holder, os.O_WRONLY | os.O_NONBLOCK))
        assert found == [""]
    assert victim.read_text() == "secret\n"


def test_a_symbolic_link_for_the_ingest_lock_fails_ingest_with_exit_3_naming_it(tmp_path):
    victim = tmp_path / "victim_lock"
    victim.write_text("precious\n")
    (tmp_path / "spendlake.yaml").write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "focus", "kind": "focus", "location": str(SAMPLE)}]}))
    (tmp_path / "lake" / "_locks").mkdir(parents=True)
    (tmp_path / "lake" / "_locks" / "ingest.lock").symlink_to(victim)
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "ingest"])
    assert result.exit_code == 3 and "ingest.lock is a symbolic link" in result.output, result.output
    assert victim.read_text() == "precious\n"
