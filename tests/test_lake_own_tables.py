"""The lake's own one-file tables keep their truth as inventory snapshots do (RELIABILITY
35-37 for `findings` and `plans`): a deleted, truncated or altered file is exit 3 naming it
and the command that writes it again, never an empty list of findings or a report without its
plans; that command sets the damaged file aside and writes the table again."""

from __future__ import annotations

import errno
import json
from decimal import Decimal
from pathlib import Path

import pytest

from conftest import state_refused
from rules.base import Finding
from service.core.snapshot_ledger import SET_ASIDE, record_file
from service.findings.store import store_findings
from service.planning.plans import load_plans
from tests.test_inventory_integrity import flip, lake, spendlake  # noqa: F401 (fixture)

PLAN = ["estimate", "--params", "7B", "--tokens", "1T", "--gpu", "H100", "--gpus", "64", "--mfu", "0.4",
        "--price-per-gpu-hour", "4", "--project", "llm-7b", "--start", "2026-11-20"]
# the commands that read the table (rules may read any table; `status` says every damaged file)
QUERIES = {"findings": [["findings", "--format", "json"], ["status"], ["rules", "run", "--dry-run", "--format", "json"]],
           "plans": [["plans", "--format", "json"], ["status"], ["rules", "run", "--dry-run", "--format", "json"]]}
# and commands that read costs, tags and job records alone: a damaged findings or plans file stopped them
UNREAD_BY = [["runs", "--since", "30d", "--format", "json"], ["runs", "--run", "1001", "--format", "json"]]
WRITTEN_BY = {"findings": "spendlake rules run", "plans": "spendlake estimate --register"}


@pytest.fixture
def tables(lake):
    """The jobs lake with two findings stored and a plan registered."""
    config, lake = lake
    assert spendlake(config, "rules", "run").exit_code == 0
    store_findings(lake, [Finding(id=f"a{n}", rule="idle-gpu", severity="warning", resource_id=f"i-{n}", team="eval",
                                  category="waste", impact_usd=Decimal(n), monthly_waste_usd=Decimal(n),
                                  summary="idle for 6 hours " * 40) for n in range(2)])
    assert spendlake(config, *PLAN, "--register", "plan-a").exit_code == 0
    return config, lake


def table_file(lake, table: str) -> Path:
    [file] = lake.table_dir(table).glob("source=*/snapshot=current/data.parquet")
    return file


