"""The report's Bills table against its month to date on a day before the bill ends: the part of the
month's bill used after the report's day (AWS's monthly tax, spread over the month's days, and the
usage of the days after) is named under the table, so the month to date ties out to the bill."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal

import duckdb
from click.testing import CliRunner

from conftest import SAMPLES
from service.cli.main import cli

CUR = SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv"


def spendlake(config_file, *args):
    return CliRunner().invoke(cli, ["--config", str(config_file), *args], catch_exceptions=False)


def cents(amount: Decimal) -> str:
    return f"${amount.quantize(Decimal('0.01'), ROUND_HALF_UP):,}"


def report_json(tmp_path, day: str) -> dict:
    config = tmp_path / "spendlake.yaml"
    if not config.exists():
        config.write_text(f"lake: ./lake\nsources:\n  - {{name: cur, kind: aws-cur, location: '{CUR}'}}\n")
        assert spendlake(config, "ingest").exit_code == 0
    assert spendlake(config, "report", "--date", day, "--out", str(tmp_path / "out")).exit_code == 0
    return json.loads((tmp_path / "out" / day / "report.json").read_text())


def table(data: dict, section: str, key: str) -> dict:
    return next(t for s in data["sections"] if s["key"] == section for t in s["tables"] if t["key"] == key)


def test_the_part_of_the_bill_used_after_the_reports_day_is_named_so_the_month_to_date_ties_out(tmp_path):
    """The anonymous CUR's November: a USD 0.08 tax charged over the whole month and usage to
    14 November 04:00. On the 13th the month to date is USD 1.63 and the bill USD 1.68, and the
    page said nothing of the USD 0.05 between them: the tax's 17 days to come and the 14th's usage."""
    sums = dict(duckdb.sql(f"""SELECT "lineItem/LineItemType", sum("lineItem/UnblendedCost"::DECIMAL(38,12))
        FROM read_csv('{CUR}', all_varchar=true) WHERE "lineItem/UsageStartDate" >= '2023-11-14'
        OR "lineItem/LineItemType" = 'Tax' GROUP BY ALL""").fetchall())
    # each tax line runs 1 November to 1 December: its 14th to 30th are after the day
    tax_after = (sums["Tax"] * 17 / 30).quantize(Decimal("1e-12"))
    usage_after = sums["Usage"]  # every usage line is of one day or hour: those of the 14th
    data = report_json(tmp_path, "2023-11-13")
    bill = Decimal(table(data, "bills", "bills")["rows"][0]["billed_cost"])
    mtd = next(Decimal(r["cost"]) for r in table(data, "spend", "totals")["rows"] if r["window"] == "mtd")
    assert mtd + tax_after + usage_after == bill  # to the 12 decimals the lake keeps
    [note] = [n for n in table(data, "bills", "bills").get("notes", []) if "after 2023-11-13" in n]
    assert note.startswith(  # and the parts' rounding (the test below)
        f"Used after 2023-11-13, so in the 2023-11 bill but not in the month to date above: cur: "
        f"{cents(tax_after + usage_after)} (Tax {cents(tax_after)}, Usage {cents(usage_after)}; ")
    # on the month's last day nothing of the bill is after it, and the month to date is the bill
    data = report_json(tmp_path, "2023-11-30")
    assert not [n for n in table(data, "bills", "bills").get("notes", []) if "Used after" in n]
    assert next(Decimal(r["cost"]) for r in table(data, "spend", "totals")["rows"] if r["window"] == "mtd") == bill


def test_a_charge_after_the_datas_end_that_rounds_to_no_cent_is_not_named_as_0(tmp_path):
    """On 14 November, the CUR's data ending at 04:00, the monthly tax's 20 hours after it are
    USD 0.0022: the note under the title named 'Tax USD 0.00' as a charge in the figures. What
    rounds to no cent is left out; the rest of the month's tax (the 30th: USD 0.04) is named."""
    notes = report_json(tmp_path, "2023-11-14")["notes"]
    assert notes[0].startswith("The lake's billing data ends at 2023-11-14 04:00 UTC")
    assert "$0.00" not in notes[0]
    assert "Tax $0.04" in report_json(tmp_path, "2023-11-30")["notes"][0]


def test_the_after_day_parts_that_each_rounded_miss_their_total_say_the_rounding(tmp_path):
    """On 13 November the part after the day was 'cur: USD 0.05 (Tax USD 0.05, Usage USD 0.01)':
    finance adding the parts got USD 0.06. As under the Bills table (bills_by_category), the note
    names the parts' rounded sum and the exact one the total rounds."""
    sums = dict(duckdb.sql(f"""SELECT "lineItem/LineItemType", sum("lineItem/UnblendedCost"::DECIMAL(38,12))
        FROM read_csv('{CUR}', all_varchar=true) WHERE "lineItem/UsageStartDate" >= '2023-11-14'
        OR "lineItem/LineItemType" = 'Tax' GROUP BY ALL""").fetchall())
    tax_after, usage_after = (sums["Tax"] * 17 / 30).quantize(Decimal("1e-12")), sums["Usage"]
    exact = tax_after + usage_after
    parts = Decimal(cents(tax_after)[1:]) + Decimal(cents(usage_after)[1:])
    assert f"${parts}" != cents(exact)  # the case: 0.05 + 0.01 against 0.05
    [note] = [n for n in table(report_json(tmp_path, "2023-11-13"), "bills", "bills")["notes"] if "Used after" in n]
    assert note.endswith(
        f"cur: {cents(exact)} (Tax {cents(tax_after)}, Usage {cents(usage_after)}; each rounded to the cent, the "
        f"parts add up to ${parts}; their exact sum, ${exact.normalize():f}, rounds to {cents(exact)}: the "
        f"${abs(parts - Decimal(cents(exact)[1:])):.2f} between them is rounding).")
