"""A source whose bill stops before the report's day while another's goes on: the report says
so under its title, since its spend is in the days compared with but not in the day's."""

from __future__ import annotations

import csv
import json
from datetime import date, timedelta

from click.testing import CliRunner

from service.cli.main import cli

HEADER = ["BilledCost", "EffectiveCost", "BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd",
          "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ServiceName", "Tags"]


def write_daily(path, first: date, last: date):
    """One 100 USD usage line a day from `first` to `last`, each in its month's billing period."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        day = first
        while day <= last:
            period = day.replace(day=1)
            following = (period + timedelta(days=32)).replace(day=1)
            writer.writerow(["100", "100", "USD", f"{period}T00:00:00Z", f"{following}T00:00:00Z",
                             f"{day}T00:00:00Z", f"{day + timedelta(days=1)}T00:00:00Z", "Usage", "Compute",
                             '{"team": "pretrain"}'])
            day += timedelta(days=1)


def report_notes(config, day: str, out) -> list[str]:
    result = CliRunner().invoke(cli, ["--config", str(config), "report", "--date", day, "--out", str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads((out / day / "report.json").read_text())["notes"]


def test_a_source_whose_data_ends_before_the_day_is_named_under_the_title(tmp_path):
    for name, first, last in (("going", date(2026, 10, 1), date(2026, 11, 5)),
                              ("stopped", date(2026, 10, 1), date(2026, 10, 31)),
                              ("retired", date(2026, 7, 1), date(2026, 8, 31))):
        (tmp_path / name).mkdir()
        write_daily(tmp_path / name / "bill.csv", first, last)
    config = tmp_path / "spendlake.yaml"
    config.write_text("lake: ./lake\nsources:\n" + "".join(
        f"  - {{name: {name}, kind: focus, location: ./{name}}}\n" for name in ("going", "stopped", "retired")))
    assert CliRunner().invoke(cli, ["--config", str(config), "ingest"]).exit_code == 0
    notes = report_notes(config, "2026-11-03", tmp_path / "out")
    behind = [note for note in notes if "'s billing data ends at" in note and not note.startswith("The lake's")]
    # retired's data ended before the days compared with (October and November): nothing to say
    assert behind == ["stopped's billing data ends at 2026-11-01 00:00 UTC: its spend after it is not in yet, so "
                      "this day's and this month's changes against earlier days count it only in those days (part "
                      "of a drop is that source's missing data, not less spend)."]
    assert not [note for note in report_notes(config, "2026-10-20", tmp_path / "out") if "billing data ends" in note]
    past = report_notes(config, "2026-11-10", tmp_path / "out")  # past every source's data: the lake's note only
    assert past[0].startswith("The lake's billing data ends at 2026-11-06 00:00 UTC")
    assert not [note for note in past[1:] if "billing data ends" in note]
    assert "stopped&#39;s billing data ends at 2026-11-01" in (tmp_path / "out" / "2026-11-03" / "report.html").read_text()


def test_a_purchase_dated_after_the_last_usage_line_is_named_in_the_data_end_note(tmp_path):
    """The lake's data end is its latest usage line's end (a monthly fee runs to the month's end
    whatever the data says), but a purchase dated after it is in the bill: the note said all
    spend after the end was missing while the day's headline was that purchase (5,000 after a
    usage end of 5 Nov 00:00). It now says the end is of usage and names what is in after it."""
    (tmp_path / "bill").mkdir()
    write_daily(tmp_path / "bill" / "bill.csv", date(2026, 10, 1), date(2026, 11, 4))
    with open(tmp_path / "bill" / "bill.csv", "a", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerow(["5000", "0", "USD", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z",
                                     "2026-11-05T14:00:00Z", "2026-11-05T15:00:00Z", "Purchase", "Compute", "{}"])
    config = tmp_path / "spendlake.yaml"
    config.write_text("lake: ./lake\nsources:\n  - {name: bill, kind: focus, location: ./bill}\n")
    assert CliRunner().invoke(cli, ["--config", str(config), "ingest"]).exit_code == 0
    assert report_notes(config, "2026-11-05", tmp_path / "out")[0] == (
        "The lake's billing data ends at 2026-11-05 00:00 UTC (its latest usage charge): usage after it is not in "
        "yet, so this day's and this month's figures are incomplete, and no change against earlier days is shown "
        "(it would be no change in spend). Charges dated after it, or the part after it of those running past it (a "
        "monthly tax or fee to this day's end), are in the bill and in these figures: Purchase $5,000.00.")
    # a day of the next month: the purchase is November's, not in December's figures (the month past the data)
    december = report_notes(config, "2026-12-02", tmp_path / "out")[0]
    assert december.startswith("2026-12-02 is past the lake's billing data, which ends at 2026-11-05 00:00 UTC, before "
                               "December 2026 begins: none of the month's usage") and "Purchase" not in december


def test_a_monthly_charge_running_past_the_data_end_is_named_for_its_part_in_the_day(tmp_path):
    """A tax and a credit dated for the whole month (AWS's monthly lines) count a share of each of its
    days, so a day past the usage's end showed a headline of $9.00 (1/30 of USD 300 tax, of USD -30
    credit) under a note saying spend after the end was not in yet and naming nothing: it names
    their part after the end to the day's end."""
    notes = report_notes(monthly_tax_and_credit(tmp_path), "2026-11-05", tmp_path / "out")
    headline = json.loads((tmp_path / "out" / "2026-11-05" / "report.json").read_text())["headlines"][0]
    assert (headline["label"], headline["value"]) == ("Day, billed (USD)", "9.000000000000")
    assert notes[0].startswith("The lake's billing data ends at 2026-11-05 00:00 UTC (its latest usage charge): "
                               "usage after it is not in yet"), notes[0]
    assert notes[0].endswith(": Credit −$1.00; Tax $10.00."), notes[0]


