"""A symbolic link in a source's local folder whose target lies outside it is refused before it
is opened, in the words DuckDB's sandbox gives a billing file (break53 item 1): the job sources'
and inventory sources' listings, and the manifests a billing source reads in Python. Followed,
anyone who can drop a file in a shared export folder could have the service read any file
(`/etc/passwd`), and jobs-file echoed its first line into the stored error. A jobs-file error
lists the file's column names capped in count and length, never its header line whole."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from connectors.inventory_base import local_files
from connectors.jobs_base import source_files
from connectors.storage import Storage
from service.cli.main import cli
from service.core.config import SourceConfig, parse_config
from service.core.errors import SourceError
from service.ingest.inventory import run_inventory

NOW = datetime(2026, 12, 1, 6)
SECRET = "secret-db-password=Hunter2xyz"
JOBS = "job_id,start_time,end_time,gpus\n1,2026-11-30T00:00:00Z,2026-11-30T01:00:00Z,8\n"
REFUSED = "is a symbolic link to {target}, outside the directories spendlake may read for this source"


@pytest.fixture
def private(tmp_path) -> Path:
    """A file outside every source's folder, the service's to read alone."""
    path = tmp_path / "private.txt"
    path.write_text(f"{SECRET}\n")
    path.chmod(0o600)
    return path


def jobs_folder(tmp_path: Path, private: Path) -> Path:
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "jobs.csv").write_text(JOBS)
    (folder / "a.csv").symlink_to(private)
    return folder


def test_a_jobs_file_link_out_of_its_folder_fails_naming_it_and_never_shows_the_target(tmp_path, private):
    folder = jobs_folder(tmp_path, private)
    (tmp_path / "spendlake.yaml").write_text(json.dumps({
        "lake": str(tmp_path / "lake"),
        "inventory": [{"name": "jf", "kind": "jobs-file", "path": str(folder), "cluster": "c1"}]}))
    config = ["--config", str(tmp_path / "spendlake.yaml")]
    result = CliRunner().invoke(cli, [*config, "inventory", "--source", "jf"])
    assert result.exit_code == 3, result.output
    said = " ".join(result.output.split())
    assert f"{folder / 'a.csv'} {REFUSED.format(target=private)}" in said, said
    assert "point inventory[0].path at where it lives" in said
    status = CliRunner().invoke(cli, [*config, "status", "--sources", "--format", "json"])
    assert "outside the directories spendlake may read" in status.output and "Hunter2" not in status.output
    assert "Hunter2" not in result.output


@pytest.mark.parametrize("listing", [source_files, local_files], ids=["jobs sources", "inventory sources"])
def test_a_listing_refuses_a_link_out_of_the_folder_and_reads_one_inside_it(tmp_path, private, listing):
    folder = jobs_folder(tmp_path, private)
    with pytest.raises(SourceError) as refused:
        listing(str(folder), "inventory[0].path")
    assert REFUSED.format(target=private) in str(refused.value)
    (folder / "a.csv").unlink()
    (folder / "sub").mkdir()
    (folder / "sub" / "same.csv").symlink_to(folder / "jobs.csv")  # a link within the folder is its file
    assert listing(str(folder), "inventory[0].path") == [folder / "jobs.csv", folder / "sub" / "same.csv"]


def test_a_slurm_jobs_link_out_of_its_folder_is_refused_not_read(tmp_path, private):
    folder = tmp_path / "slurm"
    folder.mkdir()
    (folder / "zz-x.json").symlink_to(private)
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "sl", "kind": "slurm-jobs", "path": str(folder), "cluster": "c1"}]})
    [outcome] = run_inventory(config, now=NOW)
    assert REFUSED.format(target=private) in str(outcome.error) and "Hunter2" not in str(outcome.error)


def test_a_billing_manifest_linked_out_of_the_location_is_not_read(tmp_path, private):
    # the data files are DuckDB's to refuse; a manifest (JSON) and a file's head are read in Python
    export = tmp_path / "export"
    (export / "metadata").mkdir(parents=True)
    (export / "metadata" / "x-Manifest.json").symlink_to(private)
    storage = Storage(SourceConfig(name="bill", kind="aws-cur2", location=str(export)))
    [manifest] = storage.list()
    for read in (storage.read_bytes, lambda obj: storage.read_head(obj, 10)):
        with pytest.raises(SourceError, match=REFUSED.format(target=private)):
            read(manifest)


def test_a_jobs_file_error_lists_its_column_names_capped_in_count_and_length(tmp_path):
    header = [f"column_{i}_{'x' * 60}" for i in range(30)]
    (tmp_path / "wide.csv").write_text(",".join(header) + "\n" + ",".join("1" * 30) + "\n")
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "jf", "kind": "jobs-file", "path": str(tmp_path / "wide.csv"), "cluster": "c1"}]})
    [outcome] = run_inventory(config, now=NOW)
    error = str(outcome.error)
    listed = error.split("(the file has: ", 1)[1]
    assert listed.startswith(f"column_0_{'x' * 31}… (69 characters), column_1_"), error
    assert f"column_11_{'x' * 30}… (70 characters) and 18 more)" in listed, error
    assert "column_12_" not in error and "x" * 41 not in error, error


def test_a_link_out_of_the_folder_is_not_opened_to_fingerprint_the_sources_files(tmp_path, private, monkeypatch):
    """A source of local files is not read again when its files hold the bytes its last read read
    (service/ingest/inventory_inputs.py): their SHA-256 opened the link's target before the read
    refused it."""
    from service.ingest import inventory_inputs

    opened = []
    monkeypatch.setattr(inventory_inputs, "sha256_file", lambda path: opened.append(path.resolve()) or "digest")
    folder = jobs_folder(tmp_path, private)
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "jf", "kind": "jobs-file", "path": str(folder), "cluster": "c1"}]})
    [outcome] = run_inventory(config, now=NOW)
    assert REFUSED.format(target=private) in str(outcome.error)
    assert opened == [folder / "jobs.csv"]


def test_a_utf16_bill_linked_out_of_the_location_is_not_copied_past_the_sandbox(tmp_path):
    """A UTF-16 CSV is copied as UTF-8 into the lake's scratch for DuckDB to read: the copy was
    in the sandbox, so a link out of the location was read whole, where a UTF-8 one is refused."""
    from conftest import SAMPLES

    export, elsewhere = tmp_path / "export", tmp_path / "elsewhere"
    export.mkdir()
    elsewhere.mkdir()
    focus = (SAMPLES / "focus" / "focus_1.0_sample_1000.csv").read_text(encoding="utf-8")
    (elsewhere / "real.csv").write_bytes(focus.encode("utf-16"))
    (export / "bill.csv").symlink_to(elsewhere / "real.csv")
    (tmp_path / "spendlake.yaml").write_text(json.dumps({
        "lake": str(tmp_path / "lake"), "sources": [{"name": "focus", "kind": "focus", "location": str(export)}]}))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "ingest"])
    assert result.exit_code == 3, result.output
    assert f"{export / 'bill.csv'} {REFUSED.format(target=elsewhere / 'real.csv')}" in " ".join(result.output.split())


def swapped_after_check(monkeypatch, module, swap):
    """`module`'s `inside` checks as it does, then `swap` runs: the file is changed between the
    check and the open, as a writer of the shared folder racing the read would."""
    from connectors import source_folder

    check = source_folder.inside

    def checked_then_swapped(root, path, setting):
        checked = check(root, path, setting)
        swap(path)
        return checked
    monkeypatch.setattr(module, "inside", checked_then_swapped)


def swapped_as_opened(monkeypatch, swap):
    """`swap` runs as the source's folder is opened (os.open), after the path was checked and
    resolved: only what is opened, name by name, can refuse it then."""
    from connectors import source_folder

    os_open, paths = source_folder.os.open, []

    def opening(path, flags, *args, **kwargs):
        if flags & os.O_DIRECTORY and not paths:
            paths.append(path)
            swap(path)
        return os_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(source_folder.os, "open", opening)


def linked_to(target: Path):
    def swap(path: Path) -> None:
        path.unlink()
        path.symlink_to(target)
    return swap


@pytest.mark.parametrize("moment", ["after its check", "as it is opened"])
def test_a_billing_manifest_swapped_for_a_link_out_is_not_read(tmp_path, private, monkeypatch, moment):
    from connectors import source_folder

    export = tmp_path / "export"
    (export / "metadata").mkdir(parents=True)
    (export / "metadata" / "x-Manifest.json").write_text("{}")
    storage = Storage(SourceConfig(name="bill", kind="aws-cur2", location=str(export)))
    [manifest] = storage.list()
    swap = linked_to(private)
    if moment == "after its check":
        swapped_after_check(monkeypatch, source_folder, swap)
    else:
        swapped_as_opened(monkeypatch, lambda root: swap(Path(manifest.uri)))
    with pytest.raises(SourceError, match=REFUSED.format(target=private)):
        storage.read_bytes(manifest)


@pytest.mark.parametrize("moment", ["after its check", "as it is opened"])
def test_a_folder_swapped_for_a_link_out_after_its_files_were_checked_is_not_read(tmp_path, private, monkeypatch,
                                                                                   moment):
    from connectors import source_folder

    export = tmp_path / "export"
    (export / "metadata").mkdir(parents=True)
    (export / "metadata" / "private.txt").write_text("{}")
    storage = Storage(SourceConfig(name="bill", kind="aws-cur2", location=str(export)))
    listed = storage.object("metadata/private.txt")

    def swap(path: Path) -> None:  # the folder, not the file: `private.txt` in it is now the private file
        (export / "metadata" / "private.txt").unlink()
        (export / "metadata").rmdir()
        (export / "metadata").symlink_to(private.parent)
    if moment == "after its check":
        swapped_after_check(monkeypatch, source_folder, swap)
    else:
        swapped_as_opened(monkeypatch, swap)
    with pytest.raises(SourceError, match="outside the directories spendlake may read"):
        storage.read_head(listed, 10)


@pytest.mark.parametrize("kind", ["jobs-file", "slurm-jobs"])
def test_a_job_file_swapped_for_a_link_out_after_the_listing_is_refused_not_read(tmp_path, private, monkeypatch, kind):
    from connectors import jobs_base

    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "jobs.csv").write_text(JOBS)
    swapped_after_check(monkeypatch, jobs_base, linked_to(private))
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "j", "kind": kind, "path": str(folder), "cluster": "c1"}]})
    [outcome] = run_inventory(config, now=NOW)
    assert REFUSED.format(target=private) in str(outcome.error) and "Hunter2" not in str(outcome.error)


@pytest.mark.parametrize("name", ["bill.csv", "bill.csv.zip"])
def test_a_bill_swapped_for_a_link_out_after_its_check_is_not_copied_into_the_sandbox(tmp_path, private, name):
    """A UTF-16 CSV or a .csv.zip is copied by Python into the lake's scratch for DuckDB to read:
    swapped for a link after local_copy checked it, the copy held the link's target."""
    import zipfile

    from connectors.csvfile import local_csv

    export, scratch = tmp_path / "export", tmp_path / "scratch"
    export.mkdir()
    scratch.mkdir()
    if name.endswith(".zip"):
        with zipfile.ZipFile(export / name, "w") as archive:
            archive.writestr("bill.csv", "BilledCost\n1\n")
    else:
        (export / name).write_bytes("BilledCost\n1\n".encode("utf-16"))
    storage = Storage(SourceConfig(name="bill", kind="focus", location=str(export)))
    [listed] = storage.list()
    path = storage.local_copy(listed, scratch)  # checked: a file of the folder
    linked_to(private)(path)
    with pytest.raises(SourceError, match=REFUSED.format(target=private)):
        local_csv(path, scratch, listed.uri, storage.open_local)
    assert list(scratch.iterdir()) == []


