"""Faults during ingest and queries answered in one sentence (RELIABILITY 53, 55).

A read-only lake is made by chmod. Root ignores chmod, so as root the command runs in a
subprocess without the capabilities that bypass file permissions (`setpriv`), for which the
root-owned, chmod-ed lake is read-only just the same."""

from __future__ import annotations

import csv
import errno
import json
import re
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import REPO, SAMPLES, require_binary, state_refused
from service.cli.main import cli
from service.core import staging
from service.core.errors import duckdb_error, os_error

FOCUS = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"
BYPASS_PERMISSIONS = "-dac_override,-dac_read_search,-fowner,-linux_immutable"


@pytest.fixture
def shared_dir(tmp_path):
    """tmp_path, made writable again afterwards so that it can be removed."""
    yield tmp_path
    for item in [tmp_path, *tmp_path.rglob("*")]:
        if item.is_dir() and not item.is_symlink():
            item.chmod(0o755)


def config_file(base: Path, lake: Path, export: Path, **extra) -> Path:
    path = base / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake), "sources": [
        {"name": "focus", "kind": "focus", "location": str(export)}], **extra}))
    return path


def invoke(config: Path, *args: str):
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def run_as_another_user(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`spendlake ARGS` in a subprocess that file permissions apply to (as root: without the
    capabilities that bypass them)."""
    command = [sys.executable, "-m", "service", *args]
    if os.geteuid() == 0:
        command = [require_binary("setpriv"), f"--bounding-set={BYPASS_PERMISSIONS}", "--", *command]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def read_only(path: Path) -> None:
    for item in [path, *path.rglob("*")]:
        item.chmod(item.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def lake_bytes(lake: Path) -> dict[str, bytes]:
    return {str(p.relative_to(lake)): p.read_bytes() for p in sorted(lake.rglob("*")) if p.is_file()
            and "_locks" not in p.parts}


def one_sentence(output: str) -> str:
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, output
    return errors[0]


def ingested_lake(base: Path) -> tuple[Path, Path, Path]:
    """A lake holding one FOCUS delivery, and a new delivery waiting in the export folder."""
    export = base / "export"
    export.mkdir()
    shutil.copy(FOCUS, export / "part-1.csv")
    lake = base / "lake"
    config = config_file(base, lake, export)
    assert invoke(config, "ingest").exit_code == 0
    rows = list(csv.reader(FOCUS.open(encoding="utf-8-sig")))
    with (export / "part-1.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows[:500])  # a restated delivery: ingest would commit it
    return config, lake, export


def test_53_a_read_only_lake_is_exit_3_in_one_sentence_for_ingest_and_rules(shared_dir):
    config, lake, _ = ingested_lake(shared_dir)
    before = lake_bytes(lake)
    read_only(lake)
    for command in (["ingest"], ["rules", "run"]):
        result = run_as_another_user("--config", str(config), *command, cwd=shared_dir)
        assert result.returncode == 3, result.stdout + result.stderr
        sentence = one_sentence(result.stderr)
        assert str(lake) in sentence and "permission denied" in sentence and "write access to the lake" in sentence
    assert lake_bytes(lake) == before


def test_53_attribute_after_a_config_change_on_a_read_only_lake(shared_dir):
    config, lake, export = ingested_lake(shared_dir)
    expected = json.loads(invoke(config, "attribute", "--since", "2024-01-01", "--until", "2025-01-01",
                                 "--format", "json").output)["totals"]
    changed = config_file(shared_dir, lake, export, attribution={"dimensions": {"team": {"tags": ["application"]}}})
    read_only(lake)
    result = run_as_another_user("--config", str(changed), "attribute", "--since", "2024-01-01", "--until",
                                 "2025-01-01", "--format", "json", cwd=shared_dir)
    # a lake the user may not write either answers from memory (same totals) or says why not
    if result.returncode == 0:
        assert json.loads(result.stdout)["totals"] == expected
    else:
        assert result.returncode == 3, result.stdout + result.stderr
        assert "write access to the lake" in one_sentence(result.stderr)


def test_53_a_partly_read_only_lake_fails_the_period_and_counts_the_failure(shared_dir):
    config, lake, _ = ingested_lake(shared_dir)
    read_only(lake / "costs")
    result = run_as_another_user("--config", str(config), "ingest", cwd=shared_dir)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "FAILED" in result.stderr
    assert "permission denied" in result.stderr
    state = json.loads((lake / "_state" / "sources.json").read_text())["focus"]
    assert state["failures_total"] == 1 and "permission denied" in state["last_error"]


def test_55_a_cost_partition_this_user_cannot_read_is_named_as_such_not_as_truncated(shared_dir):
    """A partition written by root under umask 077 and read by the service's user: every
    query called it "truncated (no readable Parquet footer)" and said to re-ingest it."""
    config, lake, _ = ingested_lake(shared_dir)
    partition = sorted((lake / "costs").rglob("*.parquet"))[0]
    partition.chmod(0)
    for command in (["attribute", "--since", "2000-01-01"], ["status"], ["verify"]):
        result = run_as_another_user("--config", str(config), *command, cwd=shared_dir)
        assert result.returncode == 3, result.stdout + result.stderr
        assert f"{partition}: permission denied for this user" in result.stdout + result.stderr
        assert "truncated" not in result.stdout + result.stderr and "Traceback" not in result.stderr


def test_53_a_lake_on_a_read_only_mount_says_to_mount_it_read_write_not_to_grant_this_user_access():
    """A volume mounted read-only (a Kubernetes readOnly mount, a file system remounted ro after
    errors) was 'read-only file system for this user — give the user ... write access (or run it
    as the lake's owner)': no user, root included, can write there."""
    lock = "/lake/_locks/ingest.lock"
    for error in (os_error(OSError(errno.EROFS, "Read-only file system", lock)),
                  duckdb_error(Exception(f'IO Error: Cannot open file "{lock}": Read-only file system'),
                               "could not write")):
        assert error.where == lock and error.message.endswith("read-only file system"), error
        assert "mount it read-write" in error.hint and "for this user" not in str(error) and "owner" not in error.hint
    denied = os_error(OSError(errno.EACCES, "Permission denied", lock))
    assert denied.message == "permission denied for this user" and "write access" in denied.hint


def test_53_a_source_record_refused_after_the_commit_does_not_say_nothing_was_changed(shared_dir):
    """`_state/sources.json` not writable (chmod, a full disk) after the run's deliveries were
    published: 'committed 499 rows' above 'error: ... nothing was changed'; and a run that had
    nothing to commit says so, not 'what was committed above'."""
    config, lake, _ = ingested_lake(shared_dir)
    with state_refused("sources", errno.EACCES, "Permission denied"):
        result = invoke(config, "ingest")
    assert result.exit_code == 3 and "focus 2024-09: committed 499 rows" in result.output
    error = result.output.splitlines()[-1]
    assert error.startswith(f"error: {lake / '_state' / 'sources.json'}: permission denied for this user")
    assert "nothing was changed" not in error and error.endswith(
        "what was committed above is in the lake; only the source's success or failure is not recorded")
    with state_refused("sources", errno.EACCES, "Permission denied"):
        unchanged = invoke(config, "ingest")  # nothing to commit: it said 'what was committed above is in the lake'
    assert unchanged.exit_code == 3 and "committed" not in unchanged.output.splitlines()[0], unchanged.output
    assert unchanged.output.splitlines()[-1].endswith(
        "this run committed nothing; only the source's success or failure is not recorded"), unchanged.output
    rerun = invoke(config, "ingest")
    assert rerun.exit_code == 0 and "unchanged" in rerun.output
    assert "last_success" in json.loads((lake / "_state" / "sources.json").read_text())["focus"]


def test_53_disk_full_during_ingest_is_exit_3_counted_and_says_disk_full(tmp_path, monkeypatch):
    export = tmp_path / "export"
    export.mkdir()
    shutil.copy(FOCUS, export / "part-1.csv")
    config = config_file(tmp_path, tmp_path / "lake", export)
    real = staging.pq.ParquetWriter.__init__
    monkeypatch.setattr(staging.pq.ParquetWriter, "__init__",
                        lambda self, path, *args, **kw: real(self, "/dev/full", *args, **kw))
    result = invoke(config, "ingest")
    assert result.exit_code == 3 and "Traceback" not in result.output
    [failed] = [line for line in result.output.splitlines() if "FAILED" in line]
    assert "disk full" in failed and "could not read the delivery" not in failed and "free disk space" in failed
    # the staged file Arrow could not write, in the OS's words (not the lake's root and Arrow's "Error writing bytes")
    staged = re.search(r"(\S+): disk full: \[Errno 28\] No space left on device — ", failed)
    assert staged and re.fullmatch(rf"{tmp_path / 'lake' / '_staging'}/costs-\w+/billing_period=[\d-]+/data\.parquet",
                                   staged.group(1)), failed
    state = json.loads((tmp_path / "lake" / "_state" / "sources.json").read_text())["focus"]
    assert state["failures_total"] == 1 and "disk full" in state["last_error"] and "last_success" not in state
    monkeypatch.undo()
    assert invoke(config, "ingest").exit_code == 0
    state = json.loads((tmp_path / "lake" / "_state" / "sources.json").read_text())["focus"]
    assert state["failures_total"] == 1 and "last_success" in state


def test_55_a_reader_error_is_one_line_with_file_line_and_column_and_the_whole_text_with_v(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    rows = list(csv.reader(FOCUS.open(encoding="utf-8-sig")))
    rows[6][rows[0].index("BilledCost")] = "12,5 EUR"
    with (export / "bill.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows[:20])
    config = config_file(tmp_path, tmp_path / "lake", export)
    result = invoke(config, "ingest")
    assert result.exit_code == 3
    [line] = result.output.splitlines()
    assert line.startswith("focus (periods from data): FAILED: ") and str(export / "bill.csv") in line
    assert "line 7, column BilledCost: could not convert '12,5 EUR' to DECIMAL" in line
    assert "Original Line" not in line and "delimiter" not in line
    state = json.loads((tmp_path / "lake" / "_state" / "sources.json").read_text())["focus"]
    assert state["last_error"] in line and "\n" not in state["last_error"]
    verbose = CliRunner().invoke(cli, ["-v", "--config", str(config), "ingest"])
    assert "DuckDB's message" in verbose.output and "Original Line" in verbose.output


def test_duckdbs_message_with_v_is_one_bounded_line_without_the_readers_options(tmp_path):
    """-v logged DuckDB's whole text: its lines, the fixes that do not apply, the reader's options
    (`file = <path>` again) and the offending row whole, however long (a Tags cell of 100 KB)."""
    export = tmp_path / "export"
    export.mkdir()
    rows = list(csv.reader(FOCUS.open(encoding="utf-8-sig")))
    rows[6][rows[0].index("BilledCost")] = "12,5 EUR"
    rows[6][rows[0].index("Tags")] = json.dumps({"note": "x" * 100_000})
    with (export / "bill.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows[:20])
    verbose = CliRunner().invoke(cli, ["-v", "--config", str(config_file(tmp_path, tmp_path / "lake", export)),
                                       "ingest"])
    logged = [line for line in verbose.stderr.splitlines() if "DuckDB's message" in line]
    assert logged and all(len(line) < 2_000 for line in logged), [len(line) for line in logged]
    assert any("Original Line" in line and 'Could not convert string "12,5 EUR"' in line for line in logged), logged
    assert not [line for line in logged if "Possible solutions" in line or "delimiter =" in line or "\\n" in line]


@pytest.mark.parametrize("row, reason", [
    (",,,", ": Expected Number of Columns: 44 Found: 4"),
    ('NULL,"0.1,x', ": Value with unterminated quote found."),
    (FOCUS.read_text(encoding="utf-8-sig").splitlines()[1].replace("NULL,0.00000080000,", 'NULL,"12,5 EUR",', 1),
     ", column BilledCost: could not convert '12,5 EUR' to DECIMAL"),
])
def test_a_bad_row_after_blank_lines_is_told_with_its_reason(tmp_path, row, reason):
    # DuckDB's "Original Line:" then holds the blank lines: the reason follows them
    export = tmp_path / "export"
    export.mkdir()
    (export / "bill.csv").write_bytes(FOCUS.read_bytes().rstrip(b"\r\n") + f"\n\n\n{row}\n".encode())
    lines = len(FOCUS.read_bytes().rstrip(b"\r\n").splitlines()) + 3
    result = invoke(config_file(tmp_path, tmp_path / "lake", export), "ingest")
    assert result.exit_code == 3
    [line] = result.output.splitlines()
    assert f"could not read the delivery: line {lines}{reason}" in line, line


def test_55_a_symlink_the_sandbox_refuses_is_named_as_such_not_as_a_bad_file(tmp_path):
    export, elsewhere = tmp_path / "export", tmp_path / "elsewhere"
    export.mkdir()
    elsewhere.mkdir()
    shutil.copy(FOCUS, elsewhere / "real.csv")
    (export / "bill.csv").symlink_to(elsewhere / "real.csv")
    result = invoke(config_file(tmp_path, tmp_path / "lake", export), "ingest")
    assert result.exit_code == 3
    [line] = result.output.splitlines()
    assert f"{export / 'bill.csv'} is a symbolic link to {elsewhere / 'real.csv'}" in line
    assert "outside the directories spendlake may read" in line and "UTF-8" not in line


def test_55_a_corrupt_ledger_says_how_to_repair_it_and_the_repair_works(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    shutil.copy(FOCUS, export / "bill.csv")
    config = config_file(tmp_path, tmp_path / "lake", export)
    assert invoke(config, "ingest").exit_code == 0
    totals = invoke(config, "status", "--format", "json").output
    ledger = tmp_path / "lake" / "_ledger" / "deliveries.json"
    ledger.write_text('{"entries": [')
    for command in (["ingest"], ["status"], ["attribute", "--since", "2024-01-01"]):
        result = invoke(config, *command)
        assert result.exit_code == 3 and "Traceback" not in result.output
        assert "re-ingest every source" not in result.output and f"mv {ledger} {ledger}.bad" in result.output
    ledger.rename(f"{ledger}.bad")  # what the hint says
    assert invoke(config, "ingest").exit_code == 0
    repaired = json.loads(invoke(config, "status", "--format", "json").output)
    assert [(r["billing_period"], r["billed_cost"], r["check"]) for r in repaired] == [
        (r["billing_period"], r["billed_cost"], "ok") for r in json.loads(totals)]


def test_53_a_disk_too_full_to_record_the_failure_names_the_state_file(tmp_path, monkeypatch):
    export = tmp_path / "export"
    export.mkdir()
    shutil.copy(FOCUS, export / "part-1.csv")
    config = config_file(tmp_path, tmp_path / "lake", export)
    real_dump = json.dump

    def full_disk(data, handle, **kw):  # the state write fails the way a write on a full disk does
        if "sources.json" in handle.name:
            raise OSError(28, "No space left on device")
        return real_dump(data, handle, **kw)

    monkeypatch.setattr(json, "dump", full_disk)
    result = invoke(config, "ingest")
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert f"error: {tmp_path / 'lake' / '_state' / 'sources.json'}: disk full" in result.output, result.output
    assert result.output.count("sources.json") == 1


def test_53_a_disk_too_full_for_the_lock_file_names_it_and_the_command_to_rerun(tmp_path, monkeypatch):
    from service.core import locks

    export = tmp_path / "export"
    export.mkdir()
    shutil.copy(FOCUS, export / "part-1.csv")
    config = config_file(tmp_path, tmp_path / "lake", export)
    assert invoke(config, "ingest").exit_code == 0

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(locks.os, "pwrite", full_disk)
    result = invoke(config, "rules", "run")
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert result.output.startswith(f"error: {tmp_path / 'lake' / '_locks'}/"), result.output
    assert "disk full" in result.output and "run the command again" in result.output


def test_37_verify_on_a_read_only_lake_still_checks_and_answers_and_warns_it_recorded_nothing(shared_dir):
    config, lake, _ = ingested_lake(shared_dir)
    read_only(lake)
    result = run_as_another_user("--config", str(config), "verify", "--format", "csv", cwd=shared_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and ".tmp" not in result.stderr
    assert result.stdout.splitlines()[1].startswith("focus,2024-09,ok")
    [warning] = result.stderr.splitlines()
    assert warning.startswith(f"warning: {lake / '_state' / 'verify.json'}: not recorded (permission denied")


@pytest.mark.parametrize("value, says", [
    # beyond the lake's 26 integer digits (FOCUS CSV money is parsed from its text up to there)
    ("900000000000000000000000000", "line 2, column BilledCost: '900000000000000000000000000' is too large for the lake "
     "(money holds at most 26 digits before the point, quantities 22)"),
    ("NaN", "line 2, column BilledCost: 'NaN' is not a finite amount"),
    ("12,5 EUR", "line 2, column BilledCost: could not convert '12,5 EUR' to DECIMAL"),
])
def test_55_a_cost_too_large_or_not_finite_says_so_rather_than_could_not_convert(tmp_path, value, says):
    export = tmp_path / "export"
    export.mkdir()
    rows = list(csv.reader(FOCUS.open(encoding="utf-8-sig")))
    rows[1][rows[0].index("BilledCost")] = value
    with (export / "bill.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows[:5])
    result = invoke(config_file(tmp_path, tmp_path / "lake", export), "ingest")
    assert result.exit_code == 3 and says in result.output, result.output
