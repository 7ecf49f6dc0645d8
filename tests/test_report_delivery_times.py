"""A bill delivered again is said with the time the cloud delivered it, as its source tells it
(service/ingest/delivered.py): an AWS Data Exports delivery by its execution id's time, a file by
its write time; the note said the time spendlake ingested it, hours or days later (session 51)."""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timezone

import duckdb

from conftest import SAMPLES
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import ingest
from service.report.sections.restated import restated_notes
from test_report_restated import dearer, rewrite
from tests.aws_exports import cur2_table, line, local_put, to_bytes, write_cur2

FIRST, SECOND = "2026-11-03T01:02:03.456Z-8c4f0a5e-0a43-4b4c-9d0e-1f2a3b4c5d6e", \
    "2026-11-04T05:06:07.890Z-0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70"


def test_a_cur2_delivery_is_said_delivered_at_its_execution_ids_time(tmp_path):
    con = duckdb.connect()
    location = tmp_path / "exp"
    cfg = parse_config({"lake": str(tmp_path / "lake"),
                        "sources": [{"name": "cur2", "kind": "aws-cur2", "location": str(location / "cur2")}]})
    for execution, cost in ((FIRST, "2.5"), (SECOND, "3.5")):
        body = to_bytes(con, cur2_table(con, [line("2026-10", cost, invoice="INV-1")]), tmp_path, "parquet")
        write_cur2(local_put(location), prefix="", export="cur2", period="2026-10", execution=execution,
                   parts=[body], fmt="parquet")
        assert [o.status for o in ingest(cfg).outcomes] == ["committed"]
    [entry] = Lake(cfg.lake).ledger()
    assert (entry.delivered_at, entry.delivered_by) == ("2026-11-04T05:06:07Z", "execution id")
    assert (entry.replaced.delivered_at, entry.replaced.delivered_by) == ("2026-11-03T01:02:03Z", "execution id")
    assert restated_notes([entry]) == [
        "Bill 2026-10 / cur2 / USD restated: delivered again at 2026-11-04 05:06 UTC (its export's execution time), "
        f"its data still through {entry.data_through[:16].replace('T', ' ')} UTC, it bills $3.50 where the final "
        "delivery of 2026-11-03 01:02 UTC (its export's execution time) billed $2.50 ($1.00 more): the figures above "
        "that count its lines changed with it."]


def test_a_local_file_delivered_again_is_said_delivered_at_its_write_time_not_when_ingested(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    cur = export / "cur.csv"
    shutil.copy(SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv", cur)
    os.utime(cur, (0, datetime(2023, 11, 14, 6, 30, tzinfo=timezone.utc).timestamp()))
    cfg = parse_config({"lake": str(tmp_path / "lake"),
                        "sources": [{"name": "cur", "kind": "aws-cur", "location": str(export)}]})
    ingest(cfg)
    rewrite(cur, dearer, "2023-11-05")  # a usage line of the 5th USD 1.00 dearer: restated
    os.utime(cur, (0, datetime(2023, 11, 14, 18, 45, tzinfo=timezone.utc).timestamp()))
    ingest(cfg)
    [entry] = Lake(cfg.lake).ledger()
    assert (entry.delivered_at, entry.delivered_by) == ("2023-11-14T18:45:00Z", "files")
    [note] = restated_notes([entry])
    assert " delivered again at 2023-11-14 18:45 UTC (its files' write time), " in note, note
    assert " where the delivery of 2023-11-14 06:30 UTC (its files' write time) billed " in note, note
    assert entry.ingested_at[:10] not in note, note  # the ingest (today) is not said


def test_a_delivery_read_again_under_its_id_is_said_read_again_not_delivered_again_at_the_same_time():
    """review51 item 7: a delivery read again with other figures (a reader's fix, reader_version bumped: the same
    export, its files' write time unchanged) read 'delivered again at 2026-11-04 05:06 UTC (its files' write time)
    ... where the delivery of 2026-11-04 05:06 UTC (its files' write time) billed', one time said twice as two
    deliveries'. It is said read again, against the delivery as first ingested: the same delivery id, where
    the time told alone made two files rewritten within one second one delivery."""
    from dataclasses import replace
    from decimal import Decimal
    from service.core.ledger import CurrencyTotals, LedgerEntry, Replaced

    told = {"delivered_at": "2026-11-04T05:06:07Z", "delivered_by": "files"}
    before = Replaced("2026-11-04T06:00:00Z", "2026-11-04T00:00:00Z", False,
                      (CurrencyTotals("USD", 5, Decimal(50), Decimal(50)),), **told, delivery_id="d1")
    entry = LedgerEntry("cur", "2026-11", "d1", 5, (CurrencyTotals("USD", 5, Decimal(60), Decimal(60)),), False,
                        "2026-11-06T09:00:00Z", data_through="2026-11-04T00:00:00Z", replaced=before, reader_version=2,
                        **told)
    other = replace(entry, delivery_id="d2")  # another delivery whose files were written the same second
    assert restated_notes([other])[0].startswith("Bill 2026-11 / cur / USD restated: delivered again at 2026-11-04 "
                                                 "05:06 UTC (its files' write time)"), restated_notes([other])
    assert restated_notes([replace(entry, replaced=replace(before, delivery_id=None))])[0].startswith(
        "Bill 2026-11 / cur / USD restated: delivered again at")  # a ledger before the id was kept: not claimed same
    untold = replace(entry, delivered_at=None, delivered_by=None,
                     replaced=replace(before, delivered_at=None, delivered_by=None))  # no write time (mtime 0)
    assert restated_notes([untold])[0].startswith(
        "Bill 2026-11 / cur / USD restated: read again (same delivery), its data"), restated_notes([untold])
    assert restated_notes([entry]) == [
        "Bill 2026-11 / cur / USD restated: read again (same delivery, of 2026-11-04 05:06 UTC (its files' write "
        "time)), its data still through 2026-11-04 00:00 UTC, it bills $60.00 where the delivery as ingested at "
        "2026-11-04 06:00 UTC billed $50.00 ($10.00 more): the figures above that count its lines changed with it."]
