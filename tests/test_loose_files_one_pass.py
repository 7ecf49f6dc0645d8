"""A source's loose files, all new to it, are committed in one pass (RELIABILITY 40, 46):
each file is read once, not once for its periods and again to be staged, and the lake and
what ingest remembers are the same as after a survey (service/ingest/periods.py)."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from billing_helpers import failures
from layout_exports import focus

import service.core.staging as staging
from connectors.focus import FocusConnector
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import IngestResult, ingest

MAY, JUNE, JULY = "2024-05", "2024-06", "2024-07"


def run(tmp_path: Path, export: Path, lake: str = "lake") -> tuple[Lake, IngestResult]:
    config = parse_config({"lake": str(tmp_path / lake),
                           "sources": [{"name": "src", "kind": "focus", "location": str(export)}]})
    return Lake(config.lake), ingest(config)


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """How many times the connector read each file (its canonical SELECT, made per read: of one
    file, or of a run of files read together, each counted)."""
    counted: Counter = Counter()
    select = FocusConnector.select

    def counting(self, con, path, uri):
        counted.update(Path(one).name for one in getattr(path, "uris", (uri,)))
        return select(self, con, path, uri)

    monkeypatch.setattr(FocusConnector, "select", counting)
    return counted


def parts(export: Path) -> Path:
    """Six CSV parts: May in three, June in one, one part holding June and July (which joins
    them), and a header with no rows."""
    export.mkdir(parents=True)
    for name, rows in {"a.csv": [(MAY, "USD", "1.5")], "b.csv": [(MAY, "USD", "2"), (MAY, "EUR", "3")],
                       "c.csv": [(MAY, "USD", "0.25")], "d.csv": [(JUNE, "USD", "7")],
                       "e.csv": [(JUNE, "USD", "1"), (JULY, "USD", "4")]}.items():
        focus(export / name, rows)
    (export / "f.csv").write_text((export / "a.csv").read_text().splitlines()[0] + "\n")
    return export


def entries(lake: Lake) -> list[tuple]:
    return sorted((e.billing_period, e.delivery_id, e.files, e.rows, e.totals) for e in lake.ledger())


def test_40_the_first_ingest_of_new_csv_parts_reads_each_part_once(tmp_path, reads):
    export = parts(tmp_path / "export")
    lake, result = run(tmp_path, export)
    assert failures(result) == []
    assert reads == {name: 1 for name in ("a.csv", "b.csv", "c.csv", "d.csv", "e.csv", "f.csv")}
    assert [o.delivery.files for o in result.outcomes if o.status == "empty"] == [(str(export / "f.csv"),)]

    reads.clear()
    again = run(tmp_path, export)[1]  # what the pass found is remembered: nothing is read again
    assert {o.status for o in again.outcomes} == {"unchanged", "empty"} and not reads


def test_40_one_pass_gives_the_ledger_and_file_periods_a_survey_gives(tmp_path, monkeypatch):
    export = parts(tmp_path / "export")
    one_pass, _ = run(tmp_path, export, "one-pass")
    monkeypatch.setattr(FocusConnector, "parts_are_files", False)  # the survey path
    surveyed, _ = run(tmp_path, export, "surveyed")
    assert entries(one_pass) == entries(surveyed)
    assert len({e[1] for e in entries(one_pass)}) == 2  # May; June with July (e.csv joins them)
    assert one_pass.read_state("file_periods") == surveyed.read_state("file_periods")
    assert one_pass.query().execute("SELECT sum(BilledCost) FROM costs").fetchall() \
        == surveyed.query().execute("SELECT sum(BilledCost) FROM costs").fetchall()


def test_40_files_added_replaced_and_deleted_after_one_pass_are_read_as_after_a_survey(tmp_path, reads):
    export = parts(tmp_path / "export")
    lake, _ = run(tmp_path, export)
    focus(export / "g.csv", [(JULY, "USD", "10")])  # added: June and July are read again, May is not
    reads.clear()
    result = run(tmp_path, export)[1]
    assert sorted(e.billing_period for o in result.outcomes if o.status == "committed" for e in o.entries) \
        == [JUNE, JULY] and "a.csv" not in reads
    (export / "e.csv").unlink()  # deleted: June and July part ways
    focus(export / "a.csv", [(MAY, "USD", "100")])  # replaced
    result = run(tmp_path, export)[1]
    assert failures(result) == []
    assert lake.query().execute("SELECT BillingCurrency, sum(BilledCost)::VARCHAR FROM costs GROUP BY 1 ORDER BY 1"
                                ).fetchall() == [("EUR", "3.000000000000"), ("USD", "119.250000000000")]
    assert {o.status for o in run(tmp_path, export)[1].outcomes} == {"unchanged", "empty"}


def test_40_a_bad_file_among_new_ones_fails_alone(tmp_path, caplog, monkeypatch):
    export = parts(tmp_path / "export")
    focus(export / "z.csv", [(JULY, "USD", "not money")])
    with caplog.at_level(logging.INFO, logger="service.ingest.billing"):
        lake, result = run(tmp_path, export)
    assert any("in one pass failed" in r.getMessage() for r in caplog.records)
    [error] = failures(result)
    assert "z.csv" in error
    assert sorted(e.billing_period for e in lake.ledger()) == [MAY]  # June and July wait for z.csv
    monkeypatch.setattr(FocusConnector, "parts_are_files", False)
    assert entries(lake) == entries(run(tmp_path, export, "surveyed")[0])  # as a run that surveyed them


def test_41_another_dataset_among_new_files_is_skipped_and_the_others_still_go_in_one_pass(
        tmp_path, caplog, monkeypatch):
    export = parts(tmp_path / "export")
    (export / "periods.csv").write_text("BillingPeriodStart,BillingPeriodStatus\n2024-05-01T00:00:00Z,Closed\n")
    with caplog.at_level(logging.INFO, logger="service.ingest.billing"):
        lake, result = run(tmp_path, export)
    assert not any("in one pass failed" in r.getMessage() for r in caplog.records)  # no survey
    assert failures(result) == [] and [o.delivery.files for o in result.outcomes if o.status == "skipped"] \
        == [(str(export / "periods.csv"),)]
    monkeypatch.setattr(FocusConnector, "parts_are_files", False)
    surveyed, _ = run(tmp_path, export, "surveyed")
    assert entries(lake) == entries(surveyed) and len(entries(lake)) == 3
    assert lake.read_state("file_periods") == surveyed.read_state("file_periods")
    assert {o.status for o in run(tmp_path, export)[1].outcomes} == {"unchanged", "empty", "skipped"}


def test_46_periods_idle_while_others_are_read_write_what_they_buffer(tmp_path, monkeypatch):
    """A pass over several periods' files holds at most PENDING_ROWS buffered rows beyond the
    periods being written: May's 100 rows are written as a row group when June's come. Each file
    a part of its own (same-header CSV files are otherwise one read, one part: test_csv_runs)."""
    monkeypatch.setattr(FocusConnector, "reads_runs", False)
    monkeypatch.setattr(staging, "BATCH_ROWS", 50)
    monkeypatch.setattr(staging, "ROW_GROUP_ROWS", 1_000)
    monkeypatch.setattr(staging, "PENDING_ROWS", 150)
    export = tmp_path / "export"
    export.mkdir()
    for name, period, cost in (("a.csv", MAY, "1"), ("b.csv", JUNE, "1"), ("c.csv", MAY, "2")):
        focus(export / name, [(period, "USD", cost)] * 100)  # c.csv's own rows: a copy of a.csv's is read once
    lake, result = run(tmp_path, export)
    assert failures(result) == []
    may = pq.ParquetFile(lake.partition_file("costs", [("source", "src"), ("billing_period", MAY)]))
    assert [may.metadata.row_group(i).num_rows for i in range(may.num_row_groups)] == [100, 100]
    assert lake.query().execute("SELECT count(*), sum(BilledCost)::INTEGER FROM costs").fetchall() == [(300, 400)]
