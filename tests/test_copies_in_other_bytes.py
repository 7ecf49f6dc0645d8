"""A copy of an export in other bytes is still a copy (break47): `c.csv` beside `c.csv.gz`, a copy
saved with a byte order mark or CRLF line ends, or the same file under Hive folders whose values
reach no row (`BillingPeriod=2024-09/`, `year=2024/month=09/` beside `backup/`, `SubAccountId=1/`
and `=2/` for a file with its own SubAccountId column) was summed twice, exit 0. Its content
(connectors.content) is what the copy check compares: read once, the copy skipped naming both.
Two sources whose folders hold the same file count it twice: each ingest warns, and `status`."""

from __future__ import annotations

import codecs
import gzip
import hashlib
import shutil
from pathlib import Path

import pytest
from billing_helpers import failures
from layout_exports import WRITERS, duckdb_sums, lake_sums

from connectors import content
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import ingest
from service.ingest.status import copies_skipped
from tests.test_delivery_layout import lines, run

ROWS = [("2024-09", "USD", "20.280226728990"), ("2024-09", "EUR", "0.000000000001")]


def original(folder: Path, name: str = "c.csv") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    WRITERS["focus"](folder / name, ROWS)
    return folder / name


def gzipped(path: Path, to: Path) -> None:
    to.write_bytes(gzip.compress(path.read_bytes()))


def with_mark(path: Path, to: Path) -> None:
    to.write_bytes(codecs.BOM_UTF8 + path.read_bytes())


def crlf(path: Path, to: Path) -> None:
    to.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))


def skipped(result) -> list[str]:
    return [line for line in lines(result) if "skipped, the same" in line]


@pytest.mark.parametrize("make, name", [(gzipped, "c.csv.gz"), (with_mark, "c-bom.csv"), (crlf, "c-crlf.csv")])
def test_a_copy_gzipped_or_saved_with_a_byte_order_mark_or_crlf_is_read_once(tmp_path, make, name):
    export = tmp_path / "export"
    first = original(export)
    once = duckdb_sums("focus", export)
    make(first, export / name)
    assert first.read_bytes() != (export / name).read_bytes()
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [], lines(result)
    assert lake_sums(lake) == once  # was twice September's: USD 40.560453457980
    assert skipped(result) == [f"src {export / name}: skipped, the same content as {first} (a copy: its rows are "
                               "read once)"]


@pytest.mark.parametrize("copy", ["BillingPeriod=2024-09/c.csv", "backup/c.csv"])
def test_the_same_file_under_hive_folders_no_column_reads_is_read_once(tmp_path, copy):
    export = tmp_path / "export"
    first = original(export / "year=2024" / "month=09") if copy.startswith("backup") else original(export)
    once = duckdb_sums("focus", export)
    (export / copy).parent.mkdir(parents=True)
    shutil.copyfile(first, export / copy)
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and lake_sums(lake) == once, lines(result)
    assert len(skipped(result)) == 1, lines(result)


def test_a_files_own_subaccount_column_wins_over_its_folder_so_the_same_file_under_two_is_one(tmp_path):
    export = tmp_path / "export"
    first = original(export / "SubAccountId=1")
    text = first.read_text().splitlines()
    first.write_text("\n".join([text[0] + ",SubAccountId", *(line + ",acct" for line in text[1:])]) + "\n")
    once = duckdb_sums("focus", export)
    (export / "SubAccountId=2").mkdir()
    shutil.copyfile(first, export / "SubAccountId=2" / "c.csv")
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and lake_sums(lake) == once, lines(result)
    assert len(skipped(result)) == 1, lines(result)


def test_the_same_file_under_two_values_of_a_column_it_lacks_is_two_accounts_lines(tmp_path):
    export = tmp_path / "export"
    first = original(export / "SubAccountId=1")
    (export / "SubAccountId=2").mkdir()
    shutil.copyfile(first, export / "SubAccountId=2" / "c.csv")
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and skipped(result) == [], lines(result)
    assert lake_sums(lake) == {key: 2 * value for key, value in duckdb_sums("focus", export / "SubAccountId=1").items()}


