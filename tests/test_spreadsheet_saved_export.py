"""A FOCUS export (or a CUR, or a jobs-file) opened and saved in a spreadsheet (Excel writes a BOM, CRLF and its own
times, `9/1/2024 0:00`) fails (exit 3) naming the file, column and value, and says what
happened and what to do: the times were rewritten; use the export as delivered."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from click.testing import CliRunner

from billing_helpers import failures, ingest_files
from conftest import SAMPLES
from service.cli.main import cli

ISO = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::\d\d)?(?:\.\d+)?Z?$")


def as_excel_saves_it(text: str) -> str:
    """The CSV as Excel (en-US) saves it: every ISO time as m/d/yyyy h:mm, CRLF, a BOM."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for number, row in enumerate(csv.reader(io.StringIO(text))):
        writer.writerow(row if number == 0 else [
            f"{int(m[2])}/{int(m[3])}/{m[1]} {int(m[4])}:{m[5]}" if (m := ISO.match(v)) else v for v in row])
    return "\ufeff" + out.getvalue()


@pytest.mark.parametrize("kind, sample, says, first", [
    ("focus", "focus/focus_1.0_sample_1000.csv", "column BillingPeriodStart: not a date/time: 9/1/2024 0:00",
     "9/1/2024 0:00"),
    # the CUR's times are cast without a column's name: the file's line found once DuckDB refused one
    ("aws-cur", "aws/legacy_cur_csv_anonymous_sample.csv",
     "line 2, column bill/BillingPeriodStartDate: not a date/time: 11/1/2023 0:00", "11/1/2023 0:00"),
])
def test_an_export_saved_by_a_spreadsheet_names_the_rewritten_times_and_says_to_use_the_export(tmp_path, kind,
                                                                                                sample, says, first):
    export = tmp_path / "export"
    export.mkdir()
    text = (SAMPLES / sample).read_text(encoding="utf-8-sig")
    (export / "bill.csv").write_text(as_excel_saves_it(text), encoding="utf-8", newline="")
    _, result = ingest_files(tmp_path, ("bill", kind, export))
    [error] = failures(result)
    assert str(export / "bill.csv") in error and says in error, error
    assert f"a spreadsheet that opened and saved the file rewrote its times ({first})" in error, error
    assert "ingest the export as delivered, or save the times as ISO 8601" in error, error


def test_a_time_no_spreadsheet_writes_keeps_its_error_without_that_hint(tmp_path):
    (tmp_path / "export").mkdir()
    sample = (SAMPLES / "focus" / "focus_1.0_sample_1000.csv").read_text(encoding="utf-8")
    header, first, rest = sample.split("\n", 2)
    start = next(csv.reader([header])).index("ChargePeriodStart")
    cells = next(csv.reader([first]))
    cells[start] = "June 2nd"
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(cells)
    (tmp_path / "export" / "focus.csv").write_text(f"{header}\n{out.getvalue()}{rest}", encoding="utf-8")
    _, result = ingest_files(tmp_path, ("bill", "focus", tmp_path / "export"))
    [error] = failures(result)
    assert "column ChargePeriodStart: not a date/time: June 2nd" in error and "a spreadsheet that" not in error, error


def test_a_jobs_file_saved_by_a_spreadsheet_names_the_rewritten_time_with_the_same_hint(tmp_path):
    (tmp_path / "jobs.csv").write_text(as_excel_saves_it(
        "job_id,start_time,end_time,gpus\n1,2026-11-16T10:00:00Z,2026-11-16T12:30:00Z,8\n"), encoding="utf-8",
        newline="")
    (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "trace", "kind": "jobs-file", "path": str(tmp_path / "jobs.csv")}]}))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory"])
    assert result.exit_code == 3, result.output
    assert "column start_time: '11/16/2026 10:00' is not an ISO 8601 time" in result.output, result.output
    assert ("a spreadsheet that opened and saved the file rewrote its times (11/16/2026 10:00): ingest the export "
            "as delivered, or save the times as ISO 8601") in result.output, result.output
