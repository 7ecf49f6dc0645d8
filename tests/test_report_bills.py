"""Finance ties the daily report out to the invoice: its "Bills" table holds each source's bill per
billing period and currency, equal to sums DuckDB computes over the raw exports, to `spendlake
status` and to `spendlake attribute --check`; estimated and final bills, a credits-only month and
a restated month included, and currencies never added together."""

from __future__ import annotations

import csv
import json
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

import duckdb
import pytest
from click.testing import CliRunner

from conftest import SAMPLES
from service.cli.main import cli

SANDBOX = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"
CUR = SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv"
EA_CAD = SAMPLES / "azure" / "ea_actual_anonymous_sample.csv"
EA_ACTUAL = SAMPLES / "azure" / "ea_actual_trey_research_small.csv"
EA_AMORTIZED = SAMPLES / "azure" / "ea_amortized_trey_research_small.csv"

HEADER = ["BilledCost", "EffectiveCost", "BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd",
          "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ChargeClass", "ServiceName", "ResourceId",
          "SubAccountId", "ProviderName", "InvoiceId", "Tags"]
SEPTEMBER = ("2026-09-01T00:00:00Z", "2026-10-01T00:00:00Z")
OCTOBER = ("2026-10-01T00:00:00Z", "2026-11-01T00:00:00Z")


def spendlake(config_file, *args):
    return CliRunner().invoke(cli, ["--config", str(config_file), *args], catch_exceptions=False)


def write_focus(path, lines):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        for billed, effective, period, charge_day, category, charge_class, invoice in lines:
            writer.writerow([billed, effective, "EUR", *period, f"{charge_day}T00:00:00Z", f"{charge_day}T01:00:00Z",
                             category, charge_class, "Compute", "vm-1", "acct-1", "ExampleCloud", invoice,
                             '{"team": "pretrain"}'])


SEPTEMBER_BILL = [  # a usage line, a commitment purchase paid up front and its amortized usage
    ("100.005", "100.005", SEPTEMBER, "2026-09-10", "Usage", "", "INV-9"),
    ("730.00", "0", SEPTEMBER, "2026-09-01", "Purchase", "", "INV-9"),
    ("0", "24.333333333333", SEPTEMBER, "2026-09-11", "Usage", "", "INV-9"),
    ("8.25", "8.25", SEPTEMBER, "2026-09-30", "Tax", "", "INV-9"),
]
OCTOBER_CREDITS = [("-12.50", "-12.50", OCTOBER, "2026-10-05", "Credit", "", "")]  # nothing else that month
SEPTEMBER_REFUND = ("-40.0025", "-40.0025", SEPTEMBER, "2026-09-10", "Usage", "Correction", "INV-9")


