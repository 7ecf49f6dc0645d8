"""A FOCUS CSV's times are parsed by the stager once per distinct text (service.core.per_value),
not per line: a month of hourly charge periods is 744 texts over millions of lines. The lake holds
exactly the times the per-line SQL gives (every spelling it reads: `T` or a space, `Z`, an
offset, no seconds, a date alone, padding, blank cells, infinity), a bad time in any batch fails
the delivery naming the file, column and value as before, and times that do not repeat are
parsed in the SELECT while the tags after them are still converted per distinct value."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb

import service.core.per_value as per_value
import service.core.staging as staging
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import ingest

HEADER = "BilledCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd,Tags"
STARTS = ["2024-06-01T00:00Z", " 2024-06-12 03:00:00+02:00 ", "2024-06-13T00:00:00.000Z", "2024-06-02",
          "2024-06-03 04:05:06 UTC", "2024-06-04T05:00:00-07:30", "   ", ""]
ENDS = ["infinity", "2024-06-30T23:59:59.999999Z", "2024-06-05 06:00", ""]


def config(lake: Path, location: Path):
    return parse_config({"lake": str(lake), "sources": [{"name": "bill", "kind": "focus", "location": str(location)}]})


def export(folder: Path, rows: int, starts: list[str], tags: list[str]) -> Path:
    folder.mkdir(parents=True)
    lines = [f"{n},USD,2024-06-01,{starts[n % len(starts)]},{ENDS[n % len(ENDS)]},{tags[n % len(tags)]}"
             for n in range(rows)]
    (folder / "focus.csv").write_text("\n".join([HEADER, *lines]) + "\n")
    return folder


def lake_rows(lake: Path) -> list[tuple]:
    files = [str(p) for p in lake.glob("costs/**/data.parquet")]
    return sorted(duckdb.connect().execute(
        "SELECT BilledCost, BillingPeriodStart, ChargePeriodStart, ChargePeriodEnd, CAST(Tags AS VARCHAR) "
        "FROM read_parquet(?, hive_partitioning = false)", [files]).fetchall(), key=lambda row: row[0])


def converted_texts(monkeypatch) -> dict[str, int]:
    """How many texts the stager converted, per column."""
    counts: dict[str, int] = {}
    run = per_value.Converter._run

    def counted(self, texts, name, *args):
        counts[name] = counts.get(name, 0) + len(texts)
        return run(self, texts, name, *args)
    monkeypatch.setattr(per_value.Converter, "_run", counted)
    return counts


def per_line(monkeypatch) -> None:
    """The connector's per-line SQL for every column, as before the stager converted them."""
    monkeypatch.setattr(per_value.PerValueSelect, "part", lambda self, con: con.sql(self.sql))


def test_times_parsed_once_per_distinct_text_equal_the_per_line_parse(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "BATCH_ROWS", 300)  # many batches, each with repeats
    location = export(tmp_path / "export", 2_000, STARTS, ['"{""team"": ""nlp""}"', ""])
    converted = converted_texts(monkeypatch)
    [outcome] = ingest(config(tmp_path / "lake", location)).outcomes
    assert outcome.error is None
    # each distinct text once, the empty cell (null) among them: its SQL decides its value
    assert converted == {"BillingPeriodStart": 1, "ChargePeriodStart": len(STARTS), "ChargePeriodEnd": len(ENDS),
                         "Tags": 2}
    kept = lake_rows(tmp_path / "lake")
    assert {row[2] for row in kept} == {datetime(2024, 6, 1), datetime(2024, 6, 12, 1), datetime(2024, 6, 13),
                                        datetime(2024, 6, 2), datetime(2024, 6, 3, 4, 5, 6),
                                        datetime(2024, 6, 4, 12, 30), None}
    assert {row[3] for row in kept} == {datetime.max, datetime(2024, 6, 30, 23, 59, 59, 999999),
                                        datetime(2024, 6, 5, 6), None}
    per_line(monkeypatch)
    [outcome] = ingest(config(tmp_path / "lake-per-line", location)).outcomes
    assert outcome.error is None and kept == lake_rows(tmp_path / "lake-per-line")


def test_a_bad_time_in_a_later_batch_fails_the_delivery_naming_file_column_and_value(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "BATCH_ROWS", 300)
    location = export(tmp_path / "export", 1_000, STARTS, ["{}"])
    with open(location / "focus.csv", "a") as out:
        out.write("7,USD,2024-06-01,  June 2nd ,,\n")
    cfg = config(tmp_path / "lake", location)
    [outcome] = ingest(cfg).outcomes
    message = str(outcome.error)
    assert "column ChargePeriodStart: not a date/time: June 2nd" in message, message
    assert message.count(str(location / "focus.csv")) == 1, message
    assert Lake(cfg.lake).ledger() == []


def test_times_that_do_not_repeat_are_parsed_in_the_select_and_the_tags_still_per_value(tmp_path, monkeypatch):
    # a charge period per second: per distinct text the times would only add the round trip
    # through Arrow, so the SELECT parses them (and the billing period before them, so a file bad
    # in both names the first as the SELECT does); the tags after them repeat and are converted once
    monkeypatch.setattr(staging, "BATCH_ROWS", 300)
    starts = [f"2024-06-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z" for n in range(1_000)]
    location = export(tmp_path / "export", 1_000, starts, ['"{""team"": ""nlp""}"', '"{""team"": ""cv""}"'])
    converted = converted_texts(monkeypatch)
    [outcome] = ingest(config(tmp_path / "lake", location)).outcomes
    assert outcome.error is None and converted == {"ChargePeriodEnd": len(ENDS), "Tags": 2}
    kept = lake_rows(tmp_path / "lake")
    assert len({row[2] for row in kept}) == 1_000
    per_line(monkeypatch)
    [outcome] = ingest(config(tmp_path / "lake-per-line", location)).outcomes
    assert outcome.error is None and kept == lake_rows(tmp_path / "lake-per-line")


def test_a_deliverys_later_parts_take_its_first_parts_choice_without_counting_their_heads():
    """Which columns are converted per distinct value was counted over each part's head, a query
    of its own per part (200 CSV.gz parts of ~11 lines: 43 of the stage's 78 s): the first part of
    a delivery with those columns chooses for the rest, whose heads are not read again."""
    con = duckdb.connect()
    sql = "CAST(value AS TIMESTAMP)"

    def part(rows: str) -> per_value.PerValuePart:
        return per_value.PerValuePart(con.sql(f"SELECT {sql.replace('value', 'ChargePeriodStart')} "
                                              f"AS ChargePeriodStart FROM ({rows})"),
                                      con.sql(rows), {"ChargePeriodStart": sql})

    chosen: dict = {}
    first = part("SELECT '2024-06-01 00:00:00' AS ChargePeriodStart FROM range(10)")
    assert per_value.streamed(first, chosen) == (first.rows, {"ChargePeriodStart": sql})
    assert chosen == {("ChargePeriodStart",): ("ChargePeriodStart",)}
    later = part("SELECT error('its head was read') AS ChargePeriodStart")  # raises if run
    assert per_value.streamed(later, chosen) == (later.rows, {"ChargePeriodStart": sql})
    distinct = part("SELECT '2024-06-01 00:00:0' || i AS ChargePeriodStart FROM range(10) t(i)")
    assert per_value.streamed(distinct, {}) == (distinct.relation, {})  # each part alone: counted, as before
