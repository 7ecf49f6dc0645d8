"""A bill the cloud delivers again with other figures for the days it already held (a restatement)
changes the report's figures, and the report says so under the Bills table: when, and from what."""

from __future__ import annotations

import csv
import json
import shutil
from datetime import date, timedelta
from decimal import Decimal

import pytest
from click.testing import CliRunner

from conftest import SAMPLES
from service.cli.main import cli
from service.core.ledger import CurrencyTotals, LedgerEntry, Replaced
from service.report.sections.restated import restated_notes

CUR = SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv"


def spendlake(config_file, *args):
    return CliRunner().invoke(cli, ["--config", str(config_file), *args], catch_exceptions=False)


def ingested_cur(tmp_path):
    """The config of a lake holding the anonymous CUR's November, ingested once."""
    (tmp_path / "export").mkdir()
    shutil.copy(CUR, tmp_path / "export" / "cur.csv")
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: cur, kind: aws-cur, location: '{tmp_path / 'export'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    return config


def bills_table(tmp_path, config, day: str) -> dict:
    assert spendlake(config, "report", "--date", day, "--out", str(tmp_path / "out")).exit_code == 0
    data = json.loads((tmp_path / "out" / day / "report.json").read_text())
    return next(t for s in data["sections"] if s["key"] == "bills" for t in s["tables"] if t["key"] == "bills")


