"""A CSV field longer than Python's csv reader took (131,072 characters), in a billing file and in a
jobs-file: read exactly up to the longest line DuckDB's read_csv reads (csvfile.MAX_LINE_BYTES, its
max_line_size default, kept: its buffers grow with it); past it, the source fails naming the file, the
line and its length, exit 3, saying what to do."""

from __future__ import annotations

import csv
import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest
from billing_helpers import failures, ingest_files, sums
from conftest import SAMPLES
from test_jobs_file import jobs, run

FOCUS = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"


def focus_with_tags(path: Path, characters: int) -> Path:
    """The FOCUS sample, its 300th line item's Tags a JSON object `characters` long and more (line 301);
    gzipped when `path` ends in .gz."""
    rows = list(csv.reader(FOCUS.open(newline="")))
    rows[300][rows[0].index("Tags")] = json.dumps({"note": "x" * characters})
    path.parent.mkdir(parents=True, exist_ok=True)
    with (gzip.open if path.suffix == ".gz" else open)(path, "wt", newline="") as out:
        csv.writer(out, quoting=csv.QUOTE_ALL).writerows(rows)
    return path


def test_a_billing_files_tags_of_200000_characters_are_read_exactly(tmp_path):
    focus_with_tags(tmp_path / "bill" / "long.csv", 200_000)
    lake, result = ingest_files(tmp_path, ("f", "focus", tmp_path / "bill"))
    assert not failures(result)
    rows = list(csv.DictReader(FOCUS.open(newline="")))
    assert sum(r[3] for r in sums(lake)) == sum(Decimal(r["BilledCost"]) for r in rows)
    [(length,)] = lake.query().execute("SELECT max(length(CAST(Tags AS VARCHAR))) FROM costs").fetchall()
    assert length >= 200_000


LONG_LINE = ("could not read the delivery: line 301 is {:,} bytes, longer than the 2,000,000 the CSV reader takes "
             "— a value that long (a resource's tags, a job's labels): deliver the file as Parquet, which has no such "
             "limit, or shorten the value in the export")


@pytest.mark.parametrize("characters, name", [
    (2_200_000, "long.csv"),  # DuckDB: 'Maximum line size of 2000000 bytes exceeded', said of a quote left open too
    (40_000_000, "long.csv"),  # past DuckDB's buffer: 'Value with unterminated quote found', though every quote closes
    (40_000_000, "long.csv.gz")])
def test_a_billing_line_over_what_duckdb_reads_names_the_file_the_line_its_length_and_what_to_do(tmp_path, characters,
                                                                                                 name):
    path = focus_with_tags(tmp_path / "bill" / name, characters)
    _, result = ingest_files(tmp_path, ("f", "focus", tmp_path / "bill"))
    [error] = failures(result)
    assert error == f"{path}: " + LONG_LINE.format(characters + 734), error[:600]  # the line's other fields: 734 bytes
    assert result.failed[0].error.exit_code == 3


def test_a_quote_left_open_in_a_billing_line_is_said_as_duckdb_says_it(tmp_path):
    """Its record never ends: no length is told, DuckDB's reason stays."""
    path = focus_with_tags(tmp_path / "bill" / "open.csv", 10)
    path.write_bytes(path.read_bytes().replace(b'x""}"', b'x""}', 1))  # the Tags field's closing quote gone
    _, result = ingest_files(tmp_path, ("f", "focus", tmp_path / "bill"))
    [error] = failures(result)
    said = f"{path}: could not read the delivery: line 301: Value with unterminated quote found"
    assert error.startswith(said), error


def jobs_csv(path: Path, characters: int) -> Path:
    """Five jobs; row 4 (line 5) with labels `characters` long and more, row 5 (line 6) a gpus cell no number."""
    path.mkdir(parents=True, exist_ok=True)
    with (path / "jobs.csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["job_id", "start_time", "end_time", "gpus", "cluster", "labels"])
        for n in range(5):
            writer.writerow([f"j{n}", "2024-09-10 00:00:00", "2024-09-10 05:00:00", "eight" if n == 4 else 8, "p5",
                             json.dumps({"note": "x" * characters} if n == 3 else {"team": "a"})])
    return path


@pytest.mark.parametrize("characters, said", [
    (200_000, "row 5 (line 6), column gpus: 'eight' is not a number"),  # the value at fault, read row by row
    (2_100_000, "line 5: a field is over 2,000,000 characters — that is a quote left open, which runs on to later "
                "lines (close it, or re-export the file), or a value that long (a resource's tags, a job's labels): "
                "deliver the file as Parquet")])
def test_a_jobs_files_long_field_read_row_by_row_names_its_line_or_the_value_at_fault(tmp_path, characters, said):
    """A bad value makes the jobs-file read the file row by row (Python's csv), which failed at a field of 131,072
    characters: 'cannot read: Error: field larger than field limit (131072)', no line, the value at fault unsaid."""
    outcome = run(tmp_path, jobs_csv(tmp_path / "jobs", characters))
    assert f"{tmp_path / 'jobs' / 'jobs.csv'}: {said}" in str(outcome.error), outcome.error


def test_a_jobs_files_labels_of_200000_characters_are_read_whole(tmp_path):
    path = jobs_csv(tmp_path / "jobs", 200_000)
    (path / "jobs.csv").write_text((path / "jobs.csv").read_text().replace("eight", "8"))
    assert run(tmp_path, path).error is None
    assert [(job, len(labels["note"]) if "note" in labels else None) for job, labels in jobs(tmp_path, "job_id, labels")
            ][2:4] == [("j2", None), ("j3", 200_000)]


def test_the_csv_field_limit_is_set_once_as_csvfile_is_imported_not_by_each_reader():
    # csv.field_size_limit is the whole process's: csv_reader set it again on each call, over whatever was set since
    from connectors.csvfile import MAX_LINE_BYTES, csv_reader

    before = csv.field_size_limit()
    try:
        assert before == MAX_LINE_BYTES
        csv.field_size_limit(1000)
        assert list(csv_reader(["a,b\n"])) == [["a", "b"]] and csv.field_size_limit() == 1000
    finally:
        csv.field_size_limit(before)
