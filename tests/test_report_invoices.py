"""The report's invoice view: each bill split by billing account and invoice id, as the lines carry
them, equal to DuckDB's sums over the raw export (the toolkit's two accounts, each with its
invoice) and adding up to the bill; lines on no invoice yet are their account's estimated part."""

from __future__ import annotations

import json
from decimal import Decimal

import duckdb
import pytest
from markupsafe import escape

from service.report.sections.bills import rounding_notes
from test_report_bills import EA_CAD, report, spendlake
from test_focus_toolkit_fixtures import TOOLKIT

AWS_12 = TOOLKIT / "generate" / "aws-1.2" / "focus_1_2_cost_and_usage_aws.csv.gz"


def invoices(folder) -> list[dict]:
    data = json.loads((folder / "report.json").read_text())
    bills = next(s for s in data["sections"] if s["key"] == "bills")
    return {t["key"]: t["rows"] for t in bills["tables"]}


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("invoices")
    (root / "open").mkdir()
    # one line on an issued invoice, one not on any yet: a FOCUS 1.2 month still partly estimated
    (root / "open" / "june.csv").write_text(
        "BilledCost,EffectiveCost,BillingCurrency,BillingAccountId,InvoiceId,BillingPeriodStart,BillingPeriodEnd,"
        "ChargePeriodStart,ChargePeriodEnd,ChargeCategory\n"
        "10.25,10.25,EUR,ba-1,INV-6,2026-06-01,2026-07-01,2026-06-02,2026-06-03,Usage\n"
        "-2.125,-2.125,EUR,ba-1,,2026-06-01,2026-07-01,2026-06-04,2026-06-05,Credit\n")
    (root / "many").mkdir()  # a May bill of four accounts, each on its invoice: more rows than a summary's few
    (root / "many" / "may.csv").write_text(
        "BilledCost,EffectiveCost,BillingCurrency,BillingAccountId,InvoiceId,BillingPeriodStart,BillingPeriodEnd,"
        "ChargePeriodStart,ChargePeriodEnd,ChargeCategory\n" + "".join(
            f"{n}.5,{n}.5,USD,acct-{n},INV-5-{n},2026-05-01,2026-06-01,2026-05-0{n},2026-05-0{n + 1},Usage\n"
            for n in range(1, 5)))
    config = root / "spendlake.yaml"
    config.write_text("lake: ./lake\nsources:\n"
                      f"  - {{name: aws, kind: focus, location: '{AWS_12}'}}\n"
                      f"  - {{name: open, kind: focus, location: '{root / 'open'}'}}\n"
                      f"  - {{name: many, kind: focus, location: '{root / 'many'}'}}\n"
                      f"  - {{name: ea-cad, kind: azure-cost, location: '{EA_CAD}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    return root, config


def test_each_invoice_of_the_toolkits_two_accounts_is_what_duckdb_sums(lake):
    root, config = lake
    tables = invoices(report(root, config, "2026-05-31"))
    ours = {(r["billing_account"], r["invoice"]): (r["rows"], Decimal(r["billed_cost"]), Decimal(r["effective_cost"]))
            for r in tables["invoices"] if r["source"] == "aws"}
    raw = duckdb.sql(f"""SELECT BillingAccountId, InvoiceId, count(*), sum(CAST(BilledCost AS DECIMAL(38,17))),
                                sum(CAST(EffectiveCost AS DECIMAL(38,17)))
                         FROM read_csv('{AWS_12}', all_varchar = true) GROUP BY ALL""").fetchall()
    assert len(raw) == 2
    cent = Decimal("0.01")
    assert {(a, i): (n, b.quantize(cent), e.quantize(cent)) for a, i, n, b, e in raw} == {
        key: (n, b.quantize(cent), e.quantize(cent)) for key, (n, b, e) in ours.items()}
    [bill] = [r for r in tables["bills"] if r["source"] == "aws"]
    assert sum(b for _, b, _ in ours.values()) == Decimal(bill["billed_cost"])
    assert sum(n for n, _, _ in ours.values()) == bill["rows"]


def test_lines_on_no_invoice_yet_are_their_accounts_estimated_part(lake):
    root, config = lake
    folder = report(root, config, "2026-06-04")
    rows = [(r["billing_account"], r["invoice"], r["currency"], r["billed_cost"])
            for r in invoices(folder)["invoices"] if r["source"] == "open"]
    assert rows == [("ba-1", "INV-6", "EUR", "10.250000000000"),
                    ("ba-1", "estimated (no invoice id yet)", "EUR", "-2.125000000000")]
    assert "invoices.csv" in {p.name for p in folder.iterdir()}


def test_an_export_without_invoice_ids_shows_its_account_estimated(lake):
    root, config = lake
    rows = invoices(report(root, config, "2023-09-02"))["invoices"]
    assert [(r["source"], r["invoice"], r["currency"], r["billed_cost"]) for r in rows] == [
        ("ea-cad", "estimated (no invoice id yet)", "CAD", "1.261369265057")]


def test_the_summary_lists_every_bill_and_invoice_as_the_html_shows_them(lake):
    """summary.md listed the first 5 bills and no invoices: finance reading it could not tie out.
    Every bill and every invoice row is there now, each amount as the HTML table shows it."""
    root, config = lake
    folder = report(root, config, "2026-06-04")
    tables = invoices(folder)
    assert len(tables["invoices"]) == 8  # aws 2 and many 4 in May, open 2 in June
    summary = (folder / "summary.md").read_text()
    html = (folder / "report.html").read_text()
    shown = summary.split("*Invoices per billing account")[1].split("\n\n")[0].splitlines()[1:]
    assert shown[2:6] == [f"- 2026-05 / many / acct-{n} / INV-5-{n} / USD: ${n}.50" for n in range(1, 5)]
    assert shown[-1] == "- 2026-06 / open / ba-1 / estimated (no invoice id yet) / EUR: −EUR 2.13"
    assert len(shown) == len(tables["invoices"])
    for line in shown:
        assert f">{line.rsplit(': ', 1)[1]}<" in html, line
    bills = summary.split("*Bills per source")[1].split("\n\n")[0].splitlines()[1:]
    assert bills == ["- 2026-05 / aws / USD: $4,755.25", "- 2026-05 / many / USD: $12.00",
                     "- 2026-06 / open / EUR: EUR 8.13"]


def test_a_bill_whose_rounded_invoices_miss_its_rounded_total_says_so_to_the_cent(lake):
    """EUR 10.25 on INV-6 and -2.125 not invoiced yet: the rows show 10.25 and -2.13 (8.12), the bill
    8.125 shows 8.13. The page and the summary said nothing of the cent between them; a note under
    the invoices now names the bill, both sums and the rounding (the JSON rows stay exact)."""
    root, config = lake
    folder = report(root, config, "2026-06-04")
    said = ("Bill 2026-06 / open / EUR, billed and effective: the rows above, each rounded as its invoice shows it, "
            "add up to EUR 8.12; the bill's lines add up to EUR 8.125, which the bill rounds to EUR 8.13: the "
            "EUR 0.01 between them is rounding, on no invoice.")
    data = json.loads((folder / "report.json").read_text())
    tables = {t["key"]: t for s in data["sections"] if s["key"] == "bills" for t in s["tables"]}
    assert tables["invoices"]["notes"] == [said]  # aws and many in May tie out: no note of theirs
    assert f'<p class="note">{escape(said)}</p>' in (folder / "report.html").read_text()
    summary = (folder / "summary.md").read_text()
    assert f"EUR 2.13\n\n_{said}_\n" in summary  # a paragraph of its own, after the invoice rows
    assert sum(Decimal(r["billed_cost"]) for r in tables["invoices"]["rows"] if r["source"] == "open") == \
        Decimal(next(r for r in tables["bills"]["rows"] if r["source"] == "open")["billed_cost"])


def row(billed: str, effective: str, currency: str | None = "EUR", source: str = "s") -> dict:
    return {"billing_period": "2026-06", "source": source, "currency": currency,
            "billed_cost": Decimal(billed), "effective_cost": Decimal(effective)}


@pytest.mark.parametrize(("rows", "notes"), [
    ([row("1.5", "1.5"), row("2.25", "2.25")], []),  # every row whole cents: nothing to say
    ([row("10.121", "10.121"), row("0.002", "0.002")], []),  # 10.12 + 0.00 = 10.12 = 10.123 rounded
    # four invoices of 0.005: each shows 0.01 (0.04), the bill 0.02
    ([row("0.005", "0", source="x")] * 4,
     ["Bill 2026-06 / x / EUR, billed: the rows above, each rounded as its invoice shows it, add up to EUR 0.04; "
      "the bill's lines add up to EUR 0.02, which the bill rounds to EUR 0.02: the EUR 0.02 between them is "
      "rounding, on no invoice."]),
    # yen are whole: 100.5 + 100.5 show 101 + 101 = 202 against a bill of 201; effective ties out
    ([row("100.5", "100", "JPY"), row("100.5", "101", "JPY")],
     ["Bill 2026-06 / s / JPY, billed: the rows above, each rounded as its invoice shows it, add up to JPY 202; "
      "the bill's lines add up to JPY 201, which the bill rounds to JPY 201: the JPY 1 between them is rounding, "
      "on no invoice."]),
    # a credit rounding away from zero: -1.005 and -1.005 show -2.02, the bill -2.01; lines without a currency
    ([row("-1.005", "-1.005", None), row("-1.005", "-1.005", None)],
     ["Bill 2026-06 / s / (no currency), billed and effective: the rows above, each rounded as its invoice shows "
      "it, add up to −(no currency) 2.02; the bill's lines add up to −(no currency) 2.01, which the bill rounds "
      "to −(no currency) 2.01: the (no currency) 0.01 between them is rounding, on no invoice."]),
])
def test_rounding_notes_by_hand(rows, notes):
    assert rounding_notes(rows) == notes


def test_spend_rows_that_miss_the_total_by_rounding_say_so(tmp_path):
    """Teams a and b each spent EUR 1.005 on 2026-06-02: the page shows 1.01 twice (2.02) and the
    day's total 2.01 (Totals, the headline); nothing said why. A note under each spend table now
    does, per money column that misses (the day and the month to date here, not the day before)."""
    (tmp_path / "bill").mkdir()
    (tmp_path / "bill" / "june.csv").write_text(
        "BilledCost,EffectiveCost,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,"
        "ChargePeriodEnd,ChargeCategory,Tags\n" + "".join(
            f'{cost},{cost},EUR,2026-06-01,2026-07-01,2026-06-0{day},2026-06-0{day + 1},Usage,"{{""team"": ""{team}""}}"\n'
            for team, day, cost in (("a", 1, "1.25"), ("b", 1, "2"), ("a", 2, "1.005"), ("b", 2, "1.005"))))
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: bill, kind: focus, location: '{tmp_path / 'bill'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    data = json.loads((report(tmp_path, config, "2026-06-02") / "report.json").read_text())
    tables = {t["key"]: t for s in data["sections"] for t in s["tables"]}
    assert [r["day_cost"] for r in tables["spend_by_team"]["rows"]] == ["1.005000000000", "1.005000000000"]
    assert tables["spend_by_team"]["notes"] == [
        "EUR: the rows, each shown rounded, do not add up to the whole (the Totals table's) by rounding: day EUR "
        "2.02 against EUR 2.01 (EUR 2.01 exact); month to date EUR 5.27 against EUR 5.26 (EUR 5.26 exact)."]
    assert "notes" not in tables["spend_by_project"]  # one row, unallocated: nothing to add up
    assert [(r["window"], r["cost"]) for r in tables["totals"]["rows"] if r["window"] in ("day", "mtd")] == [
        ("day", "2.010000000000"), ("mtd", "5.260000000000")]