def rewrite(path, change, day: str = "2023-11-13") -> None:
    """The CUR file with `change(header, row)` applied to its first usage line of `day` (13 November:
    the day before its data's end's day, which late usage still fills in); a line it returns is added
    to the file."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    header, start, kind = rows[0], rows[0].index("lineItem/UsageStartDate"), rows[0].index("lineItem/LineItemType")
    row = next(r for r in rows[1:] if r[start].startswith(day) and r[kind] == "Usage")
    if (added := change(header, row)) is not None:
        rows.append(added)
    with open(path, "w", newline="") as handle:
        csv.writer(handle).writerows(rows)


def test_a_bill_delivered_again_with_other_figures_for_the_same_days_is_said_restated(tmp_path):
    """The anonymous CUR's November delivered again with a usage line of the 5th USD 1.00 dearer and
    its data still through 14 November 04:00: the report of the 13th went from a USD 1.68 bill to
    2.68 (month to date 1.63 to 2.63) with nothing said; a finance reader who tied yesterday's copy
    could not tell the cloud restated the month, days well before the data's end, which late usage
    no longer fills in. A note under the Bills table says it."""
    config = ingested_cur(tmp_path)
    before = bills_table(tmp_path, config, "2023-11-13")
    assert not [n for n in before.get("notes", []) if "restated" in n]
    first = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]

    def dearer(header, row):
        cost = header.index("lineItem/UnblendedCost")
        row[cost] = str(Decimal(row[cost]) + 1)
    rewrite(tmp_path / "export" / "cur.csv", dearer, "2023-11-05")
    assert spendlake(config, "ingest").exit_code == 0
    after = bills_table(tmp_path, config, "2023-11-13")
    assert Decimal(after["rows"][0]["billed_cost"]) == Decimal(before["rows"][0]["billed_cost"]) + 1
    entry = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    assert [n for n in after["notes"] if "restated" in n] == [
        f"Bill 2023-11 / cur / USD restated: {again(entry)}, "
        f"its data still through 2023-11-14 04:00 UTC, it bills $2.68 where the delivery "
        f"{of(first)} billed $1.68 ($1.00 more): the figures above that count its "
        "lines changed with it."]


def a_day_later(header, row, day: int = 15) -> list[str]:
    """A usage line of November `day` (the 15th) like `row`, USD 1.00: the month grown to that day."""
    later, start = list(row), row[header.index("lineItem/UsageStartDate")][:10]
    end = (date.fromisoformat(start) + timedelta(days=1)).isoformat()
    for column in ("lineItem/UsageStartDate", "lineItem/UsageEndDate", "identity/TimeInterval"):
        later[header.index(column)] = later[header.index(column)].replace(end, f"2023-11-{day + 1:02}").replace(
            start, f"2023-11-{day:02}")
    later[header.index("lineItem/UnblendedCost")] = "1"
    return later


def test_a_bill_delivered_again_with_a_later_day_and_other_figures_for_the_days_it_held_is_said_restated(tmp_path):
    """AWS's month to date delivered again reaching the 15th, and a usage line of the 5th USD 1.00
    dearer: the data's end moved, so the change was taken for the month growing (the bill USD 1.68
    became 3.68 with nothing said). The days the first delivery held whole, but for the two before
    its data end's day that late usage fills in (before the 12th), are compared by the day sums the
    ledger keeps: USD 1.00 more there is a restatement."""
    config = ingested_cur(tmp_path)
    first = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    held = sum(Decimal(billed) for day, (billed, _) in first["days"]["USD"].items() if day < "2023-11-12")

    rewrite(tmp_path / "export" / "cur.csv", lambda header, row: dearer(header, row, later=15), "2023-11-05")
    assert spendlake(config, "ingest").exit_code == 0
    entry = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    assert entry["data_through"] > first["data_through"]  # the month grew: taken for growth alone before
    assert [n for n in bills_table(tmp_path, config, "2023-11-15")["notes"] if "restated" in n] == [
        f"Bill 2023-11 / cur / USD restated: {again(entry)}, "
        f"its data now through {entry['data_through'][:16].replace('T', ' ')} UTC, for its usage lines of the days "
        "before 2023-11-12 (credits, refunds and taxes apart) it bills "
        f"${held + 1:.2f} where the delivery {of(first)}, its data through "
        f"2023-11-14 04:00 UTC, billed ${held:.2f} ($1.00 more, besides the days it adds): the figures above "
        "that count those days changed with it."]


def test_a_bill_delivered_again_with_a_later_day_is_no_restatement(tmp_path):
    """AWS delivers the month to date again each day: a delivery reaching further is the month growing."""
    config = ingested_cur(tmp_path)

    rewrite(tmp_path / "export" / "cur.csv", a_day_later)
    assert spendlake(config, "ingest").exit_code == 0
    entry = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    assert entry["data_through"] > entry["replaced"]["data_through"]  # the ledger keeps the figures it replaced
    assert not [n for n in bills_table(tmp_path, config, "2023-11-13").get("notes", []) if "restated" in n]


@pytest.mark.parametrize("later", [False, True], ids=["the same days", "a day later"])
def test_a_change_under_the_cent_is_no_restatement(tmp_path, later):
    """A line of the 13th delivered again USD 0.001 dearer (a late line's fraction) changes no figure the
    report shows: 'restated ... ($0.00 more)' said nothing but alarm (review42)."""
    config = ingested_cur(tmp_path)
    first = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    bill = sum(Decimal(t["billed_cost"]) for t in first["totals"])
    assert (bill + Decimal("0.001")).quantize(Decimal("0.01")) == bill.quantize(Decimal("0.01"))

    def a_fraction_dearer(header, row):
        cost = header.index("lineItem/UnblendedCost")
        row[cost] = str(Decimal(row[cost]) + Decimal("0.001"))
        return a_day_later(header, row) if later else None
    rewrite(tmp_path / "export" / "cur.csv", a_fraction_dearer)
    assert spendlake(config, "ingest").exit_code == 0
    entry = json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]
    assert entry["delivery_id"] != first["delivery_id"] and entry["sha256"] != first["sha256"]  # delivered again, its figures changed
    assert not [n for n in bills_table(tmp_path, config, "2023-11-15").get("notes", []) if "restated" in n]


def ledger_entry(tmp_path) -> dict:
    return json.loads((tmp_path / "lake" / "_ledger" / "deliveries.json").read_text())["entries"][0]


def minute(text: str) -> str:
    return text[:16].replace("T", " ")


def again(entry: dict) -> str:
    """How a note says when a delivery of a local file was delivered: its file's write time (ledger's delivered_at)."""
    assert entry["delivered_by"] == "files", entry
    return f"delivered again at {minute(entry['delivered_at'])} UTC (its files' write time)"


def of(entry: dict) -> str:
    assert entry["delivered_by"] == "files", entry
    return f"of {minute(entry['delivered_at'])} UTC (its files' write time)"


def dearer(header, row, later: int | None = None):
    """`row` USD 1.00 dearer; with `later`, a line of November `later` added (the month grown)."""
    cost = header.index("lineItem/UnblendedCost")
    row[cost] = str(Decimal(row[cost]) + 1)
    return None if later is None else a_day_later(header, row, later)


def usage(entry: dict, first: str, last: str) -> Decimal:
    return sum((Decimal(billed) for day, (billed, _) in entry["days"]["USD"].items() if first <= day <= last),
               Decimal(0))


def invoiced(path) -> None:
    """The CUR file with every line on invoice INV-1: AWS's finalized month."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    invoice = rows[0].index("bill/InvoiceId")
    with open(path, "w", newline="") as handle:
        csv.writer(handle).writerows([rows[0]] + [[*r[:invoice], "INV-1", *r[invoice + 1:]] for r in rows[1:]])


