"""A commit reads each staged file once (service/core/commit.py's ENTRY_FIGURES) and takes the
tag keys from the stager (staging.Staged.tag_keys), where it read the file five times: the
ledger entries must stay what those reads gave. Each entry is compared here with the old
reads run over the committed file: rows, per-currency sums, final, size, SHA-256,
data_through and tag keys, for a FOCUS CSV with JSON tags (batches spanning two periods,
keys only one period has), a typed FOCUS Parquet with map tags, a declared period without
rows, several currencies and NULL Tags; and a sum that would overflow still names its
period, column and currency."""

from __future__ import annotations

import hashlib
from datetime import timezone
from pathlib import Path

import duckdb
import pytest

import service.core.staging as staging
from service.core.errors import DataError
from service.core.lake import Lake
from service.core.schema import cost_select_list
from service.core.timewindow import iso_utc
from tests.billing_helpers import failures, ingest_files

CSV_HEADER = ("BilledCost,EffectiveCost,ListCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,"
              "ChargePeriodEnd,ChargeCategory,InvoiceId,Tags")


def old_figures(con: duckdb.DuckDBPyConnection, path: Path) -> dict:
    """What the commit's five reads of a staged file gave (main before this change); final as
    a FOCUS period is: every line of each currency with an invoice id."""
    rows = con.execute(
        "SELECT BillingCurrency, count(*), sum(BilledCost), sum(EffectiveCost), "
        "bool_and(coalesce(trim(InvoiceId), '') <> '') FROM read_parquet(?) GROUP BY 1 ORDER BY 1 NULLS LAST",
        [str(path)]).fetchall()
    [(end,)] = con.execute(
        "SELECT max(ChargePeriodEnd) FROM read_parquet(?) WHERE coalesce(ChargeCategory, 'Usage') = 'Usage'",
        [str(path)]).fetchall()
    keys = con.execute("SELECT DISTINCT unnest(map_keys(Tags)) FROM read_parquet(?) WHERE Tags IS NOT NULL",
                       [str(path)]).fetchall()
    return {"rows": sum(int(r[1]) for r in rows), "totals": [(r[0], int(r[1]), r[2], r[3]) for r in rows],
            "final": bool(rows) and all(r[4] for r in rows), "size": path.stat().st_size,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "data_through": None if end is None else iso_utc(end.replace(tzinfo=timezone.utc)),
            "tag_keys": tuple(sorted(key for (key,) in keys))}


def recorded(lake: Lake) -> dict[str, dict]:
    """Period → what its ledger entry holds of the same figures."""
    return {e.billing_period: {"rows": e.rows, "final": e.final, "size": e.size, "sha256": e.sha256,
                               "data_through": e.data_through, "tag_keys": e.tag_keys,
                               "totals": [(t.currency, t.rows, t.billed_cost, t.effective_cost) for t in e.totals]}
            for e in lake.ledger()}


def read_again(lake: Lake) -> dict[str, dict]:
    con = duckdb.connect()
    return {path.parent.name.removeprefix("billing_period="): old_figures(con, path)
            for path in lake.root.glob("costs/**/data.parquet")}


def csv_line(n: int) -> str:
    period = "2024-05" if n % 3 else "2024-06"
    currency = ("USD", "EUR", "")[n % 4 % 3]  # a blank currency is NULL
    tags = ['"{""team"": ""nlp""}"', "", "NULL", "{}", '"{""project"": ""llama"", ""team"": """"}"',
            '"{""may only"": ""x""}"' if period == "2024-05" else '"{""Team"": ""june""}"'][n // 3 % 6]
    category = ("Usage", "Purchase", "")[n % 5 % 3]
    invoice = "INV-1" if n % 7 else " "
    return (f"{n}.1234567890123456,{n % 11}.5,,{currency},{period}-01T00:00Z,{period}-02T{n % 24:02d}:00Z,"
            f"{period}-0{3 + n % 5}T00:00Z,{category},{invoice},{tags}")


def test_a_focus_csv_with_json_tags_is_recorded_as_the_five_reads_gave_it(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "BATCH_ROWS", 7)  # batches holding both periods
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "focus.csv").write_text("\n".join([CSV_HEADER, *(csv_line(n) for n in range(300))]) + "\n")
    lake, result = ingest_files(tmp_path, ("bill", "focus", folder))
    assert failures(result) == []
    entries = recorded(lake)
    assert entries == read_again(lake)
    assert entries["2024-05"]["tag_keys"] == ("may only", "project", "team")
    assert entries["2024-06"]["tag_keys"] == ("Team", "project", "team")
    assert {t[0] for t in entries["2024-05"]["totals"]} == {"EUR", "USD", None}
    rounding = {e.billing_period: e.totals[0].rounding for e in lake.ledger()}
    assert all(rounding.values())  # the 16-decimal costs were rounded, and it is recorded as before