def raw_sums(sql: str) -> dict[tuple[str, str], tuple[Decimal | None, Decimal | None]]:
    """(billing period, currency) → (Σ billed, Σ effective), computed apart from spendlake."""
    return {(period, currency): (billed, effective) for period, currency, billed, effective in duckdb.sql(sql).fetchall()}


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("bills")
    (root / "eu").mkdir()
    write_focus(root / "eu" / "september.csv", SEPTEMBER_BILL)
    write_focus(root / "eu" / "october.csv", OCTOBER_CREDITS)
    config = root / "spendlake.yaml"
    config.write_text("lake: ./lake\nsources:\n"
                      f"  - {{name: sandbox, kind: focus, location: '{SANDBOX}'}}\n"
                      f"  - {{name: ea-cad, kind: azure-cost, location: '{EA_CAD}'}}\n"
                      f"  - {{name: ea-actual, kind: azure-cost, location: '{EA_ACTUAL}'}}\n"
                      f"  - {{name: ea-amortized, kind: azure-cost, location: '{EA_AMORTIZED}'}}\n"
                      f"  - {{name: eu, kind: focus, location: '{root / 'eu'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    return root, config


def report(root, config, day: str):
    assert spendlake(config, "report", "--date", day, "--out", str(root / "out")).exit_code == 0
    return root / "out" / day


def bills(root, config, day: str) -> list[dict]:
    folder = report(root, config, day)
    data = json.loads((folder / "report.json").read_text())
    table = next(t for s in data["sections"] if s["key"] == "bills" for t in s["tables"])
    with open(folder / "bills.csv", newline="", encoding="utf-8") as handle:
        assert list(csv.DictReader(handle)) == [{k: "" if v is None else str(v) for k, v in row.items()}
                                                for row in table["rows"]]
    return table["rows"]


def freshness(folder) -> list[dict]:
    data = json.loads((folder / "report.json").read_text())
    return next(t for s in data["sections"] if s["key"] == "freshness" for t in s["tables"])["rows"]


def by_period(rows, source):
    return {(r["billing_period"], r["currency"]): (None if r["billed_cost"] is None else Decimal(r["billed_cost"]),
                                                   None if r["effective_cost"] is None else Decimal(r["effective_cost"]))
            for r in rows if r["source"] == source}


def test_33_a_bill_billed_in_another_month_than_its_usage_ties_out_per_billing_period(lake):
    """The sandbox's Oracle line is charged on 30 September and billed in October: September's
    month to date counts it, September's bill does not; October's bill shows it."""
    root, config = lake
    expected = raw_sums(f"""SELECT strftime(BillingPeriodStart::TIMESTAMP, '%Y-%m'), BillingCurrency,
        sum(BilledCost::DECIMAL(38,12)), sum(EffectiveCost::DECIMAL(38,12))
        FROM read_csv('{SANDBOX}', nullstr='NULL', all_varchar=true) GROUP BY ALL""")
    assert expected[("2024-10", "USD")][0] == Decimal("0.24")
    assert by_period(bills(root, config, "2024-10-31"), "sandbox") == expected
    september = bills(root, config, "2024-09-30")
    assert by_period(september, "sandbox") == {("2024-09", "USD"): expected[("2024-09", "USD")]}
    assert {r["invoice"] for r in september} == {"estimated"}  # the sandbox's InvoiceId is NULL
    data = json.loads((root / "out" / "2024-09-30" / "report.json").read_text())
    totals = next(t for s in data["sections"] if s["key"] == "spend" for t in s["tables"] if t["key"] == "totals")
    mtd = [Decimal(r["cost"]) for r in totals["rows"] if r["window"] == "mtd"]
    assert mtd == [expected[("2024-09", "USD")][0] + expected[("2024-10", "USD")][0]]  # by charge day


def bills_notes(root, day: str) -> list[str]:
    data = json.loads((root / "out" / day / "report.json").read_text())
    return next(t for s in data["sections"] if s["key"] == "bills" for t in s["tables"]).get("notes", [])


def test_usage_of_the_month_billed_in_another_period_is_named_under_the_bills(lake):
    """On 30 September the month to date is USD 20.52 and September's bill USD 20.28: finance could
    not tell from the page that the USD 0.24 between them is the Oracle line used on the 30th and
    billed in October. A note under the Bills table names it, and October's report the reverse."""
    root, config = lake
    bills(root, config, "2024-09-30")
    september = [n for n in bills_notes(root, "2024-09-30") if "billed in another period" in n]
    assert september == ["Usage of 2024-09 up to 2024-09-30 billed in another period, so in the month to date above but "
                         "not in the 2024-09 bill: sandbox, billed in 2024-10: $0.24 (1 line)."]
    bills(root, config, "2024-10-31")
    october = [n for n in bills_notes(root, "2024-10-31") if "used in another month" in n]
    assert october == ["Billed in 2024-10 but used in another month, so in the 2024-10 bill but not in its month "
                       "to date: sandbox, used in 2024-09: $0.24 (1 line)."]
    # the EUR source bills every line in the month of its use: no note of it
    assert not [n for n in bills_notes(root, "2024-09-30") + bills_notes(root, "2024-10-31") if " eu," in n]


def test_33_bills_of_several_currencies_actual_and_amortized_equal_status_and_the_check(lake):
    root, config = lake
    rows = bills(root, config, "2023-09-30")
    assert by_period(rows, "ea-cad") == raw_sums(
        f"SELECT '2023-09', BillingCurrencyCode, sum(CostInBillingCurrency::DECIMAL(38,12)), NULL "
        f"FROM read_csv('{EA_CAD}', all_varchar=true) GROUP BY ALL")
    assert by_period(rows, "ea-actual") == raw_sums(
        f"SELECT '2023-09', BillingCurrency, sum(Cost::DECIMAL(38,12)), NULL "
        f"FROM read_csv('{EA_ACTUAL}', all_varchar=true) GROUP BY ALL")
    assert by_period(rows, "ea-amortized") == raw_sums(
        f"SELECT '2023-09', BillingCurrency, NULL, sum(Cost::DECIMAL(38,12)) "
        f"FROM read_csv('{EA_AMORTIZED}', all_varchar=true) GROUP BY ALL")
    status = json.loads(spendlake(config, "status", "--format", "json").output)
    assert {(r["source"], r["billing_period"], r["currency"]): (r["billed_cost"], r["effective_cost"])
            for r in status if r["billing_period"] == "2023-09"} == \
        {(r["source"], r["billing_period"], r["currency"]): (r["billed_cost"], r["effective_cost"]) for r in rows}
    check = json.loads(spendlake(config, "attribute", "--check", "--format", "json").stdout)
    for row in rows:
        for measure in ("billed", "effective"):
            if row[f"{measure}_cost"] is not None:
                match, = [c for c in check if (c["source"], c["billing_period"], c["currency"], c["cost"])
                          == (row["source"], row["billing_period"], row["currency"], measure)]
                assert Decimal(match["attributed_total"]) == Decimal(row[f"{measure}_cost"]) and match["ok"]
    html = (root / "out" / "2023-09-30" / "report.html").read_text()
    assert "CAD 1.26" in html and "$8.55" in html and "$16.30" in html


def test_8_a_credits_only_month_and_a_restated_month_show_as_billed(lake, tmp_path):
    root, config = lake
    october = bills(root, config, "2026-10-31")
    assert by_period(october, "eu") == {("2026-09", "EUR"): (Decimal("838.255"), Decimal("132.588333333333")),
                                        ("2026-10", "EUR"): (Decimal("-12.50"), Decimal("-12.50"))}
    assert [(r["billing_period"], r["invoice"]) for r in october if r["source"] == "eu"] == \
        [("2026-09", "final"), ("2026-10", "estimated")]
    write_focus(root / "eu" / "september.csv", [*SEPTEMBER_BILL, SEPTEMBER_REFUND])  # the month restated
    assert spendlake(config, "ingest").exit_code == 0
    restated = bills(root, config, "2026-10-31")
    assert by_period(restated, "eu")[("2026-09", "EUR")] == (Decimal("798.2525"), Decimal("92.585833333333"))
    assert by_period(restated, "eu")[("2026-10", "EUR")] == (Decimal("-12.50"), Decimal("-12.50"))
    html = (root / "out" / "2026-10-31" / "report.html").read_text()
    assert "EUR 798.25" in html and "−EUR 12.50" in html
    # FOCUS: InvoiceId is null on a charge on no invoice yet, so a line delivered late without
    # one makes the month an estimate again until every line carries it (was: final, as for AWS,
    # where any line's bill/InvoiceId marks the finalized bill)
    late = ("3.00", "3.00", SEPTEMBER, "2026-09-05", "Usage", "", "")
    write_focus(root / "eu" / "september.csv", [*SEPTEMBER_BILL, SEPTEMBER_REFUND, late])
    assert spendlake(config, "ingest").exit_code == 0
    september = {r["billing_period"]: r for r in bills(root, config, "2026-10-31") if r["source"] == "eu"}["2026-09"]
    assert (september["invoice"], Decimal(september["billed_cost"])) == ("estimated", Decimal("801.2525"))
    status = json.loads(spendlake(config, "status", "--format", "json").output)
    assert [r["final"] for r in status if (r["source"], r["billing_period"]) == ("eu", "2026-09")] == [False]
    write_focus(root / "eu" / "september.csv", [*SEPTEMBER_BILL, SEPTEMBER_REFUND, (*late[:-1], "INV-9")])
    assert spendlake(config, "ingest").exit_code == 0  # invoiced: final again
    assert {r["billing_period"]: r["invoice"] for r in bills(root, config, "2026-10-31")
            if r["source"] == "eu"}["2026-09"] == "final"
    write_focus(root / "eu" / "september.csv", [*SEPTEMBER_BILL, SEPTEMBER_REFUND])  # as the tests after this read it
    assert spendlake(config, "ingest").exit_code == 0


def test_a_day_before_the_first_bill_or_past_the_datas_end_says_so(lake):
    root, config = lake
    before = report(root, config, "2019-01-01")
    assert json.loads((before / "report.json").read_text())["notes"] == [
        "The lake's billing data starts with 2023-09: there is no bill for January 2019 to report."]
    assert "spendlake ingest" not in (before / "summary.md").read_text()  # it would add nothing
    assert {(r["status"], r["latest_period"], r["data_through"]) for r in freshness(before)} == {("no data", None, None)}
    october_2024 = {r["source"]: r for r in freshness(report(root, config, "2024-10-31"))}
    assert (october_2024["sandbox"]["status"], october_2024["sandbox"]["latest_period"]) == ("stale", "2024-10")  # usage to 1 Oct
    assert (october_2024["eu"]["status"], october_2024["eu"]["latest_period"]) == ("no data", None)  # bills from 2026
    after = report(root, config, "2026-11-15")
    first = {p.name: p.read_bytes() for p in after.iterdir()}
    assert json.loads(first["report.json"])["notes"][0].startswith(  # a month past the data: it says so
        "2026-11-15 is past the lake's billing data, which ends at 2026-09-11 01:00 UTC, before November 2026 begins")
    report(root, config, "2026-11-15")
    assert {p.name: p.read_bytes() for p in after.iterdir()} == first  # the same report twice: the same bytes


def test_the_reports_totals_and_bills_are_what_the_api_answers(lake):
    from prometheus_client import CollectorRegistry

    from service.core.config import load_config
    from service.serve.app import Api

    root, config = lake
    api = Api(load_config(str(config)), CollectorRegistry())
    folder = report(root, config, "2024-09-30")
    data = json.loads((folder / "report.json").read_text())
    spend = next(s for s in data["sections"] if s["key"] == "spend")
    totals = next(t for t in spend["tables"] if t["key"] == "totals")
    assert {r["window"] for r in totals["rows"]} == {"day", "previous_day", "mtd", "7d"}
    for window in ("day", "previous_day", "mtd", "7d"):
        rows = [r for r in totals["rows"] if r["window"] == window]
        answer = json.loads(api.handle("/api/v1/attribute", {"since": [rows[0]["since"]], "until": [rows[0]["until"]],
                                                             "by": ["team"]}, None).body)
        assert {t["currency"]: t["cost"] for t in answer["totals"]} == {r["currency"]: r["cost"] for r in rows}
    periods = json.loads(api.handle("/api/v1/status", {}, None).body)["periods"]
    assert {(p["source"], p["billing_period"], p["currency"], p["billed_cost"], p["effective_cost"], p["final"])
            for p in periods if p["billing_period"] in ("2023-08", "2023-09")} == \
        {(r["source"], r["billing_period"], r["currency"], r["billed_cost"], r["effective_cost"], r["invoice"] == "final")
         for r in bills(root, config, "2023-09-30")}


def test_a_day_past_the_datas_end_shows_no_change_in_html_json_csv_and_summary(lake):
    # The data ends at 2026-09-11 01:00: 11 Sep holds no billed spend yet, 10 Sep 100.005. Was:
    # −100.0% on the Day card, in the team table (and its CSV) and a top mover of −100.005.
    root, config = lake
    folder = report(root, config, "2026-09-11")
    data = json.loads((folder / "report.json").read_text())
    cards = {h["label"]: h for h in data["headlines"]}
    assert Decimal(cards["Day, billed (EUR)"]["previous"]) > 0 and cards["Day, billed (EUR)"]["change_pct"] is None
    assert cards["Month to date, billed (EUR)"]["change_pct"] is None
    spend = next(s for s in data["sections"] if s["key"] == "spend")
    tables = {t["key"]: t for t in spend["tables"]}
    [pretrain] = [r for r in tables["spend_by_team"]["rows"] if r["team"] == "pretrain"]
    assert pretrain["day_previous"] == cards["Day, billed (EUR)"]["previous"]
    assert (pretrain["day_change_pct"], pretrain["mtd_change_pct"]) == (None, None)
    assert tables["top_movers"]["rows"] == []
    with open(folder / "spend_by_team.csv", newline="", encoding="utf-8") as handle:
        [row] = [r for r in csv.DictReader(handle) if r["team"] == "pretrain"]
    assert (row["day_change_pct"], row["mtd_change_pct"]) == ("", "")
    html = (folder / "report.html").read_text()
    previous = f"EUR {Decimal(pretrain['day_previous']).quantize(Decimal('0.01'), ROUND_HALF_UP)}"  # as the page rounds
    assert "−100.0%" not in html and f"— vs {previous}" in html
    assert f"- Day, billed (EUR): EUR 0.00 (— vs {previous})" in (folder / "summary.md").read_text()


def test_the_headlines_say_they_are_the_billed_cost_the_invoice_shows(lake):
    # They read 'Month to date (EUR)' beside a bill whose billed and amortized costs differ
    # (838.255 and 132.588... before the refund): the page, summary.md and JSON did not say which.
    root, config = lake
    [bill] = [r for r in bills(root, config, "2026-09-30") if (r["source"], r["billing_period"]) == ("eu", "2026-09")]
    folder = root / "out" / "2026-09-30"
    cards = {h["label"]: h["value"] for h in json.loads((folder / "report.json").read_text())["headlines"]}
    billed = Decimal(bill["billed_cost"])
    assert Decimal(cards["Month to date, billed (EUR)"]) == billed != Decimal(bill["effective_cost"])
    assert f"- Month to date, billed (EUR): EUR {billed.quantize(Decimal('0.01'))}" in (folder / "summary.md").read_text()
    assert ">Month to date, billed (EUR)</div>" in (folder / "report.html").read_text()


def test_an_export_without_billed_cost_is_said_not_shown_as_no_spend(lake):
    # An Azure amortized export alone made a report of 'Month to date (USD): $0.00' and
    # `attribute` a total of 0.00 without a word; the actual export answered --cost effective 0.00 alike.
    root, config = lake
    folder = report(root, config, "2023-09-22")
    notes = json.loads((folder / "report.json").read_text())["notes"]
    assert [n for n in notes if "no billed cost" in n] == [
        "ea-amortized delivered no billed cost for September 2023, only amortized (effective) cost: the headlines "
        "and spend tables, billed cost as on the invoice, leave it out; Bills shows it. Point a source at the "
        "actual-cost export for the invoice's figures."]
    assert "ea-amortized delivered no billed cost" in (folder / "summary.md").read_text()
    window = ("--since", "2023-09-01", "--until", "2023-10-01", "--format", "json")
    billed, effective = (CliRunner().invoke(cli, ["--config", str(config), "attribute", *window, "--cost", cost])
                         for cost in ("billed", "effective"))
    assert "note: ea-amortized 2023-09 delivered no billed cost, only effective cost: counted as 0 here; " \
           "--cost effective counts it" in billed.stderr
    assert "note: ea-actual 2023-09, ea-cad 2023-09 delivered no effective cost, only billed cost" in effective.stderr
    assert "delivered no" not in spendlake(config, "attribute", "--since", "2026-09-01", "--until", "2026-10-01").stderr
    check = spendlake(config, "attribute", "--check", "--format", "json")
    assert {(r["source"], r["cost"], r["source_total"]) for r in json.loads(check.stdout)
            if r["source"] == "ea-amortized" and r["cost"] != "list"} == {("ea-amortized", "billed", "0.000000000000"),
                                                                         ("ea-amortized", "effective", "16.296932136637")}
    assert "note: ea-amortized 2023-09 delivered no billed cost: the billed rows for these compare 0 with 0 " \
           "(status shows null)" in check.stderr


def gcp_lake(root):
    from test_gcp_billing import NDJSON

    config = root / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: gcp, kind: gcp-billing, location: '{NDJSON}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    return config


def test_a_gcp_billing_bill_names_the_invoice_amount_net_of_its_credits(tmp_path):
    """gcp-billing's billed is Google's `cost`, before credits; Google's invoice (and its own FOCUS
    export's BilledCost) nets them. The Bills table showed only the gross figure as what finance
    ties out to; a note now gives the invoice's amount, the effective column. By hand from the
    fixture: 2024-05 cost 14.1, credits -3.75, invoice 10.35; 2024-06 12.5 - 0.000005."""
    folder = report(tmp_path, gcp_lake(tmp_path), "2024-06-15")
    data = json.loads((folder / "report.json").read_text())
    table = next(t for s in data["sections"] if s["key"] == "bills" for t in s["tables"])
    assert by_period(table["rows"], "gcp") == {("2024-05", "USD"): (Decimal("14.1"), Decimal("10.35")),
                                               ("2024-06", "USD"): (Decimal("12.5"), Decimal("12.499995"))}
    # June's credit, half a thousandth of a cent, changes no figure the invoice shows: no note
    assert table["notes"] == [
        "Bill 2024-05 / gcp / USD: billed is Google's cost before the credits on its lines (−$3.75); "
        "Google's invoice nets them: $10.35, the effective column.",
        # the fixture's line used at 2024-05-31 23:00, invoiced in June
        "Billed in 2024-06 but used in another month, so in the 2024-06 bill but not in its month to date: gcp, "
        "used in 2024-05: $12.50 (1 line)."]
    assert "Google&#39;s invoice nets them: $10.35" in (folder / "report.html").read_text()


def test_the_headlines_of_a_month_with_gcp_credits_say_they_are_before_them(tmp_path):
    """The headlines and spend tables of May read 'Month to date, billed (USD): $26.60', Google's
    cost before the credits its invoice nets, with nothing said above them (only the Bills note,
    of the billing period): by hand, May's lines charge 14.1 + 12.5 (June's bill's line, used on
    31 May) with credits -3.75 and -0.000005; June has no line charged, so no note."""
    config = gcp_lake(tmp_path)
    may = report(tmp_path, config, "2024-05-31")
    data = json.loads((may / "report.json").read_text())
    assert {h["label"]: h["value"] for h in data["headlines"]}["Month to date, billed (USD)"] == "26.600000000000"
    note = ("gcp's spend in the headlines and spend tables is Google's cost before the credits on its lines "
            "(−$3.75 charged this month to date); Google's invoice nets them (Bills: the effective column).")
    assert note in data["notes"]
    assert f"_{note}_" in (may / "summary.md").read_text()
    assert "Google&#39;s cost before the credits on its lines (−$3.75 charged" in (may / "report.html").read_text()
    june = json.loads((report(tmp_path, config, "2024-06-30") / "report.json").read_text())
    assert not [n for n in june["notes"] if "before the credits" in n]


def test_a_month_of_an_export_without_invoice_ids_is_not_said_to_await_one(tmp_path):
    """Cloud Billing exports and OCI cost reports carry no invoice id, so their months never turn
    final; the note under the title said of them, as of a FOCUS bill not yet invoiced, 'the bill
    has no invoice id yet, so these figures may change until the provider closes the month', of
    months Google or Oracle closed years ago. Each is now said for what it is."""
    from test_oci_cost import OCI

    (tmp_path / "eu").mkdir()
    write_focus(tmp_path / "eu" / "may.csv", [("5.00", "5.00", ("2024-05-01T00:00:00Z", "2024-06-01T00:00:00Z"),
                                               "2024-05-10", "Usage", "", "")])
    config = gcp_lake(tmp_path)
    config.write_text(config.read_text() + f"  - {{name: eu, kind: focus, location: '{tmp_path / 'eu'}'}}\n"
                      f"  - {{name: oci, kind: oci-cost, location: '{OCI}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    status = json.loads(spendlake(config, "status", "--format", "json").output)
    assert {(r["source"], r["final"]) for r in status} == {("gcp", False), ("eu", False), ("oci", False)}
    may = json.loads((report(tmp_path, config, "2024-05-31") / "report.json").read_text())["notes"]
    assert [n for n in may if "estimated" in n] == [
        "May 2024 is still estimated for eu: the bill has no invoice id yet, so these figures may change until "
        "the provider closes the month.",
        "May 2024 shows as estimated for gcp: gcp-billing exports carry no invoice id, so "
        "spendlake cannot tell whether the provider has closed the month; tie these figures to the provider's "
        "invoice."]
    oci = json.loads((report(tmp_path, config, "2026-05-31") / "report.json").read_text())["notes"]
    assert [n for n in oci if "estimated" in n] == [
        "May 2026 shows as estimated for oci: oci-cost exports carry no invoice id, so "
        "spendlake cannot tell whether the provider has closed the month; tie these figures to the provider's "
        "invoice."]


def test_the_bills_of_an_export_without_invoice_ids_are_not_said_to_await_one(tmp_path):
    """The Bills note said every estimated bill 'has no invoice id yet and may still change', and
    the invoices table labelled a gcp-billing or oci-cost bill's lines 'estimated (no invoice id
    yet)', of exports that never carry one: both now say so of those kinds, the awaited invoice id
    kept for the others."""
    from test_oci_cost import OCI

    (tmp_path / "eu").mkdir()
    write_focus(tmp_path / "eu" / "may.csv", [("5.00", "5.00", ("2024-05-01T00:00:00Z", "2024-06-01T00:00:00Z"),
                                               "2024-05-10", "Usage", "", "")])
    config = gcp_lake(tmp_path)
    config.write_text(config.read_text() + f"  - {{name: eu, kind: focus, location: '{tmp_path / 'eu'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    [section] = [s for s in json.loads((report(tmp_path, config, "2024-05-31") / "report.json").read_text())
                 ["sections"] if s["key"] == "bills"]
    assert section["note"].endswith(
        "moves between the two. Exports of kind gcp-billing carry no invoice id: their bills show as estimated "
        "however long ago the provider closed the month; tie them to the provider's invoice. Any other estimated "
        "bill has no invoice id yet and may still change.")
    assert {(r["source"], r["invoice"]) for r in section["tables"][1]["rows"]} == {
        ("gcp", "estimated (no invoice id in gcp-billing exports)"), ("eu", "estimated (no invoice id yet)")}
    config.write_text(f"lake: ./lake2\nsources:\n  - {{name: oci, kind: oci-cost, location: '{OCI}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    [section] = [s for s in json.loads((report(tmp_path, config, "2026-05-31") / "report.json").read_text())
                 ["sections"] if s["key"] == "bills"]
    assert section["note"].endswith("moves between the two. Exports of kind oci-cost carry no invoice id: their "
                                    "bills show as estimated however long ago the provider closed the month; tie "
                                    "them to the provider's invoice.")
    assert {r["invoice"] for r in section["tables"][1]["rows"]} == {"estimated (no invoice id in oci-cost exports)"}


def test_the_summary_says_what_the_bills_count_as_the_page_does(lake):
    """summary.md listed every bill under the month to date without the page's intro: a bill that
    differs from the month to date (a line billed in another month than its usage) read as a
    mistake in chat. It gives the section's intro before the bills, as the page does."""
    root, config = lake
    bills(root, config, "2024-09-30")
    folder = root / "out" / "2024-09-30"
    note = next(s for s in json.loads((folder / "report.json").read_text())["sections"] if s["key"] == "bills")["note"]
    assert note.startswith("Each bill as delivered, by billing period: the spend above counts charges by the day")
    summary = (folder / "summary.md").read_text()
    assert f"\n\n_{note}_\n\n*Bills per source, billing period and currency" in summary
    assert summary.count(note) == 1


def test_a_day_before_a_first_bill_starting_mid_month_says_so(tmp_path):
    """The anonymous CUR's November with its usage from the 5th on (an account opened then): the
    report of the 3rd said nothing, the note before the first bill working to the month, so its
    zeros read as a day without spend. The ledger's recorded start of usage (data_from) says it,
    read with no file scan; a day from the 5th on, and a ledger from before 2026-12, say nothing."""
    rows = list(csv.reader(CUR.open(newline="")))
    start = rows[0].index("lineItem/UsageStartDate")
    kept = [rows[0]] + [r for r in rows[1:] if r[start] >= "2023-11-05" or r[rows[0].index(
        "lineItem/LineItemType")] != "Usage"]
    (tmp_path / "export").mkdir()
    with open(tmp_path / "export" / "cur.csv", "w", newline="") as handle:
        csv.writer(handle).writerows(kept)
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: cur, kind: aws-cur, location: '{tmp_path / 'export'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    said = ("The lake's usage data starts at 2023-11-05 00:00 UTC, in its first bill (2023-11): there is no usage on "
            "2023-11-03 to report (a charge of the whole month, a tax or a fee, counts its share of the day).")
    assert report(tmp_path, config, "2023-11-03") and notes_of(tmp_path, "2023-11-03")[:1] == [said]
    assert report(tmp_path, config, "2023-11-05") and "usage data starts" not in " ".join(notes_of(tmp_path, "2023-11-05"))
    ledger = tmp_path / "lake" / "_ledger" / "deliveries.json"
    data = json.loads(ledger.read_text())
    for entry in data["entries"]:  # as written before 2026-12
        del entry["days"], entry["data_from"]
    ledger.write_text(json.dumps(data))
    assert report(tmp_path, config, "2023-11-03") and "usage data starts" not in " ".join(notes_of(tmp_path,
                                                                                                  "2023-11-03"))


def notes_of(root, day: str) -> list[str]:
    return json.loads((root / "out" / day / "report.json").read_text())["notes"]
