"""A lake whose ledger was written before day sums (spendlake before 2026-12: entries without
`days` and `data_from`), upgraded: the next delivery of a period must still tell a restatement of
the days both deliveries hold (report/sections/restated.py), not read it as the month growing."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal

from service.core.ledger import DAYS_VERSION, CurrencyTotals, LedgerEntry, Replaced
from service.report.sections.restated import restated_notes
from test_report_restated import (again, bills_table, dearer, focus_month, ingested_cur, ledger_entry, minute,
                                  rewrite, spendlake)


def test_a_delivery_replacing_an_entry_written_before_day_sums_still_tells_the_days_it_restated(tmp_path):
    """The anonymous CUR's November ingested by an older spendlake (its ledger as that one wrote it),
    then delivered again reaching the 15th with a usage line of the 5th USD 1.00 dearer: the replaced
    entry had no day sums, so the restatement was read as growth and said nothing (the demo's lake of
    session 35 upgraded: November's $147.08 restated silently). Before it is replaced, the entry gains
    its day sums from its partition, still in place, and the restatement is told."""
    config = ingested_cur(tmp_path)
    ledger = tmp_path / "lake" / "_ledger" / "deliveries.json"
    data = json.loads(ledger.read_text())
    first = json.loads(ledger.read_text())["entries"][0]
    held = sum(Decimal(billed) for day, (billed, _) in first["days"]["USD"].items() if day < "2023-11-12")
    for entry in data["entries"]:  # as written before 2026-12 (and before delivery times, session 51)
        del entry["days"], entry["data_from"], entry["delivered_at"], entry["delivered_by"]
    ledger.write_text(json.dumps(data))

    rewrite(tmp_path / "export" / "cur.csv", lambda header, row: dearer(header, row, later=15), "2023-11-05")
    assert spendlake(config, "ingest").exit_code == 0
    entry = json.loads(ledger.read_text())["entries"][0]
    assert entry["replaced"]["days"] == first["days"]
    assert [n for n in bills_table(tmp_path, config, "2023-11-15")["notes"] if "restated" in n] == [
        f"Bill 2023-11 / cur / USD restated: {again(entry)}, its data now "
        f"through {minute(entry['data_through'])} UTC, for its usage lines of the days before 2023-11-12 (credits, "
        "refunds and taxes apart) it bills "
        f"${held + 1:.2f} where the delivery ingested at {minute(first['ingested_at'])} UTC, its data through "
        f"2023-11-14 04:00 UTC, billed ${held:.2f} ($1.00 more, besides the days it adds): the figures above "
        "that count those days changed with it."]


def test_a_delivery_replacing_day_sums_that_counted_a_refund_compares_them_without_it(tmp_path):
    """A FOCUS month to date with a USD 4.00 refund of the 5th's usage (ChargeClass Correction),
    ingested before the ledger's day sums left corrections out (its 5th summed to $6.00, no
    days_version), then delivered again a day further with the 1st to the 6th as they were: compared
    with the old sums, the refund read as $4.00 of late usage on the 5th beside a $4.00 refund
    'restated outside its usage lines', though nothing the first delivery held changed. Before it is
    replaced, the entry's day sums are read again from its partition, the refund apart: the month grew."""
    focus_month(tmp_path / "export", "-4")
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: focus, kind: focus, location: '{tmp_path / 'export'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    ledger = tmp_path / "lake" / "_ledger" / "deliveries.json"
    data = json.loads(ledger.read_text())
    assert data["entries"][0]["days_version"] == DAYS_VERSION
    for entry in data["entries"]:  # as written before the day sums left corrections out
        del entry["days_version"]
        entry["days"]["USD"]["2023-11-05"] = ["6", "6"]
    ledger.write_text(json.dumps(data))

    focus_month(tmp_path / "export", "-4", last=7)
    assert spendlake(config, "ingest").exit_code == 0
    entry = ledger_entry(tmp_path)
    assert [Decimal(v) for v in entry["replaced"]["days"]["USD"]["2023-11-05"]] == [10, 10]
    assert entry["replaced"]["days_version"] == entry["days_version"] == DAYS_VERSION
    notes = bills_table(tmp_path, config, "2023-11-06")["notes"]
    assert not [n for n in notes if "restated" in n or "late usage" in n], notes


def test_day_sums_summed_before_corrections_were_left_out_are_not_compared_with_those_after():
    """A delivery kept in the ledger from before the day sums left corrections out (its file replaced
    long ago, so never read again: days_version 1), its 5th $6.00 with a $4.00 refund in it, and the
    next one a day further whose sums leave the refund out: compared, the refund read as $4.00 of late
    usage on the 5th and a $4.00 refund restated outside the usage lines; sums not summed alike are not
    compared, the change told as one of a ledger without day sums (the month grew)."""
    sums = {day: Decimal(6 if day == 5 else 10) for day in range(1, 7)}
    before = Replaced("2023-11-06T12:00:00Z", "2023-11-06T11:00:00Z", False,
                      (CurrencyTotals("USD", 7, Decimal(56), Decimal(56)),),
                      (("USD", tuple((f"2023-11-{day:02d}", cost, cost) for day, cost in sums.items())),), 1)
    days = (("USD", tuple((f"2023-11-{day:02d}", Decimal(10), Decimal(10)) for day in range(1, 8))),)
    entry = LedgerEntry("focus", "2023-11", "d2", 8, (CurrencyTotals("USD", 8, Decimal(66), Decimal(66)),), False,
                        "2023-11-07T12:00:00Z", data_through="2023-11-07T11:00:00Z", replaced=before, days=days)
    assert entry.days_version == DAYS_VERSION > before.days_version
    assert restated_notes([entry]) == []
    alike = replace(entry, replaced=replace(before, days_version=DAYS_VERSION))  # as if summed alike
    assert [n.split(":")[0] for n in restated_notes([alike])] == [
        "Bill 2023-11 / focus / USD updated with late usage", "Bill 2023-11 / focus / USD restated"]
