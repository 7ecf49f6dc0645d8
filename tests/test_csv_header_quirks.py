"""A CSV export's header as hands and spreadsheets leave it (break47 #10, #11): a name with a
space after it, Excel's `sep=,` line above the header, and a header repeated inside the file
(`cat a.csv b.csv`). Every connector reads its header through connectors.csvfile.csv_header."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from billing_helpers import failures, ingest_files, sums

from tests.aws_exports import legacy_csv, line
from tests.test_azure_cost import NEW_EA
from tests.test_focus import focus_csv
from tests.test_gcp_billing import koku_csv

FOCUS = focus_csv("1.5,1.25,USD,2024-06-01T00:00Z,2024-06-02T00:00Z,2024-06-02T01:00Z,AWS,",
                  "2.25,2,USD,2024-06-01T00:00Z,2024-06-03T00:00Z,2024-06-03T01:00Z,AWS,")
SOURCES = {"focus": FOCUS, "azure-cost": NEW_EA.encode(), "gcp-billing": koku_csv({}, {"cost": "2.5"})}
SPACED = {"focus": (b"BilledCost,", b"BilledCost ,"), "azure-cost": (b"CostInBillingCurrency,", b" CostInBillingCurrency  ,"),
          "gcp-billing": (b",cost,", b",cost ,")}


def billed(tmp_path, kind: str, content: bytes) -> tuple[list[tuple], list[str]]:
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "export.csv"
    path.write_bytes(content)
    lake, result = ingest_files(tmp_path, ("src", kind, path))
    return sums(lake, "BillingCurrency"), failures(result)


@pytest.mark.parametrize("kind", SOURCES)
def test_a_header_name_with_spaces_around_it_reads_as_the_name(tmp_path, kind):
    """`BilledCost ` failed focus, azure and gcp as "required column 'BilledCost' is missing";
    aws-cur read it (its names are normalised)."""
    plain = billed(tmp_path / "plain", kind, SOURCES[kind])
    spaced = billed(tmp_path / "spaced", kind, SOURCES[kind].replace(*SPACED[kind], 1))
    assert plain[1] == [] and plain[0] and plain[0][0][2] != Decimal(0)
    assert spaced == plain


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize("line", [b"sep=,", b"SEP=;", b"sep=\t"])
def test_a_spreadsheets_separator_line_above_the_header_is_named(tmp_path, kind, line):
    """Excel's `sep=,` first line read as the header said a required column was missing, naming no line."""
    content = SOURCES[kind].removeprefix(b"\xef\xbb\xbf")
    _, said = billed(tmp_path, kind, line + b"\r\n" + content)
    [message] = said
    assert f"export.csv: line 1 is {line.decode()!r}, a spreadsheet's hint of the separator" in message, message
    assert "delete that line (the header row is the next one)" in message


@pytest.mark.parametrize("kind", SOURCES)
def test_a_header_repeated_inside_the_file_names_its_line_and_says_so(tmp_path, kind):
    """`cat a.csv b.csv`: focus said `column BillingPeriodStart: not a date/time: BillingPeriodStart`,
    no line; azure and gcp named the line, not what it was."""
    content = SOURCES[kind].removeprefix(b"\xef\xbb\xbf").rstrip(b"\r\n") + b"\n"
    _, said = billed(tmp_path, kind, content + content)
    [message] = said
    lines = content.count(b"\n")
    assert f"line {lines + 1}, column " in message, message
    assert f"line {lines + 1} repeats the header row: two exports joined into one file (`cat a.csv b.csv`)?" in message


def test_a_bad_time_names_the_line_its_record_begins_on(tmp_path):
    """A time (text, parsed in SQL) named no line; a quoted field over two lines before it counts both."""
    content = focus_csv('1,1,USD,2024-06-01T00:00Z,2024-06-02T00:00Z,2024-06-02T01:00Z,AWS,"{""a"":\r\n""b""}"',
                        "2,2,USD,2024-06-01T00:00Z,2024-06-31T00:00Z,2024-06-03T01:00Z,AWS,")
    _, said = billed(tmp_path, "focus", content)
    [message] = said
    assert message.endswith(": line 4, column ChargePeriodStart: not a date/time: 2024-06-31T00:00Z"), message


def test_an_aws_cur_time_duckdb_refused_names_its_file_line_and_column(tmp_path):
    """aws-cur said only `invalid timestamp field format: "bill/BillingPeriodStartDate"`: no file,
    line or column (its times are cast as written); now as the other kinds say it."""
    content = legacy_csv([line(cost="1"), line(cost="2")])
    _, said = billed(tmp_path / "cat", "aws-cur", content + content)
    [message] = said
    # whichever time column DuckDB casts first: its name is the value
    assert re.search(r"export\.csv: could not read the delivery: line 4, column (\S+Date): not a date/time: \1 — line 4 "
                     r"repeats the header row: two exports joined into one file \(`cat a\.csv b\.csv`\)\? deliver each "
                     r"export as a file of its own$", message), message
    _, said = billed(tmp_path / "bad", "aws-cur", legacy_csv([line(cost="1"), line(
        cost="2", lineItem__UsageStartDate="2026-10-32T03:00:00Z")]))
    [message] = said
    assert message.endswith(": line 3, column lineItem/UsageStartDate: not a date/time: 2026-10-32T03:00:00Z — fix "
                            "that value or re-export the file"), message


def test_a_refused_value_cut_short_in_the_message_is_found_by_its_start(tmp_path):
    """A value over 400 characters is cut short in the message (errors.MAX_REASON), and named no
    line: no record holds the text shown. The record holding a value that begins with it is named;
    where several do, the message cannot tell which one the SQL refused, and names them all."""
    tags = '"{""team"": ""' + "x" * 500 + '""'  # no closing brace: not JSON
    rows = [f"1,1,USD,2024-06-01T00:00Z,2024-06-02T00:00Z,2024-06-02T01:00Z,AWS,{tags}}}\"",
            f"2,2,USD,2024-06-01T00:00Z,2024-06-03T00:00Z,2024-06-03T01:00Z,AWS,{tags}\""]
    _, said = billed(tmp_path / "one", "focus", focus_csv(rows[0].replace("x" * 500, "y"), rows[1]))
    [message] = said
    assert re.search(r"export\.csv: could not read the delivery: line 3, column Tags: not a JSON object[^:]*: "
                     r"\{\"team\": \"x+…", message), message
    _, said = billed(tmp_path / "two", "focus", focus_csv(*rows))
    [message] = said
    assert re.search(r": one of lines 2 and 3 \(their values begin alike, the value cut short here: compare them "
                     r"whole\), column Tags: not a JSON object[^:]*: \{\"team\": \"x+…", message), message
    # an AWS export's time, which DuckDB refuses in its own words (a closing quote cut off)
    _, said = billed(tmp_path / "cur", "aws-cur", legacy_csv([line(cost="1"), line(
        cost="2", lineItem__UsageStartDate="2026-10-03T03:00:00Z" + "0" * 500)]))
    [message] = said
    assert re.search(r"export\.csv: could not read the delivery: line 3, column lineItem/UsageStartDate: not a "
                     r"date/time: 2026-10-03T03:00:00Z0+…", message), message
