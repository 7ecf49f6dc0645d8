"""Files in a source folder of a type its kind does not read (`x.txt`, `x.xlsx`, a `.json` in
a FOCUS folder, `x.csv.zip`) are told as skipped, one line per file or per folder holding
several, with what the kind reads (RELIABILITY 42: a bill saved in another format was dropped
without a word); manifests and the markers exports write (`_SUCCESS`, `.crc`) stay quiet."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from service.cli.main import cli

HEADER = "BilledCost,EffectiveCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd,ChargeCategory\n"
FOCUS_READS = "focus reads .csv, .csv.gz, .parquet files"
WHAT_TO_DO = "export the bill as one of those, or move what is not a bill out of the location"


def write_month(path: Path, month: str, cost: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{cost},{cost},USD,{month}-01T00:00:00Z,{month}-02T00:00:00Z,{month}-02T01:00:00Z,Usage\n")


def ingest(tmp_path: Path, export: Path, kind: str = "focus"):
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: {tmp_path / 'lake'}\nsources:\n  - name: bill\n    kind: {kind}\n    location: {export}\n")
    return CliRunner().invoke(cli, ["--config", str(config), "ingest"])


def skipped(output: str) -> list[str]:
    return [line for line in output.splitlines() if ": skipped, " in line]


def test_42_files_of_a_type_the_kind_does_not_read_are_told_one_line_per_folder(tmp_path):
    export = tmp_path / "export"
    write_month(export / "2026-10.csv", "2026-10", "100")
    (export / "2026-11.xlsx").write_bytes(b"PK\x03\x04")
    (export / "old" / "2026-09.csv.zip").parent.mkdir()
    (export / "old" / "2026-09.csv.zip").write_bytes(b"PK\x03\x04")
    (export / "old" / "README.txt").write_text("September, zipped\n")
    (export / "old" / "2026-08.json").write_text("{}")
    (export / "spark.csv" / "_SUCCESS").parent.mkdir()
    (export / "spark.csv" / "_SUCCESS").write_text("")  # markers and manifests: quiet
    write_month(export / "spark.csv" / "part-0000.csv", "2026-07", "7")
    (export / "spark.csv" / "part-0000.csv.crc").write_text("")
    (export / "run" / "manifest.json").parent.mkdir()
    (export / "run" / "manifest.json").write_text(json.dumps({}))
    result = ingest(tmp_path, export)
    assert result.exit_code == 0, result.output
    assert skipped(result.output) == [
        f"bill {export / '2026-11.xlsx'}: skipped, not read: {FOCUS_READS}, not .xlsx: {WHAT_TO_DO}",
        f"bill {export / 'old'}: skipped, 3 files not read: {FOCUS_READS}, not .csv.zip, .json, .txt: {WHAT_TO_DO}"
    ], result.output
    assert "bill 2026-10: committed 1 rows" in result.output and "bill 2026-07: committed 1 rows" in result.output


def test_42_a_folder_of_only_unread_files_fails_naming_them(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    (export / "2026-11.xlsx").write_bytes(b"PK\x03\x04")
    result = ingest(tmp_path, export)
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    assert "no FOCUS files" in result.output
    assert skipped(result.output) == [
        f"bill {export / '2026-11.xlsx'}: skipped, not read: {FOCUS_READS}, not .xlsx: {WHAT_TO_DO}"]


def test_42_a_legacy_cur_reads_zip_parts_and_its_helpers_stay_quiet(tmp_path):
    """Legacy CUR reads `.csv.zip` and writes Redshift/Athena helpers beside its parts: none told."""
    export = tmp_path / "cur"
    period = export / "cur" / "20261001-20261101"
    period.mkdir(parents=True)
    (period / "cur-Manifest.json").write_text(json.dumps({"assemblyId": "a1", "reportKeys": []}))
    (period / "cur-RedshiftManifest.json").write_text("{}")
    (period / "cur-RedshiftCommands.sql").write_text("")
    (export / "cur" / "crawler-cfn.yml").write_text("")
    (export / "cur" / "SHA256SUMS").write_text("")
    (export / "cur" / "notes").write_text("")
    result = ingest(tmp_path, export, kind="aws-cur")
    assert skipped(result.output) == [
        f"bill {export / 'cur' / 'notes'}: skipped, not read: aws-cur reads .csv, .csv.gz, .csv.zip, .parquet files, "
        f"not extensionless: {WHAT_TO_DO}"], result.output


def test_a_focus_datasets_metadata_beside_its_data_stays_quiet(tmp_path):
    """`spendlake export` (FOCUS's metadata) writes `metadata.json` in each period and
    `metadata/` beside them: not bills, so not told (reading an export back said 'skipped, not read
    ... move what is not a bill out of the location' four times on every ingest)."""
    export = tmp_path / "export"
    write_month(export / "2026-10" / "cost_and_usage.csv", "2026-10", "100")
    (export / "2026-10" / "metadata.json").write_text(json.dumps({"DataGenerator": "spendlake"}))
    (export / "metadata" / "schemas").mkdir(parents=True)
    (export / "metadata" / "data_generator.json").write_text(json.dumps({"DataGenerator": "spendlake"}))
    (export / "metadata" / "schemas" / "schema-1.json").write_text(json.dumps({"ColumnDefinition": []}))
    (export / "2026-10" / "notes.json").write_text("{}")  # any other .json is still told
    result = ingest(tmp_path, export)
    assert result.exit_code == 0, result.output
    assert skipped(result.output) == [
        f"bill {export / '2026-10' / 'notes.json'}: skipped, not read: {FOCUS_READS}, not .json: {WHAT_TO_DO}"]
