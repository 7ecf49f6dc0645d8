"""The service's daily run whose report lacks a bill a failing source has not brought (or finds no
bill at all) is not done: it is counted, tried again, and written once the source ingests; and
budgets over a month without data say `no data`, not `ok` (break53 findings 3 and 13)."""

from __future__ import annotations

import json
import logging
from datetime import date, datetime, timedelta, timezone

import pytest
from prometheus_client import CollectorRegistry
from servicekit import commit

from service.core.config import parse_config
from service.core.errors import DataError
from service.core.lake import Lake
from service.findings.budgets import budgets_as_of
from service.serve.daily import write_daily_report
from service.serve.metrics import JobMetrics
from service.serve.scheduler import ServiceScheduler, Tasks
from test_service_scheduler import SIX, utc, wait_for

DAY = date(2026, 11, 29)
# usage on the 28th and through the 29th's end: the last whole day is the 29th
ROWS = [("2026-11-28 03:00:00", "2026-11-28 04:00:00", "USD", "2", {"team": "nlp"}),
        ("2026-11-29 23:00:00", "2026-11-30 00:30:00", "USD", "5", {"team": "nlp"})]


def two_source_config(tmp_path, **extra):
    return parse_config({"lake": str(tmp_path / "lake"), "service": {"listen": "127.0.0.1:0"},
                         "sources": [{"name": name, "kind": "focus", "location": str(tmp_path / name)}
                                     for name in ("cur", "gcp")], **extra}, str(tmp_path / "spendlake.yaml"))


def record(lake: Lake, source: str, error: str | None) -> None:
    """`source`'s last ingest in the sources state, as an ingest records it: failed with `error`, or succeeded."""
    state = lake.read_state("sources")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    state[source] = ({"failures_total": 1, "last_failure": stamp, "last_error": error, "last_run_failed": True}
                     if error else {"failures_total": 0, "last_success": stamp, "last_run_failed": False})
    lake.write_state("sources", state)


def scheduler_of(config, registry):
    return ServiceScheduler(Lake.of(config), JobMetrics(registry, ["ingest", "daily"]),
                            Tasks(ingest=lambda: None, rules=None, daily=lambda day: write_daily_report(config, day)),
                            ingest_every=timedelta(hours=1), daily_at=SIX, clock=lambda: utc(2026, 11, 30, 7))


def test_a_daily_run_on_a_lake_without_a_bill_writes_none_and_is_written_once_the_ingest_commits(tmp_path, caplog):
    config = two_source_config(tmp_path, **BUDGETS)
    lake = Lake.of(config)
    record(lake, "cur", "disk full: [Errno 28] No space left on device")
    registry = CollectorRegistry()
    scheduler = scheduler_of(config, registry)
    failures = {"job": "daily", "task": "daily"}
    with caplog.at_level(logging.WARNING, logger="service.serve.scheduler"):
        scheduler.run_daily()  # before any bill: failed, not done (a running scheduler tries it again)
        assert registry.get_sample_value("spendlake_job_failures_total", failures) == 1
        assert not (tmp_path / "reports").exists() and lake.read_state("jobs").get("daily") is None
        commit(lake, "cur", ROWS)  # the disk freed, the ingests commit
        commit(lake, "gcp", ROWS)
        record(lake, "cur", None)
        record(lake, "gcp", None)
        scheduler.run_daily()
    assert lake.read_state("jobs")["daily"]["last_run_date"] == "2026-11-30"
    [said] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("job daily failed")]
    assert f"the lake at {lake.root} is empty: no report of {DAY} written; billing sources cur (its ingest is " \
           "failing), gcp (not ingested yet) — the service writes the report again by itself" in said
    report = json.loads((tmp_path / "reports" / DAY.isoformat() / "report.json").read_text())
    (budgets,) = [s for s in report["sections"] if s["key"] == "budgets"]
    [row] = budgets["tables"][0]["rows"]  # the budget reads the bill ingested, not the empty lake's `no data`
    assert (row["budget"], row["status"]) == ("nlp-monthly", "ok")
    assert round(float(row["actual"]), 6) == round(2 * (2 + 5 * 60 / 90), 6)  # both sources' rows, as of the 30th
    assert budgets["note"] is None