def monthly_tax_and_credit(tmp_path):
    """A usage line a day to 4 November, a USD 300 tax and a USD -30 credit dated for all November."""
    (tmp_path / "bill").mkdir()
    write_daily(tmp_path / "bill" / "bill.csv", date(2026, 10, 1), date(2026, 11, 4))
    with open(tmp_path / "bill" / "bill.csv", "a", newline="", encoding="utf-8") as handle:
        for cost, category in (("300", "Tax"), ("-30", "Credit")):
            csv.writer(handle).writerow([cost, cost, "USD", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z",
                                         "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", category, "Compute", "{}"])
    config = tmp_path / "spendlake.yaml"
    config.write_text("lake: ./lake\nsources:\n  - {name: bill, kind: focus, location: ./bill}\n")
    assert CliRunner().invoke(cli, ["--config", str(config), "ingest"]).exit_code == 0
    return config


def test_the_notes_write_an_amount_as_the_tables_do(tmp_path):
    """The title note named the credit 'Credit USD -1.00' where the tables under it write −$1.00 (and
    the Bills notes 'USD 300.00' beside the table's $300.00): one money format, the tables', in
    every note of the page, report.json and summary.md."""
    config = monthly_tax_and_credit(tmp_path)
    notes = report_notes(config, "2026-11-05", tmp_path / "out")
    assert notes[0].endswith(": Credit −$1.00; Tax $10.00."), notes[0]
    data = json.loads((tmp_path / "out" / "2026-11-05" / "report.json").read_text())
    said = [n for s in data["sections"] for t in s.get("tables", []) for n in t.get("notes", [])] + notes
    assert [n for n in said if "Used after" in n] == [
        "Used after 2026-11-05, so in the 2026-11 bill but not in the month to date above: bill: $225.00 "
        "(Credit −$25.00, Tax $250.00)."]
    assert not [n for n in said if "USD " in n], said