def test_a_bill_swapped_for_a_link_out_after_its_check_fails_as_changed_never_showing_the_target(tmp_path, private,
                                                                                                monkeypatch):
    """README's claim for what is still read by path (a bill CSV's header): the swap is told by the
    file's version (its inode), and the error names the change, not the target's first line."""
    from connectors import storage as storage_module

    export = tmp_path / "export"
    export.mkdir()
    (export / "bill.csv").write_text("BilledCost,ChargePeriodStart,ChargePeriodEnd,BillingCurrency\n"
                                     "1,2026-11-01T00:00:00Z,2026-11-01T01:00:00Z,USD\n")
    swapped_after_check(monkeypatch, storage_module, lambda path: path.is_symlink() or linked_to(private)(path))
    (tmp_path / "spendlake.yaml").write_text(json.dumps({
        "lake": str(tmp_path / "lake"), "sources": [{"name": "focus", "kind": "focus", "location": str(export)}]}))
    config = ["--config", str(tmp_path / "spendlake.yaml")]
    result = CliRunner().invoke(cli, [*config, "ingest"])
    assert result.exit_code == 3 and f"{export / 'bill.csv'} changed while it was read" in result.output, result.output
    status = CliRunner().invoke(cli, [*config, "status", "--sources", "--format", "json"])
    assert "Hunter2" not in result.output + status.output