def test_a_report_without_the_bill_of_a_failing_source_is_written_and_written_again_once_it_ingests(tmp_path, caplog):
    config = two_source_config(tmp_path)
    lake = Lake.of(config)
    commit(lake, "cur", ROWS)
    record(lake, "cur", None)
    record(lake, "gcp", "AccessDenied")
    registry = CollectorRegistry()
    scheduler = scheduler_of(config, registry)
    failures = {"job": "daily", "task": "daily"}
    folder = tmp_path / "reports" / DAY.isoformat()
    with caplog.at_level(logging.WARNING, logger="service.serve.scheduler"):
        scheduler.run_daily()
        assert registry.get_sample_value("spendlake_job_failures_total", failures) == 1
        first = json.loads((folder / "report.json").read_text())  # written all the same: freshness says why
        assert lake.read_state("jobs").get("daily") is None
        commit(lake, "gcp", ROWS)
        record(lake, "gcp", None)
        scheduler.run_daily()
    assert lake.read_state("jobs")["daily"]["last_run_date"] == "2026-11-30"
    [said] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("job daily failed")]
    assert f"the report of {DAY} is written without the bill of gcp (its ingest is failing)" in said
    (spend,) = [s for s in json.loads((folder / "report.json").read_text())["sections"] if s["key"] == "spend"]
    (first_spend,) = [s for s in first["sections"] if s["key"] == "spend"]
    assert spend != first_spend  # gcp's bill is in the report written again
    assert registry.get_sample_value("spendlake_job_failures_total", failures) == 1


def test_a_lagging_source_whose_ingests_succeed_does_not_hold_the_run(tmp_path):
    config = two_source_config(tmp_path)
    lake = Lake.of(config)
    commit(lake, "cur", ROWS)
    commit(lake, "gcp", ROWS[:1])  # through the 28th only, its last ingest a success
    record(lake, "cur", None)
    record(lake, "gcp", None)
    assert write_daily_report(config, DAY).day == DAY


BUDGETS = {"budgets": [{"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": 100,
                        "currency": "USD", "lines": [0.8]}]}


def test_budgets_on_a_lake_without_usage_read_no_data_and_say_so(tmp_path):
    config = two_source_config(tmp_path, **BUDGETS)
    lake = Lake.of(config)
    empty = budgets_as_of(lake, config, utc(2026, 11, 30, 7))
    assert [s.status for s in empty.statuses] == ["no data"]
    assert empty.to_json()["notes"][0].startswith("the lake holds no usage for 2026-11: every budget reads `no data`")
    assert empty.to_json()["notes"][0].endswith("run `spendlake ingest`")  # the 30th: no export is that late
    commit(lake, "cur", ROWS)
    read = budgets_as_of(lake, config, utc(2026, 11, 30, 7))
    assert [s.status for s in read.statuses] == ["ok"] and not read.said


def test_the_reports_budgets_of_a_month_past_the_data_read_no_data(tmp_path):
    from service.report.sections.budgets import budgets_section

    config = two_source_config(tmp_path, **BUDGETS)
    commit(Lake.of(config), "cur", ROWS)
    section = budgets_section(config, Lake.of(config), date(2026, 12, 1))  # December: no usage of it yet
    assert [row["status"] for row in section.tables[0].rows] == ["no data"]
    assert section.note.startswith("The lake holds no usage for 2026-12")
    # the 1st: the export's December may only be late, where it said to run the ingest alone
    assert "run `spendlake ingest`, or wait for the export: early in a month its usage can come a day or more late" \
        in section.note
    november = budgets_section(config, Lake.of(config), DAY)
    assert [row["status"] for row in november.tables[0].rows] == ["ok"] and november.note is None


def test_a_report_waiting_for_its_next_try_is_tried_once_an_ingest_succeeds(tmp_path):
    """Its next try an hour away (the retries double up to hourly): the ingest that brings the bill has it
    written then, where it waited for the try."""
    import threading

    lake = Lake(tmp_path / "lake")
    ingested = threading.Event()
    tried = []

    def report(day):
        tried.append(day)
        if not ingested.is_set():
            raise DataError("no bill yet")

    def ingest():
        if tried:  # the first ingest, before the make-up run, brings nothing
            ingested.set()

    scheduler = ServiceScheduler(lake, JobMetrics(CollectorRegistry(), ["ingest", "daily"]),
                                 Tasks(ingest=ingest, rules=None, daily=report), ingest_every=timedelta(seconds=1),
                                 daily_at=SIX, clock=lambda: utc(2026, 11, 30, 7), daily_retry=timedelta(hours=1))
    scheduler.start()
    try:
        wait_for(lambda: lake.read_state("jobs").get("daily"), timeout=20)
    finally:
        scheduler.shutdown()
    assert tried == [DAY, DAY]