LATE = "an estimated bill's last days grow as the cloud meters late usage, until its invoice"


def test_an_estimate_delivered_again_with_its_last_days_filled_in_is_updated_with_late_usage_not_restated(tmp_path):
    """AWS rewrites the month to date up to three times a day, and usage it meters a day or two late
    fills in the last days it held: the November estimate through the 14th 04:00 delivered again with
    the 13th USD 1.00 dearer was said 'restated', the word finance keeps for a bill's figures changed
    after the fact. It is said updated with late usage, the days before the 12th as they were."""
    config = ingested_cur(tmp_path)
    first = ledger_entry(tmp_path)
    rewrite(tmp_path / "export" / "cur.csv", dearer)
    assert spendlake(config, "ingest").exit_code == 0
    entry = ledger_entry(tmp_path)
    notes = bills_table(tmp_path, config, "2023-11-13")["notes"]
    assert not [n for n in notes if "restated" in n]
    assert [n for n in notes if "late usage" in n] == [
        f"Bill 2023-11 / cur / USD updated with late usage: {again(entry)}, "
        f"its data still through 2023-11-14 04:00 UTC, it bills $2.68 where the estimate "
        f"{of(first)} billed $1.68 ($1.00 more), its usage before 2023-11-12 as it was: "
        f"{LATE}; the figures above that count its lines changed with it."]


def test_an_estimate_reaching_further_with_its_last_days_filled_in_is_updated_with_late_usage_not_restated(tmp_path):
    """The month to date delivered again through the 15th, the 13th USD 1.00 dearer: the days the
    first delivery held but late usage still fills in (the 12th and 13th) are said updated, with their
    figures before and after, and the days before them as they were."""
    config = ingested_cur(tmp_path)
    first = ledger_entry(tmp_path)
    rewrite(tmp_path / "export" / "cur.csv", lambda header, row: dearer(header, row, later=15))
    assert spendlake(config, "ingest").exit_code == 0
    entry, late = ledger_entry(tmp_path), usage(first, "2023-11-12", "2023-11-13")
    notes = bills_table(tmp_path, config, "2023-11-15")["notes"]
    assert not [n for n in notes if "restated" in n]
    assert [n for n in notes if "late usage" in n] == [
        f"Bill 2023-11 / cur / USD updated with late usage: {again(entry)}, "
        f"its data now through {minute(entry['data_through'])} UTC, for its usage lines of 2023-11-12 to 2023-11-13 "
        "(credits, refunds and taxes apart) it "
        f"bills ${late + 1:.2f} where the estimate {of(first)}, its data through "
        f"2023-11-14 04:00 UTC, billed ${late:.2f} ($1.00 more, besides the days it adds), its usage before "
        f"2023-11-12 as it was: {LATE}; the figures above that count those days changed with it."]


