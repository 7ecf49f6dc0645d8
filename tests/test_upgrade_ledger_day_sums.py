"""A lake whose ledger was written before day sums (spendlake before 2026-12: entries without
`days` and `data_from`), upgraded: the next delivery of a period must still tell a restatement of
the days both deliveries hold (report/sections/restated.py), not read it as the month growing."""

from __future__ import annotations

import json
from decimal import Decimal

from test_report_restated import bills_table, dearer, ingested_cur, minute, rewrite, spendlake


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
    for entry in data["entries"]:  # as written before 2026-12
        del entry["days"], entry["data_from"]
    ledger.write_text(json.dumps(data))

    rewrite(tmp_path / "export" / "cur.csv", lambda header, row: dearer(header, row, later=15), "2023-11-05")
    assert spendlake(config, "ingest").exit_code == 0
    entry = json.loads(ledger.read_text())["entries"][0]
    assert entry["replaced"]["days"] == first["days"]
    assert [n for n in bills_table(tmp_path, config, "2023-11-15")["notes"] if "restated" in n] == [
        f"Bill 2023-11 / cur / USD restated: delivered again at {minute(entry['ingested_at'])} UTC, its data now "
        f"through {minute(entry['data_through'])} UTC, for the usage of the days before 2023-11-12 it bills "
        f"${held + 1:.2f} where the delivery of {minute(first['ingested_at'])} UTC, its data through "
        f"2023-11-14 04:00 UTC, billed ${held:.2f} ($1.00 more, besides the days it adds): the figures above "
        "that count those days changed with it."]