def test_a_typed_focus_parquet_with_map_tags_is_recorded_as_the_five_reads_gave_it(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "BATCH_ROWS", 50)
    folder = tmp_path / "export"
    folder.mkdir()
    duckdb.execute(
        "COPY (SELECT CAST(i * 1.25 AS DECIMAL(38,12)) AS BilledCost, CAST(i AS DECIMAL(38,12)) AS EffectiveCost, "
        "CASE WHEN i % 2 = 0 THEN 'USD' ELSE 'JPY' END AS BillingCurrency, "
        "TIMESTAMPTZ '2026-10-01 00:00:00+00' + INTERVAL 1 MONTH * (i // 150) AS BillingPeriodStart, "
        "TIMESTAMPTZ '2026-10-01 00:00:00+00' + INTERVAL 1 MONTH * (i // 150) + INTERVAL 1 HOUR * (i % 150) "
        "  AS ChargePeriodStart, "
        "TIMESTAMPTZ '2026-10-01 01:00:00+00' + INTERVAL 1 MONTH * (i // 150) + INTERVAL 1 HOUR * (i % 150) "
        "  AS ChargePeriodEnd, CASE WHEN i % 9 = 0 THEN 'Tax' ELSE 'Usage' END AS ChargeCategory, "
        "CASE WHEN i % 5 = 0 THEN NULL WHEN i % 5 = 1 THEN MAP {} "
        "     WHEN i < 150 THEN MAP {'team': 'nlp', 'owner': 'ana'} ELSE MAP {'cost-center': '42'} END AS Tags "
        "FROM range(300) AS t(i)) TO ? (FORMAT parquet)", [str(folder / "bill.parquet")])
    lake, result = ingest_files(tmp_path, ("bill", "focus", folder))
    assert failures(result) == []
    entries = recorded(lake)
    assert entries == read_again(lake)
    assert entries["2026-10"]["tag_keys"] == ("owner", "team") and entries["2026-11"]["tag_keys"] == ("cost-center",)
    assert [t[0] for t in entries["2026-10"]["totals"]] == ["JPY", "USD"]


def relation(con: duckdb.DuckDBPyConnection, rows: list[tuple[str, str | None, str, str | None]]):
    """Canonical cost rows from (billing period start, currency, billed cost, list cost)."""
    values = ", ".join(f"(TIMESTAMP '{p}', {'NULL' if c is None else repr(c)}, '{b}', "
                       f"{'NULL' if lc is None else repr(lc)})" for p, c, b, lc in rows)
    select = cost_select_list({"BillingPeriodStart": "p", "ChargePeriodStart": "p", "BillingCurrency": "c",
                               "BilledCost": "b", "EffectiveCost": "b", "ListCost": "l"})
    return con.sql(f"SELECT {select} FROM (VALUES {values}) AS t(p, c, b, l)")


def test_a_declared_period_without_rows_and_null_tags_are_recorded_as_before(tmp_path):
    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    lake.commit_costs(con, relation(con, [("2026-10-01", "USD", "1.5", None), ("2026-10-01", None, "2", "3")]),
                      source="cur", delivery_id="d1", periods=("2026-10", "2026-11"))
    entries = recorded(lake)
    assert entries == read_again(lake)
    assert entries["2026-11"] == {**entries["2026-11"], "rows": 0, "totals": [], "final": False,
                                  "data_through": None, "tag_keys": ()}
    assert entries["2026-10"]["tag_keys"] == () and entries["2026-10"]["data_through"] is None


@pytest.mark.parametrize("currency", ["EUR", None])
def test_45_a_list_cost_overflowing_in_one_currency_is_named_after_the_one_read(tmp_path, currency):
    half = "60000000000000000000000000"  # 6e25: one fits DECIMAL(38,12), two do not
    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    rows = [("2026-10-01", "USD", "1", "1"), ("2026-11-01", "USD", "1", "1"),
            ("2026-11-01", currency, "1", half), ("2026-11-01", currency, "2", half)]
    with pytest.raises(DataError, match=f"billing period 2026-11: the sum of ListCost in {currency} does not fit"):
        lake.commit_costs(con, relation(con, rows), source="cur", delivery_id="d1", periods=None)
    assert lake.ledger() == [] and not list(lake.staging.glob("costs-*"))