def test_an_aws_cli_dump_swapped_for_a_link_out_after_the_listing_is_refused_not_read(tmp_path, monkeypatch):
    """aws-tags (as every AWS listing source) reads the AWS CLI's JSON itself: another JSON of the
    same shape outside the folder was read into the lake when swapped in after the listing."""
    from connectors import inventory_base

    folder, elsewhere = tmp_path / "tags", tmp_path / "elsewhere.json"
    folder.mkdir()
    (folder / "get-resources.json").write_text(json.dumps({"ResourceTagMappingList": []}))
    elsewhere.write_text(json.dumps({"ResourceTagMappingList": [
        {"ResourceARN": "arn:aws:ec2:us-east-1:1:instance/i-1", "Tags": [{"Key": "team", "Value": "theirs"}]}]}))
    swapped_after_check(monkeypatch, inventory_base, linked_to(elsewhere))
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "inventory": [{"name": "tags", "kind": "aws-tags", "path": str(folder)}]})
    [outcome] = run_inventory(config, now=NOW)
    assert REFUSED.format(target=elsewhere) in str(outcome.error), outcome.error


def test_a_file_swapped_for_a_fifo_after_its_check_fails_at_once_not_hangs(tmp_path, monkeypatch):
    """A FIFO put in a listed file's place held the open until a writer came: the read hung."""
    import threading

    from connectors import source_folder

    export = tmp_path / "export"
    (export / "metadata").mkdir(parents=True)
    (export / "metadata" / "x-Manifest.json").write_text("{}")
    storage = Storage(SourceConfig(name="bill", kind="aws-cur2", location=str(export)))
    [manifest] = storage.list()

    def fifo(path: Path) -> None:
        path.unlink()
        os.mkfifo(path)
    swapped_after_check(monkeypatch, source_folder, fifo)
    raised = []
    reader = threading.Thread(target=lambda: raised.append(pytest.raises(SourceError, storage.read_bytes, manifest)),
                              daemon=True)
    reader.start()
    reader.join(5)
    assert raised, "the read still waits on the FIFO"
    assert "x-Manifest.json is not a regular file now" in str(raised[0].value)
