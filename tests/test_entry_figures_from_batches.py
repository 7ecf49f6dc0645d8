"""The stager takes each period's ledger figures from the batches it writes
(service/core/entry_figures.py) instead of the commit reading the staged file again
(commit.py's ENTRY_FIGURES): the ledger must be the same, byte for byte but the commit time,
for the real samples of every kind and for files made to reach the edges (batches of two
periods and three currencies, a NULL currency, invoice ids of blanks DuckDB trims and a tab it
does not, lines no category names); where a money sum might not fit, the file is read as before.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from billing_helpers import failures, ingest_files
from conftest import SAMPLES
from test_samples import KIND_BY_FILE

import service.core.commit as commit
import service.core.staging as staging
from service.core.entry_figures import MONEY_COLUMNS, EntryFigures
from service.core.lake import Lake
from service.core.schema import cost_select_list
from service.core.staging import canonical_schema

CSV_HEADER = ("BilledCost,EffectiveCost,ListCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,"
              "ChargePeriodEnd,ChargeCategory,InvoiceId,Tags")
# blanks DuckDB's trim() removes (a space, a no-break space, an ideographic space) and one it keeps (a tab)
INVOICES = ("INV-1", " ", "\u00a0", "\u3000 ", "\t", "", "INV-2")


def csv_line(n: int) -> str:
    period = "2024-05" if n % 3 else "2024-06"
    currency = ("USD", "EUR", "")[n % 4 % 3]  # a blank currency is NULL
    category = ("Usage", "Purchase", "")[n % 5 % 3]
    money = f"-{n}.25" if n % 13 == 0 else f"{n}.1234567890123456"
    invoice = INVOICES[n % 7] if n < 200 else "INV-3"  # the last lines of each currency: all with an id
    return (f"{money},{n % 11}.5,,{currency},{period}-01T00:00Z,{period}-02T{n % 24:02d}:00Z,"
            f"{period}-{3 + n % 25:02d}T00:00Z,{category},{invoice},\"{{\"\"team\"\": \"\"t{n % 4}\"\"}}\"")


def ledger_without_times(lake: Lake) -> str:
    document = json.loads((lake.root / "_ledger" / "deliveries.json").read_text())
    for entry in document["entries"]:
        entry.pop("ingested_at")
    return json.dumps(document, sort_keys=True)


def both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *sources) -> tuple[str, str]:
    """The ledger of `sources` ingested with the stager's figures (the staged files never read
    for them: ENTRY_FIGURES would fail) and with the commit's read of each file."""
    with monkeypatch.context() as patched:
        patched.setattr(commit, "ENTRY_FIGURES", "SELECT error('the staged file was read for its figures')")
        lake, result = ingest_files(tmp_path / "batches", *sources)
        assert failures(result) == []
        from_batches = ledger_without_times(lake)
    with monkeypatch.context() as patched:
        patched.setattr(EntryFigures, "rows", lambda self: None)
        lake, result = ingest_files(tmp_path / "read", *sources)
        assert failures(result) == []
        read = ledger_without_times(lake)
    return from_batches, read


@pytest.mark.parametrize("file", sorted(file for file in KIND_BY_FILE if not file.startswith("aws/legacy_cur")))
def test_a_samples_ledger_entry_from_the_stagers_batches_is_the_one_the_staged_file_gave(tmp_path, monkeypatch, file):
    from_batches, read = both_ways(tmp_path, monkeypatch, ("sample", KIND_BY_FILE[file], SAMPLES / file))
    assert from_batches == read
    assert '"totals": [{' in read  # a sample with lines, not an empty ledger compared with itself


def test_batches_of_two_periods_three_currencies_and_blank_invoice_ids_give_the_entries_the_file_gave(
        tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "BATCH_ROWS", 7)
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "focus.csv").write_text("\n".join([CSV_HEADER, *(csv_line(n) for n in range(300))]) + "\n",
                                      encoding="utf-8")
    from_batches, read = both_ways(tmp_path, monkeypatch, ("bill", "focus", folder))
    assert from_batches == read
    entries = json.loads(read)["entries"]
    assert {t["currency"] for e in entries for t in e["totals"]} == {"EUR", "USD", None}
    assert {e["final"] for e in entries} == {False}  # a blank id in every currency; the tab counts as an id


def test_an_id_of_unicode_spaces_is_no_invoice_id_and_a_tab_is_one_as_duckdbs_trim_says(tmp_path, monkeypatch):
    """2024-05: every line has INV-1 or a tab (final); 2024-06: some only a no-break or an ideographic space."""
    folder = tmp_path / "export"
    folder.mkdir()
    ids = {"2024-05": ("INV-1", "\t"), "2024-06": ("INV-1", "\u00a0", "\u3000")}
    lines = [f"{n}.5,{n}.5,,USD,{period}-01T00:00Z,{period}-02T00:00Z,{period}-03T00:00Z,Usage,{ids[period][n % len(ids[period])]},"
             for period in ids for n in range(30)]
    (folder / "focus.csv").write_text("\n".join([CSV_HEADER, *lines]) + "\n", encoding="utf-8")
    from_batches, read = both_ways(tmp_path, monkeypatch, ("bill", "focus", folder))
    assert from_batches == read
    assert {e["billing_period"]: e["final"] for e in json.loads(read)["entries"]} == {"2024-05": True, "2024-06": False}


def test_sums_that_might_not_fit_are_read_from_the_staged_file_and_recorded_exactly(tmp_path, monkeypatch):
    """6e25 and 1: 2 rows × 6e25 reach 10^26, so the bound cannot prove the sums fit; they do."""
    given = []
    rows = EntryFigures.rows
    monkeypatch.setattr(EntryFigures, "rows", lambda self: given.append(rows(self)) or given[-1])
    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    select = cost_select_list({"BillingPeriodStart": "p", "ChargePeriodStart": "p", "BillingCurrency": "'USD'",
                               "BilledCost": "b", "EffectiveCost": "b", "ListCost": "b"})
    relation = con.sql(f"SELECT {select} FROM (VALUES (TIMESTAMP '2026-10-01', '60000000000000000000000000'), "
                       "(TIMESTAMP '2026-10-01', '1')) AS t(p, b)")
    [entry] = lake.commit_costs(con, relation, source="cur", delivery_id="d1", periods=None)
    assert given == [None]
    assert str(entry.totals[0].billed_cost) == "60000000000000000000000001.000000000000"


def test_what_lies_under_a_null_money_value_does_not_send_the_file_to_be_read_again():
    """DuckDB's Arrow export leaves any bytes under a null decimal (a 1M-line FOCUS CSV's
    ListUnitPrice: 2^111 under 8,181 nulls of a batch): they must not count as values."""
    schema = canonical_schema(duckdb.connect())
    under_null = (1 << 126).to_bytes(16, "little", signed=True)
    values = b"".join([(1500 * 10 ** 9).to_bytes(16, "little", signed=True), under_null])
    validity = pa.py_buffer(bytes([0b01]))
    price = pa.Array.from_buffers(pa.decimal128(38, 12), 2, [validity, pa.py_buffer(values)])
    assert price.to_pylist()[1] is None
    columns = {"BillingCurrency": pa.array(["USD", "USD"]), **{name: price for name in MONEY_COLUMNS}}
    batch = pa.RecordBatch.from_arrays([columns.get(field.name, pa.nulls(2, field.type)) for field in schema],
                                       schema=schema)
    figures = EntryFigures()
    figures.add(batch)
    assert figures.rows() == [("USD", None, 1, 2, Decimal("1.500000000000"), Decimal("1.500000000000"), False, False,
                               None, None)]
