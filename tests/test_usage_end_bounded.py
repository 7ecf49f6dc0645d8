"""The data's end is bounded (service/core/usage_end.py): one usage line of a 2024-09 bill whose
ChargePeriodEnd says 2099-01-01 moved the lake's data end to 2099 (break47: `status` fresh for
ever, `attribute --since 7d` over 2098's last week). A line's usage now ends no later than a day
after its billing period ends, a file's no later than a day after its commit; the ingest warns
naming the file, the period and how many lines it bounded, and verify finds the bounded end in
the file. A daily line of today (ending at tomorrow's midnight) is neither cut nor warned of."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner

from service.cli.main import cli
from service.core import coverage
from service.core.coverage import data_end, parse_utc
from service.core.lake import Lake
from service.core.timewindow import utc_now
from tests.billing_helpers import failures, ingest_files

HEADER = ("BilledCost,EffectiveCost,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,"
          "ChargePeriodStart,ChargePeriodEnd")


def line(cost: str, period: str, start: str, end: str) -> str:
    following = {"2024-09": "2024-10", "2099-01": "2099-02"}[period]
    return f"{cost},{cost},USD,{period}-01T00:00Z,{following}-01T00:00Z,{start},{end}"


def write_bill(tmp_path, *lines: str):
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "bill.csv").write_text("\n".join([HEADER, *lines]) + "\n")
    return folder


def test_a_line_ending_in_2099_ends_the_data_a_day_after_its_billing_period_and_is_warned_of(tmp_path):
    folder = write_bill(tmp_path, line("1.5", "2024-09", "2024-09-18T10:00Z", "2024-09-18T11:00Z"),
                        line("2.5", "2024-09", "2024-09-18T22:00Z", "2099-01-01T00:00Z"),
                        line("0.5", "2024-09", "2024-09-20T00:00Z", "2024-09-21T00:00Z"))
    lake, result = ingest_files(tmp_path, ("bill", "focus", folder))
    assert failures(result) == []
    assert data_end(lake) == datetime(2024, 10, 2, tzinfo=timezone.utc)  # was 2099-01-01
    assert [e.data_through for e in lake.ledger()] == ["2024-10-02T00:00:00Z"]
    [warning] = [w for o in result.outcomes for w in o.warnings]
    assert str(folder / "bill.csv") in warning and "1 usage line(s) of billing period 2024-09" in warning
    assert "2099-01-01T00:00:00Z" in warning and "taken as 2024-10-02T00:00:00Z" in warning
    assert [(c.state, c.detail) for c in lake.verify()] == [("ok", "")]  # the file gives the same end


def test_a_billing_period_dated_ahead_ends_the_data_a_day_after_its_commit(tmp_path):
    folder = write_bill(tmp_path, line("1.5", "2099-01", "2099-01-05T00:00Z", "2099-01-06T00:00Z"))
    lake, result = ingest_files(tmp_path, ("bill", "focus", folder))
    assert failures(result) == []
    [entry] = lake.ledger()
    assert parse_utc(entry.data_through) == parse_utc(entry.ingested_at) + timedelta(days=1)  # not 2099-01-06
    [warning] = [w for o in result.outcomes for w in o.warnings]
    assert "1 usage line(s) of billing period 2099-01" in warning and "2099-01-06T00:00:00Z" in warning
    assert [(c.state, c.detail) for c in lake.verify()] == [("ok", "")]


def test_a_bill_within_a_day_of_its_period_and_of_now_is_not_warned_of_and_keeps_its_end(tmp_path):
    today = utc_now().replace(hour=0, minute=0, second=0, microsecond=0)
    period, following = f"{today:%Y-%m}", f"{today.replace(day=1) + timedelta(days=32):%Y-%m}"
    folder = write_bill(tmp_path, line("1.5", "2024-09", "2024-09-30T23:00Z", "2024-10-01T00:00Z"),
                        line("0.5", "2024-09", "2024-09-30T23:00Z", "2024-10-01T23:00Z"),  # a day's grace
                        # today's daily line, ending at tomorrow's midnight: a day past now at most
                        f"2.0,2.0,USD,{period}-01T00:00Z,{following}-01T00:00Z,{today:%Y-%m-%dT%H:%MZ},"
                        f"{today + timedelta(days=1):%Y-%m-%dT%H:%MZ}")
    lake, result = ingest_files(tmp_path, ("bill", "focus", folder))
    assert failures(result) == [] and [w for o in result.outcomes for w in o.warnings] == []
    assert {e.billing_period: e.data_through for e in lake.ledger()} == {
        "2024-09": "2024-10-01T23:00:00Z", period: f"{today + timedelta(days=1):%Y-%m-%dT%H:%M:%SZ}"}


def test_a_ledger_written_before_the_end_was_bounded_ends_where_the_bill_ends(tmp_path):
    """A ledger written before session 47 kept the lines' own latest end (2099-01-01 for a 2024-09
    bill; 2099-01-06 for a period dated ahead) until that period was delivered again: the data's end,
    status and every window without --until stayed in 2099. Read, such an end is bounded as a commit
    bounds it now, from the file; verify still accepts the ledger as written."""
    folder = write_bill(tmp_path, line("1.5", "2024-09", "2024-09-18T10:00Z", "2024-09-18T11:00Z"),
                        line("2.5", "2024-09", "2024-09-18T22:00Z", "2099-01-01T00:00Z"))
    _, result = ingest_files(tmp_path / "old", ("bill", "focus", folder))
    ahead = tmp_path / "ahead"
    ahead.mkdir()
    _, also = ingest_files(ahead, ("bill", "focus", write_bill(ahead, line(
        "1.5", "2099-01", "2099-01-05T00:00Z", "2099-01-06T00:00Z"))))
    assert failures(result) == failures(also) == []
    for root, written in ((tmp_path / "old", "2099-01-01T00:00:00Z"), (ahead, "2099-01-06T00:00:00Z")):
        ledger = root / "lake" / "_ledger" / "deliveries.json"
        data = json.loads(ledger.read_text())
        [entry] = data["entries"]
        entry["data_through"] = written  # as the commit wrote it before it bounded the end
        del entry["data_through_bounded"]
        ledger.write_text(json.dumps(data))
    old, dated = Lake(tmp_path / "old" / "lake"), Lake(ahead / "lake")
    assert [e.data_through for e in old.ledger()] == ["2099-01-01T00:00:00Z"]
    assert data_end(old) == datetime(2024, 10, 2, tzinfo=timezone.utc)  # was 2099-01-01
    [entry] = dated.ledger()
    assert data_end(dated) == parse_utc(entry.ingested_at) + timedelta(days=1)  # was 2099-01-06
    assert [(c.state, c.detail) for c in old.verify()] == [("ok", "")]
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: {old.root}\nsources:\n  - {{name: bill, kind: focus, location: '{folder}'}}\n")
    shown = CliRunner().invoke(cli, ["--config", str(config), "status", "--sources", "--format", "json"])
    assert '"data_through": "2024-10-02T00:00:00Z"' in shown.stdout and "2099" not in shown.stdout, shown.output


def test_a_month_in_local_time_past_the_utc_months_bound_is_taken_as_its_commit_bounded_it(tmp_path, monkeypatch):
    """A provider's month in Tokyo time starts 2024-08-31T15:00Z, so the lake names it 2024-08 (its
    BillingPeriodStart's UTC month) and its usage runs to 2024-09-30T15:00Z, past the 2024-08 bound a
    reader gives an entry without its file (2024-09-02): the commit bounded it by the file's own
    BillingPeriodEnd, and every data_end read that file again to find the same end. Now only an
    entry written before commits bounded it (no `data_through_bounded`) is read again."""
    bill = "1.5,1.5,USD,2024-08-31T15:00Z,2024-09-30T15:00Z,2024-09-18T10:00Z,2024-09-18T11:00Z"
    lake, result = ingest_files(tmp_path, ("bill", "focus", write_bill(tmp_path, bill)))
    assert failures(result) == [] and [(e.billing_period, e.data_through) for e in lake.ledger()] == [
        ("2024-08", "2024-09-18T11:00:00Z")]
    reads = []
    usage_through = coverage.usage_through
    monkeypatch.setattr(coverage, "usage_through", lambda *a, **k: reads.append(a[1]) or usage_through(*a, **k))
    assert data_end(lake) == datetime(2024, 9, 18, 11, tzinfo=timezone.utc)
    assert reads == []  # was the partition file, at every data_end
    ledger = lake.root / "_ledger" / "deliveries.json"
    data = json.loads(ledger.read_text())
    del data["entries"][0]["data_through_bounded"]  # as a ledger before 2026-12-06 holds it
    ledger.write_text(json.dumps(data))
    assert data_end(Lake(lake.root)) == datetime(2024, 9, 18, 11, tzinfo=timezone.utc) and len(reads) == 1


@pytest.mark.parametrize("bill, through", [
    # a month in Tokyo time, past the UTC month's bound (lake49's case); a line's 2099; an end not recorded
    ("1.5,1.5,USD,2024-08-31T15:00Z,2024-09-30T15:00Z,2024-09-18T10:00Z,2024-09-18T11:00Z", "2024-09-18T11:00:00Z"),
    (line("2.5", "2024-09", "2024-09-18T22:00Z", "2099-01-01T00:00Z"), "2024-10-02T00:00:00Z"),
    (line("1.5", "2024-09", "2024-09-18T10:00Z", "2024-09-18T11:00Z"), "2024-09-18T11:00:00Z"),
])
def test_an_old_ledgers_end_read_again_from_its_file_is_recorded_by_the_next_ingest(tmp_path, monkeypatch, bill,
                                                                                     through):
    """An entry of a ledger before 2026-12-06 (no `data_through_bounded`) whose end lies past the bound
    a reader gives it without its file, or of one before 2026-12 (no `data_through`), was read again
    from its partition file at every data_end (every query, status, scrape) until its period was
    delivered again. The next ingest, nothing new to commit, records the end read from the file as a
    commit bounds it (Lake.restamp, under its lock): no data_end reads the file after."""
    folder = write_bill(tmp_path, bill)
    lake, result = ingest_files(tmp_path, ("bill", "focus", folder))
    assert failures(result) == []
    ledger = lake.root / "_ledger" / "deliveries.json"
    data = json.loads(ledger.read_text())
    [entry] = data["entries"]
    del entry["data_through_bounded"]  # as a ledger before 2026-12-06 holds it
    if "2099" in bill:
        entry["data_through"] = "2099-01-01T00:00:00Z"  # as the commit wrote it before it bounded the end
    elif "2024-08-31" not in bill:
        del entry["data_through"]  # as a ledger before 2026-12 holds it
    ledger.write_text(json.dumps(data))
    reads = []
    usage_through = coverage.usage_through
    monkeypatch.setattr(coverage, "usage_through", lambda *a, **k: reads.append(a[1]) or usage_through(*a, **k))
    assert coverage.data_end(Lake(lake.root)) == parse_utc(through) and len(reads) == 1
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: {lake.root}\nsources:\n  - {{name: bill, kind: focus, location: '{folder}'}}\n")
    again = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
    assert again.exit_code == 0 and "unchanged" in again.output, again.output
    [recorded] = Lake(lake.root).ledger()
    assert (recorded.data_through, recorded.data_through_bounded) == (through, True)  # main: False, as before
    reads.clear()
    assert coverage.data_end(Lake(lake.root)) == parse_utc(through) and reads == []  # main: the file, every time
    assert [(c.state, c.detail) for c in Lake(lake.root).verify()] == [("ok", "")]
