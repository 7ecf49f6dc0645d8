"""Entries of a source folder named like data files that are not files (RELIABILITY 42, 55):
a dangling symbolic link (an export still being copied, a moved target) and a directory
named `x.csv/` with no file in it are told in one line each, the file, why and what to do,
as other skipped files are; a directory holding files (Spark's `x.csv/part-0000.csv`) is read."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from service.cli.main import cli

HEADER = "BilledCost,EffectiveCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd,ChargeCategory\n"


def write_month(path: Path, month: str, cost: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{cost},{cost},USD,{month}-01T00:00:00Z,{month}-02T00:00:00Z,{month}-02T01:00:00Z,Usage\n")


def ingest(tmp_path: Path, export: Path):
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: {tmp_path / 'lake'}\nsources:\n  - name: bill\n    kind: focus\n    location: {export}\n")
    return CliRunner().invoke(cli, ["--config", str(config), "ingest"])


def test_42_a_dangling_link_and_an_empty_directory_named_like_data_files_are_told_once_each(tmp_path):
    export = tmp_path / "export"
    write_month(export / "2026-10.csv", "2026-10", "100")
    write_month(export / "spark.csv" / "part-0000.csv", "2026-11", "10")  # a directory of files: read
    (export / "2026-12.csv").symlink_to(tmp_path / "elsewhere" / "2026-12.csv")
    (export / "2027-01.csv").mkdir()
    (export / "2027-01.csv" / ".keep").write_text("")
    (export / "notes").symlink_to(tmp_path / "gone")  # not named like a data file: the connector reads none such
    result = ingest(tmp_path, export)
    assert result.exit_code == 0, result.output
    skipped = [line for line in result.output.splitlines() if ": skipped, " in line]
    assert skipped == [
        f"bill {export / '2026-12.csv'}: skipped, a symbolic link to {tmp_path / 'elsewhere' / '2026-12.csv'}, which "
        "leads to no file: fix the link or remove it (an export still being copied? run ingest again when it is there)",
        f"bill {export / '2027-01.csv'}: skipped, a directory with no files in it, not a data file: put the export's "
        "file there or remove it"], result.output
    assert "2026-10: committed 1 rows" in result.output and "2026-11: committed 1 rows" in result.output


def test_42_a_folder_holding_only_a_dangling_link_says_why_and_fails(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    (export / "2026-10.csv").symlink_to(tmp_path / "gone.csv")
    result = ingest(tmp_path, export)
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    assert f"bill {export / '2026-10.csv'}: skipped, a symbolic link to {tmp_path / 'gone.csv'}" in result.output


def test_40_a_copy_in_a_temporary_or_hidden_folder_is_not_counted_beside_the_finished_file(tmp_path):
    """Spark writing `_temporary/0/...` and a copy tool's `.partial/` beside the finished file:
    the month was committed as 3 rows, $300 for a $100 bill."""
    export = tmp_path / "export"
    for folder in (export, export / "_temporary" / "0", export / ".partial"):
        write_month(folder / "2026-10.csv", "2026-10", "100")
    result = ingest(tmp_path, export)
    assert result.exit_code == 0, result.output
    assert "bill 2026-10: committed 1 rows USD 100.000000000000" in result.output
    assert f"bill {export / '_temporary'}: skipped, a folder whose name starts with '_'" in result.output
    assert f"bill {export / '.partial'}: skipped, a folder whose name starts with '.'" in result.output


def test_inventory_and_job_files_under_hidden_or_underscore_folders_are_not_read(tmp_path, caplog):
    """As the billing sources' folders: a `_temporary/` or `.partial/` copy beside a finished
    inventory or job file would add its rows twice; each such folder is told once."""
    from connectors.inventory_base import local_files
    from connectors.jobs_base import source_files

    root = tmp_path / "inventory"
    for relative in ("a/tags.csv", "x_y/tags.csv", "_temporary/0/tags.csv", "_temporary/1/tags.csv",
                     ".partial/tags.csv"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("resource_id,key,value\n")
    caplog.clear()
    assert local_files(str(root), "inventory.tags.path") == [root / "a" / "tags.csv", root / "x_y" / "tags.csv"]
    told = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(told) == 2 and any("_temporary" in t for t in told) and any(".partial" in t for t in told)
    caplog.clear()
    assert source_files(str(root), "inventory.jobs.path") == [root / "a" / "tags.csv", root / "x_y" / "tags.csv"]
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"{root / '_temporary'}: a folder whose name starts with '_' (a job's output still being written?): its "
        "files are not read; move them out of it to read them"]