def test_a_month_delivered_again_and_again_tells_each_restatement_it_keeps_and_the_final_bill_restated_twice(tmp_path):
    """A month to date delivered four times, then its invoice, then two changes after it (a refund, a
    support fee): the ledger kept only the delivery last replaced, so a restatement of the 5th was
    forgotten by the next day's delivery (the month grown, nothing restated), and the invoice's
    figures by the second change of the final bill. Each change the ledger keeps is told, oldest
    first (the estimate's no more once the invoice is in); late usage only for the latest delivery."""
    config = ingested_cur(tmp_path)
    cur = tmp_path / "export" / "cur.csv"
    rewrite(cur, lambda header, row: dearer(header, row, later=15))  # late usage of the 13th
    assert spendlake(config, "ingest").exit_code == 0
    rewrite(cur, lambda header, row: dearer(header, row, later=16), "2023-11-05")  # the 5th restated
    assert spendlake(config, "ingest").exit_code == 0
    restated = ledger_entry(tmp_path)
    rewrite(cur, lambda header, row: a_day_later(header, row, 17))  # the month grown only
    assert spendlake(config, "ingest").exit_code == 0
    notes = bills_table(tmp_path, config, "2023-11-17")["notes"]
    told = [n for n in notes if "restated" in n or "late usage" in n]
    assert len(told) == 1 and told[0].startswith(
        f"Bill 2023-11 / cur / USD restated: {again(restated)}, its data now")

    invoiced(cur)
    assert spendlake(config, "ingest").exit_code == 0  # the invoice: the same figures, final
    assert ledger_entry(tmp_path)["final"]
    for _ in range(2):  # a refund of the 5th, then a support fee of the 6th: each USD 1.00
        rewrite(cur, lambda header, row: dearer(header, row), "2023-11-06" if _ else "2023-11-05")
        assert spendlake(config, "ingest").exit_code == 0
    entry = ledger_entry(tmp_path)
    notes = bills_table(tmp_path, config, "2023-11-17")["notes"]
    assert [n for n in notes if "restated" in n] == [  # the estimate's restatement past with the invoice
        f"Bill 2023-11 / cur / USD restated: {again(entry['replaced'])}, its "
        f"data still through {minute(entry['data_through'])} UTC, it bills "
        f"${Decimal(entry['replaced']['totals'][0]['billed_cost']):.2f} where the final delivery "
        f"{of(entry['earlier'][0])} billed ${Decimal(entry['earlier'][0]['totals'][0]['billed_cost']):.2f} "
        "($1.00 more): the figures above that count its lines changed with it.",
        f"Bill 2023-11 / cur / USD restated: {again(entry)}, its data still "
        f"through {minute(entry['data_through'])} UTC, it bills ${Decimal(entry['totals'][0]['billed_cost']):.2f} "
        f"where the final delivery {of(entry['replaced'])} billed "
        f"${Decimal(entry['replaced']['totals'][0]['billed_cost']):.2f} ($1.00 more): the figures above that count "
        "its lines changed with it."]
    assert len(entry["earlier"]) == 3  # four deliveries kept: the rest forgotten


def test_a_ledger_written_before_day_sums_is_read_by_the_report_the_status_and_the_next_delivery(tmp_path):
    """A restated bill recorded before 2026-12 (no day sums, no data_from, in the entry or the delivery
    it replaced): the report still tells the whole bill restated, `status` reads it, and a delivery
    reaching further with the 5th dearer again is compared by the day sums the entry gains from its file
    before it is replaced (an upgraded lake): that restatement is told after the one before it."""
    config = ingested_cur(tmp_path)
    rewrite(tmp_path / "export" / "cur.csv", dearer, "2023-11-05")
    assert spendlake(config, "ingest").exit_code == 0
    ledger = tmp_path / "lake" / "_ledger" / "deliveries.json"
    data = json.loads(ledger.read_text())
    for entry in data["entries"]:  # as written before 2026-12
        del entry["days"], entry["data_from"], entry["replaced"]["days"]
    ledger.write_text(json.dumps(data))
    restated = [n for n in bills_table(tmp_path, config, "2023-11-13")["notes"] if "restated" in n]
    assert len(restated) == 1 and "it bills $2.68 where the delivery of" in restated[0]
    assert spendlake(config, "status").exit_code == 0
    rewrite(tmp_path / "export" / "cur.csv", lambda header, row: dearer(header, row, later=15), "2023-11-05")
    assert spendlake(config, "ingest").exit_code == 0
    first, again = [n for n in bills_table(tmp_path, config, "2023-11-15")["notes"] if "restated" in n]
    assert first == restated[0] and "for its usage lines of the days before 2023-11-12" in again
    assert "($1.00 more, besides the days it adds)" in again


def test_an_estimate_replaced_by_its_invoice_with_its_last_days_filled_in_is_said_finalized(tmp_path):
    """The invoice's delivery (every line with its invoice id) with the 13th USD 1.00 dearer than the
    estimate: no restatement of a bill, which was never final before; said finalized, from what."""
    config = ingested_cur(tmp_path)
    first = ledger_entry(tmp_path)
    cur = tmp_path / "export" / "cur.csv"
    rewrite(cur, dearer)
    invoiced(cur)
    assert spendlake(config, "ingest").exit_code == 0
    entry = ledger_entry(tmp_path)
    assert entry["final"]
    assert [n for n in bills_table(tmp_path, config, "2023-11-13")["notes"] if n.startswith("Bill ")] == [
        f"Bill 2023-11 / cur / USD finalized: {again(entry)}, its data still "
        f"through 2023-11-14 04:00 UTC, it bills $2.68 where the estimate {of(first)} "
        "billed $1.68 ($1.00 more), its usage before 2023-11-12 as it was: the invoice's figures replace the "
        "estimate's; the figures above that count its lines changed with it."]


