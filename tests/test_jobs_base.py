"""What every job source relies on: Slurm hostlists expanded, job states normalised, MIG
profiles as fractions of a GPU, and the `jobs` table's types."""

from __future__ import annotations

import os
import unicodedata
from datetime import datetime

import duckdb
import pytest

from connectors.hostlist import MAX_HOSTS, expand_hostlist
from connectors.jobs_base import job_file, job_row, jobs_relation, labelled_run, mig_fraction, source_files
from connectors.source_folder import Folder
from service.core.job_states import normal_state
from service.core.errors import DataError


@pytest.mark.parametrize("text, hosts", [
    ("p5-[001-004],p5-010", ["p5-001", "p5-002", "p5-003", "p5-004", "p5-010"]),
    ("gpu-node-01", ["gpu-node-01"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("n[1,3,5-6]", ["n1", "n3", "n5", "n6"]),
    ("rack[1-2]-gpu[01,03]", ["rack1-gpu01", "rack1-gpu03", "rack2-gpu01", "rack2-gpu03"]),
    ("a[1-2],b,c[7]", ["a1", "a2", "b", "c7"]),
    (" p5-001 ", ["p5-001"]),
    ("None assigned", []),
    ("p5-[001-004,010]", ["p5-001", "p5-002", "p5-003", "p5-004", "p5-010"]),
    ("gpu[1-3]-ib", ["gpu1-ib", "gpu2-ib", "gpu3-ib"]),
    ("", []),
])
def test_hostlists_expand_like_slurm(text, hosts):
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize("text, says", [
    ("n[1-", "'[' without ']'"),
    ("n]1[", "']' without '['"),
    ("n[[1]]", "nested '['"),
    ("n[a-b]", "not a list of numbers and ranges"),
    ("n[1-]", "not a list of numbers and ranges"),
    ("n[5-3]", "runs backwards"),
    ("n[1-999999999999]", f"more than {MAX_HOSTS:,} hosts"),
    ("n[1-1000]-g[1-1000]", f"more than {MAX_HOSTS:,} hosts"),
    ("a,,b", "empty or blank host name"),
    ("a b", "empty or blank host name"),
])
def test_bad_hostlists_say_what_is_wrong(text, says):
    with pytest.raises(ValueError, match=says.replace("[", r"\[").replace("]", r"\]")):
        expand_hostlist(text)


@pytest.mark.parametrize("value, state", [
    ("COMPLETED", "COMPLETED"), ("CANCELLED by 0", "CANCELLED"), ("Succeeded", "COMPLETED"),
    ("canceled", "CANCELLED"), ("OOMKilled", "OUT_OF_MEMORY"), ("node_fail", "NODE_FAIL"),
    ("TIMEOUT", "TIMEOUT"), ("PREEMPTED", "PREEMPTED"), ("RUNNING", "RUNNING"), ("", None), ("sleepy", None),
])
def test_states_are_slurms(value, state):
    assert normal_state(value) == state


@pytest.mark.parametrize("resource, fraction", [
    ("nvidia_com_mig_1g_10gb", 1 / 7), ("nvidia_com_mig_3g_40gb", 3 / 7), ("nvidia_com_mig_7g_80gb", 1.0),
    ("nvidia.com/mig-2g.20gb", 2 / 7), ("nvidia_com_mig_1g_10gb_me", 1 / 7), ("nvidia_com_mig_1g_20gb", 1 / 7),
    ("gpu:3g.40gb", 3 / 7), ("gpu:nvidia_a100_3g.39gb", 3 / 7),
    # A30: four compute slices
    ("nvidia_com_mig_1g_6gb", 1 / 4), ("nvidia_com_mig_2g_12gb", 2 / 4), ("nvidia_com_mig_4g_24gb", 1.0),
    ("nvidia_com_gpu", None), ("gpu:h100", None), ("gpu:a100-80gb", None),
])
def test_mig_profiles_are_their_share_of_a_gpu(resource, fraction):
    assert mig_fraction(resource) == fraction


def test_job_rows_have_the_tables_types_and_run_defaults_to_job():
    con = duckdb.connect()
    row = job_row(record_id="c/1#0", job_id="1", scheduler="file", start_time=datetime(2026, 11, 30), gpus=0.5,
                  nodes=["a", "b"], labels={"team": "nlp"}, gpu_util_hourly={datetime(2026, 11, 30): 40.0})
    relation = jobs_relation(con, [row, job_row(record_id="c/2#0", job_id="2", run_id="r")])
    types = dict(zip(relation.columns, map(str, relation.types)))
    assert (types["nodes"], types["labels"], types["gpu_util_hourly"], types["gpus"]) == (
        "VARCHAR[]", "MAP(VARCHAR, VARCHAR)", "MAP(TIMESTAMP, DOUBLE)", "DOUBLE")
    assert relation.order("record_id").project("run_id, nodes, labels['team']").fetchall() == [
        ("1", ["a", "b"], "nlp"), ("r", None, None)]
    with pytest.raises(KeyError, match="not columns of jobs"):
        job_row(job_id="1", gpu=1)


def test_6_a_file_written_again_while_read_fails_and_the_rerun_reads_it(tmp_path):
    path = tmp_path / "sacct.txt"
    path.write_text("first version\n")
    with pytest.raises(DataError) as error, job_file(path, Folder(tmp_path, "inventory[0].path")) as raw:
        raw.read()
        path.write_text("sacct re-run, still writing")  # `sacct ... > sacct.txt` truncates and writes in place
    assert str(error.value).startswith(f"{path}: changed while it was read (14 bytes, then 27)")
    assert "re-run when the job writing it has finished" in str(error.value)
    with job_file(path, Folder(tmp_path, "inventory[0].path")) as raw:
        assert raw.read() == b"sacct re-run, still writing"


def test_6_a_file_written_again_in_place_with_its_size_and_mtime_while_read_fails(tmp_path):
    """The same size within one mtime tick (forced here): only its change time tells."""
    path = tmp_path / "sacct.txt"
    path.write_text("first version\n")
    before = path.stat()
    with pytest.raises(DataError) as error, job_file(path, Folder(tmp_path, "inventory[0].path")) as raw:
        raw.read()
        with open(path, "r+b") as same:
            same.write(b"other")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert str(error.value).startswith(f"{path}: changed while it was read (14 bytes, then 14)")


def test_a_file_replaced_by_rename_while_read_is_read_whole_as_it_was(tmp_path):
    path = tmp_path / "sacct.txt"
    path.write_text("old\n")
    with job_file(path, Folder(tmp_path, "inventory[0].path")) as raw:
        (tmp_path / "new").write_text("new, longer\n")
        (tmp_path / "new").replace(path)
        assert raw.read() == b"old\n"


def test_55_an_unreadable_file_says_permission_denied_and_what_next(tmp_path, monkeypatch):
    import os

    path = tmp_path / "jobs.csv"
    path.write_text("x")
    if os.geteuid():
        path.chmod(0)
    else:  # root reads every file: the OS's refusal, as it comes
        def refuse(self, opened, *args, **kwargs):
            raise PermissionError(13, "Permission denied", str(opened))
        monkeypatch.setattr(Folder, "open", refuse)
    with pytest.raises(DataError) as error, job_file(path, Folder(tmp_path, "inventory[0].path")):
        pass
    assert str(error.value) == (f"{path}: permission denied: the user running spendlake (uid {os.geteuid()}) cannot "
                                "read it — make it readable to that user (chmod/chown, or its group)")


def test_55_a_folder_the_os_refuses_fails_naming_it_instead_of_being_skipped(tmp_path, monkeypatch):
    import os

    (tmp_path / "jobs" / "2026-12").mkdir(parents=True)
    (tmp_path / "jobs" / "2026-11.csv").write_text("x")
    (tmp_path / "jobs" / "2026-12" / "01.csv").write_text("x")
    (tmp_path / "jobs" / ".snapshots").mkdir()
    assert source_files(str(tmp_path / "jobs"), "inventory.x.path") == [
        tmp_path / "jobs" / "2026-11.csv", tmp_path / "jobs" / "2026-12" / "01.csv"]
    scandir = os.scandir

    def refuse(path):  # as the OS answers a user without x/r on the folder (root is never refused)
        if str(path).endswith("2026-12"):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse)
    with pytest.raises(DataError) as error:
        source_files(str(tmp_path / "jobs"), "inventory.x.path")
    assert str(error.value).startswith(f"{tmp_path / 'jobs' / '2026-12'}: permission denied")


@pytest.mark.parametrize("key", [unicodedata.normalize("NFC", "Étape-ID"), unicodedata.normalize("NFD", "ÉTAPE_ID"),
                                 "étape.id ".replace("é", unicodedata.normalize("NFD", "é"))])
def test_a_run_label_key_is_found_however_it_is_composed_or_cased(key):
    """A run label key written composed (`É`, as Kubernetes stores it) where `run_labels` has it typed
    decomposed (NFD, as macOS sends `é`), or the other way round, was no run label: only `.lower()`
    compared them; keys fold as tag keys do (service/core/folding.py), separators still ignored."""
    typed = unicodedata.normalize("NFD", "étape_id")
    assert labelled_run({key: "pretrain-7b", "run": "other"}, [typed, "run"]) == "pretrain-7b"
    assert labelled_run({key: "pretrain-7b"}, [unicodedata.normalize("NFC", "Étape.ID")]) == "pretrain-7b"
    assert labelled_run({key: "pretrain-7b"}, ["etape_id"]) is None  # no accent is another key
