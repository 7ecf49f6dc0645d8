"""The report's Bills split by charge category: finance ties an invoice's Usage, Tax, Credit, Purchase
and refund lines from the page and from bills_by_category.csv; the parts of each bill add up to it
exactly (DuckDB's sums over the raw export), and where the parts, each rounded to the cent, miss the
bill rounded, a note under the table names both sums. bills.csv keeps its columns."""

from __future__ import annotations

import csv
import json
import re
from decimal import Decimal

import duckdb
import pytest
from markupsafe import escape

from browserkit import chromium
from conftest import require_binary
from test_report_bills import spendlake
from test_report_hostile_browser import PROBE

HEADER = ("BilledCost,EffectiveCost,BillingCurrency,BillingAccountId,InvoiceId,BillingPeriodStart,BillingPeriodEnd,"
          "ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ChargeClass\n")
JUNE = "2026-06-01,2026-07-01"
LINES = [  # a USD bill of 3.55 whose parts show 3.56 (finance41's Tax 0.05 + Usage 0.01 of 0.05), and a EUR one
    ("0.005", "0.005", "USD", "2026-06-02,2026-06-03", "Usage", ""),
    ("0.045", "0.045", "USD", "2026-06-30,2026-07-01", "Tax", ""),
    ("-1.00", "-1.00", "USD", "2026-06-05,2026-06-06", "Credit", ""),
    ("5.00", "5.00", "USD", "2026-06-01,2026-06-01", "Purchase", ""),  # a fee
    ("-0.50", "-0.50", "USD", "2026-06-03,2026-06-04", "Usage", "Correction"),  # a refund
    ("12.25", "12.25", "EUR", "2026-06-02,2026-06-03", "Usage", ""),
    ("2.33", "2.33", "EUR", "2026-06-30,2026-07-01", "Tax", ""),
]
NOTE = ("Bill 2026-06 / cloud / USD, billed and effective: the charge categories above, each rounded to the cent, add up to "
        "$3.56; the bill's lines add up to $3.55, which the bill rounds to $3.55: the $0.01 between them "
        "is rounding: the exact parts (bills_by_category.csv) add up to the bill.")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("categories")
    (root / "cloud").mkdir()
    (root / "cloud" / "june.csv").write_text(HEADER + "".join(
        f"{billed},{effective},{currency},ba-1,INV-6,{JUNE},{charged},{category},{charge_class}\n"
        for billed, effective, currency, charged, category, charge_class in LINES))
    config = root / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: cloud, kind: focus, location: '{root / 'cloud'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    assert spendlake(config, "report", "--date", "2026-06-30", "--out", str(root / "out")).exit_code == 0
    folder = root / "out" / "2026-06-30"
    data = json.loads((folder / "report.json").read_text())
    return folder, {t["key"]: t for s in data["sections"] if s["key"] == "bills" for t in s["tables"]}


def test_each_bill_is_split_by_charge_category_a_refund_apart_adding_up_to_the_bill_exactly(report):
    folder, tables = report
    raw = duckdb.sql(f"""SELECT BillingCurrency, ChargeCategory, nullif(ChargeClass, ''), count(*),
                                sum(BilledCost::DECIMAL(38,12)), sum(EffectiveCost::DECIMAL(38,12))
                         FROM read_csv('{folder.parent.parent / 'cloud' / 'june.csv'}', all_varchar=true)
                         GROUP BY ALL""").fetchall()
    parts = tables["bills_by_category"]["rows"]
    assert {(r["currency"], r["charge_category"], r["charge_class"], r["rows"], Decimal(r["billed_cost"]),
             Decimal(r["effective_cost"])) for r in parts} == set(raw)
    assert [(r["currency"], r["charge_category"], r["charge_class"]) for r in parts if r["currency"] == "USD"] == [
        ("USD", "Credit", None), ("USD", "Purchase", None), ("USD", "Tax", None), ("USD", "Usage", None),
        ("USD", "Usage", "Correction")]
    for bill in tables["bills"]["rows"]:
        mine = [r for r in parts if (r["billing_period"], r["source"], r["currency"]) ==
                (bill["billing_period"], bill["source"], bill["currency"])]
        for cost in ("billed_cost", "effective_cost"):
            assert sum(Decimal(r[cost]) for r in mine) == Decimal(bill[cost])
        assert sum(r["rows"] for r in mine) == bill["rows"]
    with open(folder / "bills_by_category.csv", newline="", encoding="utf-8") as handle:
        assert list(csv.DictReader(handle)) == [{k: "" if v is None else str(v) for k, v in r.items()} for r in parts]
    with open(folder / "bills.csv", newline="", encoding="utf-8") as handle:  # other tools read it: unchanged
        assert next(csv.reader(handle)) == ["billing_period", "source", "invoice", "currency", "rows", "billed_cost",
                                            "effective_cost"]


def test_parts_that_rounded_to_the_cent_miss_the_rounded_bill_say_so_under_the_table(report):
    """USD 0.045 of tax and 0.005 of usage show 0.05 and 0.01: the page's parts add up to 3.56 against
    a bill of 3.55. The note names both; EUR's parts tie out and get none."""
    folder, tables = report
    assert tables["bills_by_category"]["notes"] == [NOTE]
    page = (folder / "report.html").read_text()
    assert f'<p class="note">{escape(NOTE)}</p>' in page
    shown = page.split('data-table="bills_by_category"')[1].split("</table>")[0]
    assert [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r'<td class="num">([^<]*)</td>', shown)
            if "$" in cell] == ["−$1.00", "−$1.00", "$5.00", "$5.00", "$0.05", "$0.05", "$0.01", "$0.01",
                                "−$0.50", "−$0.50"]


def test_the_split_fits_the_page_in_chromium_at_1280_and_800_pixels(report, tmp_path):
    binary = require_binary("chromium")
    folder, _ = report
    probe = tmp_path / "probe.html"
    probe.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "",
                            (folder / "report.html").read_text()).replace("</body>", PROBE + "</body>"))
    for width in (1280, 800):
        widths = dict(re.findall(r'data-table="([^"]+)" data-w="(\d+/\d+)"', chromium(
            binary, tmp_path, f"--window-size={width},2000", "--dump-dom", probe.as_uri()).stdout))
        scroll, shown = map(int, widths["bills_by_category"].split("/"))
        assert scroll <= shown, (width, widths)
