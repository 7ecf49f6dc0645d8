"""A JSON export file's view: its columns' types found from every line once, at open."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import duckdb

from connectors.exportfile import open_table


def write_lines(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_json_files_view_is_bound_to_the_types_found_at_open_not_sampled_again(tmp_path):
    # each statement binding a view of read_json(sample_size = -1) read the whole file again to
    # find its types: 7x the CPU of one read for a gcp-billing ingest. The view now gives the
    # reader the types found at open, so a field written to the file afterwards is not seen.
    path = write_lines(tmp_path / "export.jsonl", [{"cost": 1, "month": "202610"}, {"cost": 2.5, "month": "202610"}])
    con = duckdb.connect()
    table = open_table(con, path, str(path))
    write_lines(path, [{"cost": 1, "month": "202610", "later": "x"}, {"cost": 2.5, "month": "202610", "later": "y"}])
    view = con.sql(f"SELECT * FROM {table.source}")
    assert view.columns == ["cost", "month"]
    assert view.fetchall() == [(1.0, "202610"), (2.5, "202610")]


def test_types_found_from_every_line_are_kept_a_field_of_the_last_line_and_a_number_widened_late(tmp_path):
    rows = [{"cost": 1, "labels": []} for _ in range(30_000)]
    rows.append({"cost": 0.000005, "labels": [{"key": "team", "value": "a"}], "cost_type": "tax"})
    path = write_lines(tmp_path / "export.jsonl", rows)
    con = duckdb.connect()
    table = open_table(con, path, str(path))
    assert {name: str(kind) for name, kind in table.columns.values()} == {
        "cost": "DOUBLE", "labels": 'STRUCT("key" VARCHAR, "value" VARCHAR)[]', "cost_type": "VARCHAR"}
    assert con.sql(f"SELECT count(*), sum(cost), max(cost_type), max(len(labels)) FROM {table.source}").fetchall() == [
        (30_001, 30_000.000005, "tax", 1)]


def test_a_date_in_a_format_the_reader_detected_is_read_as_detected(tmp_path):
    # a detected date format is not given back with the types: such a file keeps the sampling reader
    path = write_lines(tmp_path / "export.jsonl", [{"day": "10-01-2026", "cost": 1}, {"day": "31-12-2026", "cost": 2}])
    con = duckdb.connect()
    table = open_table(con, path, str(path))
    assert con.sql(f"SELECT day FROM {table.source} ORDER BY cost").fetchall() == [(date(2026, 1, 10),),
                                                                                  (date(2026, 12, 31),)]
