"""`spendlake status`: the table shows each source's freshness above the partitions; CSV and JSON
hold one table each (a script reads one header), the partitions, or with --sources the freshness.
README said the CSV started with the freshness table; it never did."""

from __future__ import annotations

import json
import shutil

import yaml
from click.testing import CliRunner

from service.cli.main import SOURCE_COLUMNS, cli
from service.ingest.status import NOTE_COLUMNS, STATUS_COLUMNS
from tests.conftest import DATA, REPO

FILES = DATA / "focus-toolkit" / "convert" / "aws-1.3-synthetic-csv"


def test_csv_and_json_hold_one_table_each_and_the_readme_says_so(tmp_path):
    shutil.copytree(FILES, tmp_path / "files")
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": "lake", "sources": [{"name": "src", "kind": "focus",
                                                                   "location": "files"}]}))

    def status(*args: str) -> str:
        result = CliRunner().invoke(cli, ["--config", str(config), "status", *args], env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        return result.output

    assert CliRunner().invoke(cli, ["--config", str(config), "ingest"]).exit_code == 0
    table = status("--format", "table")
    assert table.index("sources") < table.index("spendlake status")  # the freshness first
    # status47: a row per line the table says beside it (note_kind, note), after the table's own columns
    assert status("--format", "csv").splitlines()[0] == ",".join([*STATUS_COLUMNS, *NOTE_COLUMNS])
    assert status("--sources", "--format", "csv").splitlines()[0] == ",".join([*SOURCE_COLUMNS, *NOTE_COLUMNS])
    assert {tuple(row) for row in json.loads(status("--format", "json"))} == {(*STATUS_COLUMNS, *NOTE_COLUMNS)}
    [row] = [line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("| `spendlake status")]
    assert "CSV and JSON hold one table each" in row


def test_a_failure_in_the_second_of_the_last_success_is_the_current_error_and_a_success_after_it_clears_it(
        monkeypatch):
    # both times are kept to the second: a run failing in the second the previous one succeeded
    # compared equal, and status showed the source ok, no failing: line
    from datetime import datetime, timezone

    from service.ingest import freshness

    class Frozen(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 12, 5, 14, 0, 0, 250000, tzinfo=timezone.utc)

    monkeypatch.setattr(freshness, "datetime", Frozen)
    record: dict = {}
    freshness.record_run(record, None)
    freshness.record_run(record, ValueError("period 2024-05 failed"))
    assert record["last_success"] == record["last_failure"] == "2026-12-05T14:00:00Z"
    assert freshness.current_error(record) == "period 2024-05 failed"
    freshness.record_run(record, None)
    assert freshness.current_error(record) is None
    # a record written before the runs said which came last: told by the times, as before
    assert freshness.current_error({"last_success": "2026-12-05T14:00:00Z", "last_failure": "2026-12-05T14:00:01Z",
                                    "last_error": "x"}) == "x"


SACCT = ("JobID|JobIDRaw|State|Submit|Start|End|NodeList|AllocTRES\n"
         "12|12|COMPLETED|2026-12-01T10:00:00|2026-12-01T10:00:05|2026-12-01T11:00:05|p5-[001-002]|gres/gpu=16\n")


def test_a_lake_without_a_bill_is_said_in_csv_and_json_as_the_table_says_it(tmp_path):
    """A lake holding a job source's inventory and no bill: the table listed the source and said the
    lake is empty, JSON printed `[]` and CSV a header. Now the table's line names what the lake
    holds and the next step, and CSV and JSON carry it as a row (`note_kind` `no_bill`); a config
    naming a billing source, not yet read, says to ingest; a lake holding nothing says it is empty."""
    (tmp_path / "sacct.txt").write_text(SACCT)
    config = tmp_path / "spendlake.yaml"
    inventory = [{"name": "slurm", "kind": "slurm-jobs", "path": str(tmp_path / "sacct.txt")}]
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "inventory": inventory}))

    def status(fmt: str) -> str:
        result = CliRunner().invoke(cli, ["--config", str(config), "status", "--format", fmt], env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        return result.stdout

    said = (f"the lake at {tmp_path / 'lake'} holds no bill, only the inventory of slurm: add the bill's export "
            "under `sources:`, then run `spendlake ingest`")
    assert CliRunner().invoke(cli, ["--config", str(config), "inventory"]).exit_code == 0
    table = status("table")
    assert "│ slurm " in table and table.rstrip().endswith(said)
    assert json.loads(status("json")) == [{**dict.fromkeys(STATUS_COLUMNS), "note_kind": "no_bill", "note": said}]
    assert status("csv").splitlines()[1] == f'{"," * len(STATUS_COLUMNS)}no_bill,"{said}"'

    files = tmp_path / "files"
    files.mkdir()
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "inventory": inventory,
                                      "sources": [{"name": "src", "kind": "focus", "location": str(files)}]}))
    [row] = json.loads(status("json"))
    assert row["note"] == f"the lake at {tmp_path / 'lake'} holds no bill, only the inventory of slurm: run `spendlake ingest`"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "other"), "sources": [
        {"name": "src", "kind": "focus", "location": str(files)}]}))
    [row] = json.loads(status("json"))
    assert (row["note_kind"], row["note"]) == ("no_bill", f"the lake at {tmp_path / 'other'} is empty: run `spendlake ingest`")