def test_a_currency_a_restated_bill_no_longer_holds_is_said_restated_to_nothing(tmp_path):
    """November delivered with a EUR line of the 5th (EUR 3.50 beside the USD bill), then again
    without it: the EUR bill left the Bills table with nothing said, since only the currencies the
    new delivery holds were compared; a reader who tied out the EUR 3.50 saw no word of it."""
    (tmp_path / "export").mkdir()
    shutil.copy(CUR, tmp_path / "export" / "cur.csv")

    def in_euros(header, row):
        added = list(row)
        added[header.index("lineItem/CurrencyCode")], added[header.index("lineItem/UnblendedCost")] = "EUR", "3.5"
        return added
    rewrite(tmp_path / "export" / "cur.csv", in_euros, "2023-11-05")
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: cur, kind: aws-cur, location: '{tmp_path / 'export'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    first = ledger_entry(tmp_path)
    shutil.copy(CUR, tmp_path / "export" / "cur.csv")
    assert spendlake(config, "ingest").exit_code == 0
    table = bills_table(tmp_path, config, "2023-11-13")
    assert [row["currency"] for row in table["rows"]] == ["USD"]  # the USD bill as it was: not restated
    assert [n for n in table["notes"] if "restated" in n] == [
        f"Bill 2023-11 / cur / EUR restated: {again(ledger_entry(tmp_path))}, "
        f"its data still through 2023-11-14 04:00 UTC, it bills EUR 0.00 where the delivery {of(first)} "
        "billed EUR 3.50 (EUR 3.50 less): the figures above that count its lines changed with it."]


def estimate(ingested_at: str, through: str, bill: str, days: int) -> tuple:
    """An estimate's (ingested_at, data_through, totals, day sums): USD 10 of usage a day for `days` days
    from 1 November, and its bill, which lines without a usage day (a credit, a refund, tax) make differ."""
    sums = (("USD", tuple((f"2023-11-{day:02d}", Decimal(10), Decimal(10)) for day in range(1, days + 1))),)
    return ingested_at, through, (CurrencyTotals("USD", 50, Decimal(bill), Decimal(bill)),), sums


def delivered_twice(old: tuple, new: tuple) -> list[str]:
    before = Replaced(old[0], old[1], False, old[2], old[3])
    return restated_notes([LedgerEntry("cur", "2023-11", "d2", 51, new[2], False, new[0], data_through=new[1],
                                       replaced=before, days=new[3])])


def test_a_credit_on_an_estimate_whose_usage_is_as_it_was_is_said_outside_its_usage_not_late_usage():
    """The month to date delivered again with the same data end and the same usage by day, its bill $50
    now $25 (a $25 credit or refund): it was said 'updated with late usage', a false reason; it is said
    restated, outside its usage lines."""
    notes = delivered_twice(estimate("2023-11-06T04:00:00Z", "2023-11-06T00:00:00Z", "50", 5),
                            estimate("2023-11-06T12:00:00Z", "2023-11-06T00:00:00Z", "25", 5))
    assert notes == [
        "Bill 2023-11 / cur / USD restated: delivered again, ingested at 2023-11-06 12:00 UTC, its data still through "
        "2023-11-06 00:00 UTC, outside its usage lines (credits, refunds, taxes) it bills \u2212$25.00 where the delivery "
        "ingested at 2023-11-06 04:00 UTC billed $0.00 ($25.00 less): the figures above that count its lines changed with it."]


def test_a_credit_delivered_with_a_new_day_is_said_beside_the_days_it_adds():
    """The month to date delivered a day further ($10 of usage more) with a $25 credit: the usage of the
    days it held as it was, so nothing was said of the credit; it is said restated, outside its usage lines."""
    notes = delivered_twice(estimate("2023-11-06T04:00:00Z", "2023-11-06T00:00:00Z", "50", 5),
                            estimate("2023-11-07T04:00:00Z", "2023-11-07T00:00:00Z", "35", 6))
    assert notes == [
        "Bill 2023-11 / cur / USD restated: delivered again, ingested at 2023-11-07 04:00 UTC, its data now through "
        "2023-11-07 00:00 UTC, outside its usage lines (credits, refunds, taxes) it bills \u2212$25.00 where the delivery "
        "ingested at 2023-11-06 04:00 UTC billed $0.00 ($25.00 less): the figures above that count its lines changed with it."]