def damage(config: Path, file: Path, how: str) -> str:
    """Damages `file`; the state a read finds it in."""
    if how == "deleted":
        file.unlink()
        return "missing"
    if how == "truncated":
        file.write_bytes(file.read_bytes()[:file.stat().st_size // 2])
        return "truncated"
    flip(file, 4, 8)  # the same size, the same footer: only `verify`'s hash tells
    verified = spendlake(config, "verify", "--format", "json")
    assert verified.exit_code == 3, verified.output
    [row] = [r for r in json.loads(verified.output.split("\nerror:")[0]) if r["check"] != "ok"]
    assert (row["check"], row["table"]) == ("altered", file.parent.parent.parent.name) and "SHA-256" in row["detail"]
    return "altered"


def assert_every_query_exits_3_naming(config: Path, file: Path, table: str, state: str) -> None:
    for args in QUERIES[table]:
        result = spendlake(config, *args)
        assert result.exit_code == 3, (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
        assert str(file) in result.output and f"{table} table" in result.output, (args, result.output)
        assert f"is {state}" in result.output and WRITTEN_BY[table] in result.output, (args, result.output)
    for args in UNREAD_BY:
        result = spendlake(config, *args)
        assert result.exit_code == 0 and str(file) not in result.output, (args, result.output)
        assert json.loads(result.stdout)["rows"], (args, result.stdout)


def test_11_a_full_disk_after_the_findings_are_stored_does_not_say_nothing_was_changed(lake):
    """`_state/rules.json` refused after the findings were stored: the error said 'the previous
    data is intact' of a findings table that had just changed."""
    config, lake = lake
    with state_refused("rules", errno.ENOSPC, "No space left on device"):
        result = spendlake(config, "rules", "run")
    assert result.exit_code == 3 and "disk full" in result.output, result.output
    assert result.output.rstrip().endswith("the findings are stored; only each rule's last outcome is not recorded")
    assert "intact" not in result.output and table_file(lake, "findings").exists()


@pytest.mark.parametrize("how", ["deleted", "truncated", "altered"])
def test_35_37_a_damaged_findings_file_exits_3_and_rules_run_writes_it_again(tables, how):
    config, lake = tables
    file = table_file(lake, "findings")
    state = damage(config, file, how)
    assert_every_query_exits_3_naming(config, file, "findings", state)
    result = spendlake(config, "rules", "run")
    assert result.exit_code == 0, result.output
    assert f"is {state}" in result.output and SET_ASIDE in result.output, result.output
    assert file.exists() and spendlake(config, "findings", "--format", "json").exit_code == 0
    assert spendlake(config, "verify").exit_code == 0
    assert (how == "deleted") != bool(list((lake.root / SET_ASIDE).rglob("*.parquet")))  # what was left, kept


@pytest.mark.parametrize("how", ["deleted", "truncated", "altered"])
def test_35_37_a_damaged_plans_file_exits_3_and_registering_writes_it_again(tables, how):
    config, lake = tables
    file = table_file(lake, "plans")
    state = damage(config, file, how)
    assert_every_query_exits_3_naming(config, file, "plans", state)
    result = spendlake(config, *PLAN, "--register", "plan-a")
    assert result.exit_code == 0, result.output
    assert f"is {state}" in result.output and "register the plans it held again" in result.output, result.output
    assert spendlake(config, "verify").exit_code == 0
    assert [plan.name for plan in load_plans(lake)] == ["plan-a"]


def test_verify_lists_the_findings_and_plans_files_against_their_records(tables):
    config, lake = tables
    assert record_file(lake.root, table_file(lake, "findings")).exists()
    rows = json.loads(spendlake(config, "verify", "--format", "json").output)
    assert {(r["table"], r["check"]) for r in rows} >= {("findings", "ok"), ("plans", "ok")}, rows


@pytest.mark.parametrize("table", ["findings", "plans"])
def test_a_digit_changed_in_a_tables_record_is_said_to_be_the_records_not_the_files(tables, table):
    """A flipped digit in the record's sha256: verify blamed the file and advised `rules run`,
    which sets a whole file aside and drops the acknowledgements it held."""
    config, lake = tables
    file = table_file(lake, table)
    record = record_file(lake.root, file)
    held = json.loads(record.read_text())
    digest = held["sha256"]
    record.write_text(json.dumps({**held, "sha256": digest[:10] + ("0" if digest[10] != "0" else "1") + digest[11:]}))
    result = spendlake(config, "verify", "--format", "json")
    assert result.exit_code == 3, result.output
    [row] = [r for r in json.loads(result.stdout) if r["check"] != "ok"]
    assert row["table"] == table and row["detail"].startswith("its record changed, not the file"), row
    assert "in 1 of 64 hex digits" in row["detail"] and digest in row["detail"], row
    lost = {"findings": "the acknowledgements it holds", "plans": "the plans it holds"}[table]
    assert f"{record}: put the file's SHA-256 in its `sha256`, then run `spendlake verify`" in result.stderr
    assert WRITTEN_BY[table] in result.stderr and "would set the whole file aside" in result.stderr
    assert f"without {lost}" in result.stderr, result.stderr
    record.write_text(json.dumps(held))  # as the error says: the record put right, the file untouched
    assert spendlake(config, "verify").exit_code == 0
    assert spendlake(config, *QUERIES["findings"][0]).exit_code == 0


def test_a_damaged_findings_file_says_rules_run_writes_it_again_without_its_acknowledgements(tables):
    config, lake = tables
    table_file(lake, "findings").unlink()
    result = spendlake(config, "findings")
    assert result.exit_code == 3 and "spendlake rules run" in result.output, result.output
    assert "writes the table again, without the acknowledgements it holds" in result.output, result.output