def test_two_sources_holding_the_same_file_are_warned_of_at_each_ingest_and_in_status(tmp_path):
    first = original(tmp_path / "exports" / "focus")
    (tmp_path / "other").mkdir()
    shutil.copyfile(first, tmp_path / "other" / "c.csv")
    config = parse_config({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "foc", "kind": "focus", "location": str(tmp_path / "exports" / "focus")},
        {"name": "other", "kind": "focus", "location": str(tmp_path / "other")}]})
    said = (f"{first}: also read by source other ({tmp_path / 'other' / 'c.csv'}, the same content): its rows are "
            "counted by both sources; give each file one source (move it out of one location, or remove one of "
            "the sources)")
    for _ in range(2):  # the second run reads nothing new and still says it
        result = ingest(config)
        assert failures(result) == [] and said in result.warnings and len(result.warnings) == 2, result.warnings
    assert copies_skipped(Lake(config.lake))[0].text == (
        f"source foc: 1 file(s) under its location another source reads too (their rows counted by both): {first}, "
        f"the same as {tmp_path / 'other' / 'c.csv'} (source other); give each file one source (move it out of one "
        "location, or remove one of the sources)")
    (tmp_path / "other" / "c.csv").unlink()
    (tmp_path / "other" / "d.csv").write_text(first.read_text().replace("20.280226728990", "1.5"))
    assert ingest(config).warnings == [] and copies_skipped(Lake(config.lake)) == []  # told while both hold it


def test_content_reads_the_same_however_the_bytes_are_cut_or_gzipped(tmp_path):
    text = b"a,b\n1,x\n2,y\n"
    stored = codecs.BOM_UTF8 + text.replace(b"\n", b"\r\n")
    for cut in range(1, len(stored)):  # a CRLF or the byte order mark cut between two reads
        assert b"".join(content.normalised([stored[:cut], stored[cut:]], "c.csv")) == text
    (tmp_path / "cat.csv.gz").write_bytes(gzip.compress(stored[:9]) + gzip.compress(stored[9:]))  # `cat a.gz b.gz`
    (tmp_path / "bad.csv.gz").write_bytes(b"not a gzip")
    assert content.digest(tmp_path / "cat.csv.gz", "cat.csv.gz") == hashlib.sha256(text).hexdigest()
    assert content.digest(tmp_path / "bad.csv.gz", "bad.csv.gz") == hashlib.sha256(b"not a gzip").hexdigest()
    assert content.head(stored, "c.csv")[1] == ["a", "b"]


def test_the_same_file_under_two_values_of_a_column_outside_the_row_print_is_two_services_lines(tmp_path):
    """The row print hashes what a row bills (row_prints.BILLED), not ServiceName: a Hive key the file
    lacks reaches its rows all the same, so the same file under ServiceName=A/ and =B/ is two services'
    lines, as under two SubAccountId values, not a copy in other rows."""
    export = tmp_path / "export"
    first = original(export / "ServiceName=Compute")
    header, *rows = [line.split(",") for line in first.read_text().splitlines()]
    keep = [index for index, name in enumerate(header) if name != "ServiceName"]
    first.write_text("".join(",".join(line[i] for i in keep) + "\n" for line in [header, *rows]))
    (export / "ServiceName=Storage").mkdir()
    shutil.copyfile(first, export / "ServiceName=Storage" / "c.csv")
    lake, result = run(tmp_path, "focus", export)
    assert failures(result) == [] and skipped(result) == [], lines(result)
    once = duckdb_sums("focus", export / "ServiceName=Compute")
    assert lake_sums(lake) == {key: 2 * value for key, value in once.items()}
    services = lake.query().execute("SELECT DISTINCT ServiceName FROM costs ORDER BY 1").fetchall()
    assert services == [("Compute",), ("Storage",)]