def focus_month(export, correction: str | None = None, last: int = 6) -> None:
    """A FOCUS export's November to date (an estimate: no invoice id), USD 10.00 of usage on each of
    the 1st to the 6th (to the `last`), with `correction` (its BilledCost) a usage line's refund on the 5th
    (ChargeCategory Usage, ChargeClass Correction, as FOCUS writes the correction of a charge)."""
    rows = [f"10,10,USD,2023-11-01,2023-11-{day:02}T10:00:00Z,2023-11-{day:02}T11:00:00Z,Usage,,i-1"
            for day in range(1, last + 1)]
    if correction is not None:
        rows.append(f"{correction},{correction},USD,2023-11-01,2023-11-05T10:00:00Z,2023-11-05T11:00:00Z,Usage,"
                    "Correction,i-1")
    export.mkdir(exist_ok=True)
    (export / "focus.csv").write_text("BilledCost,EffectiveCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,"
                                      "ChargePeriodEnd,ChargeCategory,ChargeClass,ResourceId\n" + "\n".join(rows) + "\n")


def test_a_refund_of_one_of_an_estimates_last_days_usage_is_said_outside_its_usage_not_late_usage(tmp_path):
    """An estimated month to date delivered again, its data still through the 6th, with a USD 4.00
    refund of the 5th's usage (ChargeCategory Usage, ChargeClass Correction): the ledger summed it into
    the 5th, one of the days late usage fills in, and the report said 'updated with late usage'; a
    refund is no usage metered late: it is restated outside its usage lines, the 5th's usage as it was."""
    focus_month(tmp_path / "export")
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: focus, kind: focus, location: '{tmp_path / 'export'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    first = ledger_entry(tmp_path)
    focus_month(tmp_path / "export", "-4")
    assert spendlake(config, "ingest").exit_code == 0
    entry = ledger_entry(tmp_path)
    assert entry["days"]["USD"]["2023-11-05"] == first["days"]["USD"]["2023-11-05"]  # usage as it was
    notes = bills_table(tmp_path, config, "2023-11-05")["notes"]
    assert not [n for n in notes if "late usage" in n]
    assert [n for n in notes if "restated" in n] == [
        f"Bill 2023-11 / focus / USD restated: {again(entry)}, its data still "
        f"through 2023-11-06 11:00 UTC, outside its usage lines (credits, refunds, taxes) it bills \u2212$4.00 where "
        f"the delivery {of(first)} billed $0.00 ($4.00 less): the figures above that "
        "count its lines changed with it."]


def test_a_replaced_delivery_recorded_before_ends_were_bounded_is_told_through_its_bound():
    """A month to date replaced by a delivery a day further, the one it replaced recorded before commits
    bounded the data's end (a line's 2099-01-01 as it was written; data_through_bounded False): read as
    reaching past the new one, the grown month was told as its whole bill restated. It is taken as coverage takes it: no later than a day
    after its commit (usage_end.capped_through), and the month told grown by late usage."""
    old, new = (estimate("2023-11-06T04:00:00Z", "2099-01-01T00:00:00Z", "50", 5),
                estimate("2023-11-08T04:00:00Z", "2023-11-08T00:00:00Z", "70", 7))
    before = Replaced(old[0], old[1], False, old[2], old[3], data_through_bounded=False)
    notes = restated_notes([LedgerEntry("cur", "2023-11", "d2", 51, new[2], False, new[0], data_through=new[1],
                                        replaced=before, days=new[3])])
    assert notes == [
        "Bill 2023-11 / cur / USD updated with late usage: delivered again, ingested at 2023-11-08 04:00 UTC, its data now "
        "through 2023-11-08 00:00 UTC, for its usage lines of 2023-11-05 to 2023-11-06 (credits, refunds and taxes "
        "apart) it bills $20.00 where the estimate "
        "ingested at 2023-11-06 04:00 UTC, its data through 2023-11-07 04:00 UTC, billed $10.00 ($10.00 more, besides the days "
        "it adds), its usage before 2023-11-05 as it was: an estimated bill's last days grow as the cloud meters late "
        "usage, until its invoice; the figures above that count those days changed with it."]
