"""`cost_type: auto` without a manifest: when the first lines (HEAD_LINES) of a delivery's files
show which export it is, one and the same for every file, each file is read once, the type taken
from them, where its whole was read for its signs and then again for its lines. An amortized sign decides
(amortized wins, as over the whole file); an actual head holds while no later line is an
amortized export's, which fails the read naming the file. A head of on-demand lines only tells
nothing: the whole file is read for its signs, as before."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest

import connectors.azure_cost as azure_cost
from billing_helpers import failures, ingest_files, sums
from conftest import SAMPLES

AMORTIZED = SAMPLES / "azure" / "ea_amortized_trey_research_small.csv"  # 28 lines: covered usage with a cost first
ACTUAL = SAMPLES / "azure" / "ea_actual_trey_research_small.csv"  # 11 lines: a reservation's purchase first
HEAD = 4


def lines(sample) -> tuple[list[str], list[list[str]]]:
    header, *rows = list(csv.reader(io.StringIO(sample.read_bytes().decode("utf-8-sig"), newline="")))
    return header, rows


def write(path, header: list[str], rows: list[list[str]]):
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *rows])
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


@pytest.fixture
def signs_read(monkeypatch) -> list[str]:
    """A short head, and the files whose whole was read for their signs."""
    monkeypatch.setattr(azure_cost, "HEAD_LINES", HEAD)
    read: list[str] = []
    whole = azure_cost.AzureCostConnector._signs_of
    monkeypatch.setattr(azure_cost.AzureCostConnector, "_signs_of",
                        lambda self, con, table: read.append(table.uri) or whole(self, con, table))
    return read


@pytest.mark.parametrize("sample, expected", [
    (ACTUAL, ("2023-09", 11, Decimal("8.545007786742"), None)),
    (AMORTIZED, ("2023-09", 28, None, Decimal("16.296932136637"))),
])
def test_a_file_whose_first_lines_tell_its_export_is_read_once(tmp_path, signs_read, sample, expected):
    header, rows = lines(sample)
    path = write(tmp_path / "export.csv", header, rows * 3)  # longer than the head
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", path))
    assert failures(result) == []
    period, count, billed, effective = expected
    assert sums(lake, "billing_period") == [(period, 3 * count, billed and 3 * billed, effective and 3 * effective)]
    assert signs_read == []  # the whole file's signs were read before its lines


@pytest.mark.parametrize("sample, expected", [
    (ACTUAL, ("2023-09", 11, Decimal("8.545007786742"), None)),
    (AMORTIZED, ("2023-09", 28, None, Decimal("16.296932136637"))),
])
def test_a_delivery_in_several_files_whose_first_lines_tell_one_export_reads_each_once(tmp_path, signs_read, sample,
                                                                                      expected):
    """Each file of a delivery of several was read whole for its signs, then again for its lines."""
    header, rows = lines(sample)
    (tmp_path / "export").mkdir()
    for part, copies in (("part_1.csv", 3), ("part_2.csv", 2)):  # each longer than the head
        write(tmp_path / "export" / part, header, rows * copies)
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", tmp_path / "export"))
    assert failures(result) == []
    period, count, billed, effective = expected
    assert sums(lake, "billing_period") == [(period, 5 * count, billed and 5 * billed, effective and 5 * effective)]
    assert signs_read == []


def test_an_amortized_line_after_a_head_read_as_actual_fails_naming_the_file(tmp_path, signs_read):
    """Read whole for its signs, the file was taken as amortized (one amortized sign decides): the
    actual export's lines became effective cost, the on-demand usage of both counted."""
    header, actual = lines(ACTUAL)
    _, amortized = lines(AMORTIZED)
    path = write(tmp_path / "both.csv", header, actual + amortized)
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", path))
    [error] = failures(result)
    assert str(path) in error and "column ChargeType: an amortized cost export's line" in error
    assert f"after the file's first {HEAD:,} lines read as an actual export's" in error
    assert "Usage, PricingModel Reservation, cost 0.49315" in error  # the line, as the file holds it
    assert lake.ledger() == []


def test_a_head_of_on_demand_lines_reads_the_whole_file_for_its_signs(tmp_path, signs_read):
    header, rows = lines(AMORTIZED)
    model = header.index("PricingModel")
    path = write(tmp_path / "export.csv", header, sorted(rows, key=lambda r: r[model] != "OnDemand"))
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", path))
    assert failures(result) == []
    assert sums(lake, "billing_period") == [("2023-09", 28, None, Decimal("16.296932136637"))]
    assert signs_read == [str(path)]