def test_a_config_without_billing_sources_has_its_report_written_as_before(tmp_path):
    config = parse_config({"lake": str(tmp_path / "lake"), "service": {"listen": "127.0.0.1:0"}},
                          str(tmp_path / "spendlake.yaml"))
    assert not (tmp_path / "reports").exists()
    assert write_daily_report(config, DAY).day == DAY
    assert (tmp_path / "reports" / DAY.isoformat() / "report.html").is_file()


def test_budgets_early_in_a_month_without_its_usage_say_the_export_may_be_late_and_an_empty_lake_no_data(tmp_path):
    """On the 2nd, no usage of December in the lake said `no data ...; run `spendlake ingest``, where the
    export's usage may only be late (a month's first delivery can hold its fees alone); and `spendlake
    budgets` titled the empty lake 'data through <now>'."""
    from click.testing import CliRunner

    from service.cli.main import cli

    config = two_source_config(tmp_path, **BUDGETS)
    early = budgets_as_of(Lake.of(config), config, utc(2026, 12, 2, 7))
    assert early.to_json()["notes"][0].endswith("run `spendlake ingest`, or wait for the export: early in a month "
                                                "its usage can come a day or more late")
    path = tmp_path / "spendlake.yaml"
    path.write_text(json.dumps({"lake": str(config.lake), **BUDGETS}))
    result = CliRunner().invoke(cli, ["--config", str(path), "budgets", "--format", "table"])
    assert result.exit_code == 0, result.output
    assert "no data in the lake as of" in result.output and "data through" not in result.output


@pytest.mark.slow  # seven reports written (~1 min on a loaded machine); test_service_scheduler's outage test is quick
def test_an_outage_of_days_has_each_days_report_written_again_with_the_bill_once_the_source_ingests(tmp_path):
    """gcp's ingests failing from the 28th: the runs of the 29th, 30th and 1st wrote the reports of the 28th, 29th
    and 30th without its bill, each tried until the next fire; once gcp ingested, the 2nd's run wrote the 1st's
    report whole and the others stayed without gcp for good. They are written again, with its bill."""
    config = two_source_config(tmp_path)
    lake = Lake.of(config)
    hours = [(f"2026-11-{day:02d} 05:00:00", f"2026-11-{day:02d} 06:00:00", "USD", "3", {}) for day in (27, 28, 29, 30)]
    days = [*hours, ("2026-12-01 05:00:00", "2026-12-02 00:30:00", "USD", "3", {})]
    commit(lake, "cur", days)
    commit(lake, "gcp", hours[:1])  # through the 27th, then failing
    record(lake, "cur", None)
    record(lake, "gcp", "AccessDenied")
    now = [utc(2026, 11, 29, 7)]
    registry = CollectorRegistry()
    scheduler = ServiceScheduler(lake, JobMetrics(registry, ["ingest", "daily"]),
                                 Tasks(ingest=lambda: None, rules=None, daily=lambda day: write_daily_report(config, day)),
                                 ingest_every=timedelta(hours=1), daily_at=SIX, clock=lambda: now[0])
    scheduler.first_ingest.set()  # not started: each fire is run here

    def spend(day: date) -> dict:
        report = json.loads((tmp_path / "reports" / day.isoformat() / "report.json").read_text())
        return next(section for section in report["sections"] if section["key"] == "spend")

    outage = [date(2026, 11, 28), date(2026, 11, 29), date(2026, 11, 30)]
    for run in outage:
        now[0] = datetime.combine(run + timedelta(days=1), datetime.min.time(), timezone.utc) + timedelta(hours=7)
        scheduler.run_daily()
    without = [spend(day) for day in outage]
    assert registry.get_sample_value("spendlake_job_failures_total", {"job": "daily", "task": "daily"}) == 3
    commit(lake, "gcp", days, delivery_id="d2")
    record(lake, "gcp", None)
    now[0] = utc(2026, 12, 2, 7)
    scheduler.run_daily()
    assert all(spend(day) != before for day, before in zip(outage, without))  # gcp's bill is in each now
    assert lake.read_state("jobs")["daily_undone"] == []
    assert registry.get_sample_value("spendlake_job_failures_total", {"job": "daily", "task": "daily"}) == 3
