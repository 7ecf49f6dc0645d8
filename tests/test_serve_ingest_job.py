"""serve's ingest job (service/serve/service.py run_ingest): the bills, the inventory, then the
attribution rollups once for both; a failing source said in one line, the job's failure."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import datetime, time, timedelta, timezone

import pytest
from prometheus_client import CollectorRegistry

import service.core.snapshot_ledger as snapshot_ledger
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest import rollups
from service.ingest.inventory import run_inventory
from service.serve.metrics import JobMetrics
from service.serve.scheduler import ServiceScheduler, Tasks
from service.serve.service import default_tasks, run_ingest

BILL = ("BilledCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd\n"
        "12.5,USD,2026-11-01T00:00:00Z,2026-11-20T00:00:00Z,2026-11-20T01:00:00Z\n")
JOBS = "job_id,start_time,end_time,gpus\n1,2026-11-20T00:00:00Z,2026-11-20T01:00:00Z,8\n"


def bill_and_jobs(tmp_path, jobs: str = JOBS, attribution: dict | None = None):
    (tmp_path / "export").mkdir(exist_ok=True)
    if not (tmp_path / "export" / "focus.csv").exists():  # written again, the same bill is a new delivery
        (tmp_path / "export" / "focus.csv").write_text(BILL)
    (tmp_path / "jobs.csv").write_text(jobs)
    return parse_config({"lake": str(tmp_path / "lake"),
                         "sources": [{"name": "focus-main", "kind": "focus", "location": str(tmp_path / "export")}],
                         "inventory": [{"name": "trace", "kind": "jobs-file", "path": str(tmp_path / "jobs.csv")}],
                         "attribution": attribution or {"clusters": {}}})


def counted_builds(monkeypatch) -> list[int]:
    """The periods each rollup build from here on wrote (serve's, `spendlake rollup`'s or ingest's)."""
    built, materialise = [], rollups.materialise

    def counted(lake, config):
        done = materialise(lake, config)
        built.append(done.built)
        return done

    monkeypatch.setattr(rollups, "materialise", counted)
    return built


def test_a_new_bill_and_new_jobs_build_the_rollups_once(tmp_path, monkeypatch):
    # each of ingest and inventory refreshed them: a month's rollups built twice (10M lines: ~60 s each)
    config = bill_and_jobs(tmp_path)
    built = counted_builds(monkeypatch)
    run_ingest(config)
    lake = Lake.of(config)
    assert [e.billing_period for e in lake.ledger()] == ["2026-11"] and lake.has_table("jobs")
    assert len(built) == 1
    stored = lake.query().execute("SELECT count(*) FROM read_parquet(?)", [
        str(lake.root / "attribution_rollup" / "**" / "*.parquet")]).fetchall()[0][0]
    assert stored > 0  # of the state after both: nothing left for a query to roll up in memory
    (tmp_path / "jobs.csv").write_text(JOBS + "2,2026-11-20T00:00:00Z,2026-11-20T00:30:00Z,4\n")
    run_ingest(config)  # the jobs alone changed: built again, once
    assert len(built) == 2


def test_the_start_takes_the_inventory_before_it_stores_the_rollups_and_builds_them_once(tmp_path, monkeypatch):
    # serve's start stored the rollups a config changed since lacked, then its first ingest took the jobs
    # snapshot, new since the last run, which made them stale: built all again (the demo: 27 s, then 21 s)
    run_ingest(bill_and_jobs(tmp_path))  # the lake the service left
    config = bill_and_jobs(tmp_path, JOBS + "2,2026-11-20T00:00:00Z,2026-11-20T00:30:00Z,4\n",
                           {"clusters": {}, "dimensions": {"team": {"tags": ["team", "owner"]}}})
    built = counted_builds(monkeypatch)
    tasks = replace(default_tasks(config), rules=None)
    scheduler = ServiceScheduler(Lake.of(config), JobMetrics(CollectorRegistry(), tasks.names()), tasks,
                                 ingest_every=timedelta(hours=1), daily_at=time(6),
                                 clock=lambda: datetime(2026, 12, 1, tzinfo=timezone.utc))
    scheduler.first_ingest.clear()  # as start() leaves it
    scheduler.run_ingest()
    assert sum(built) == 1  # the one period, of the new config over the new jobs
    scheduler.run_ingest()  # the next hour's: its own snapshot, nothing new
    assert sum(built) == 1


def test_an_inventory_source_failing_is_one_line_of_the_service_naming_it(tmp_path, caplog):
    # it was three: the inventory's (-v), the FAILED outcome line and 'job ingest failed', the same words
    config = bill_and_jobs(tmp_path, jobs="job_id,start_time,end_time\n1,2026-11-20T00:00:00Z,\n")
    registry = CollectorRegistry()
    tasks = Tasks(ingest=lambda: run_ingest(config), rules=None, daily=lambda day: None)
    scheduler = ServiceScheduler(Lake.of(config), JobMetrics(registry, tasks.names()), tasks,
                                 ingest_every=timedelta(hours=1), daily_at=time(6),
                                 clock=lambda: datetime(2026, 12, 1, tzinfo=timezone.utc))
    with caplog.at_level(logging.DEBUG):  # -v
        assert not scheduler.instrumented("ingest", tasks.ingest)
    said = [(r.name, r.levelname, r.getMessage()) for r in caplog.records if "missing column(s) gpus" in r.getMessage()]
    assert len(said) == 1, said
    name, level, message = said[0]
    assert (name, level) == ("service.serve.scheduler", "ERROR")
    assert message.startswith("job ingest failed: trace (jobs-file): ") and str(tmp_path / "jobs.csv") in message
    assert [m for m in caplog.messages if m.startswith("ingest: focus-main 2026-11: committed 1 rows USD 12.5")]
    assert registry.get_sample_value("spendlake_job_failures_total", {"job": "ingest", "task": "ingest"}) == 1


def test_the_bills_committed_get_their_rollups_when_the_inventory_then_fails(tmp_path, monkeypatch):
    # the job builds the rollups once after both (94f12e7): an inventory raising after the bills committed
    # left them unbuilt until the next hour, every query rolling the month up in memory meanwhile
    config = bill_and_jobs(tmp_path)
    from service.ingest import inventory

    def broken(config, **options):
        raise RuntimeError("the inventory broke")

    monkeypatch.setattr(inventory, "run_inventory", broken)
    with pytest.raises(RuntimeError, match="the inventory broke"):
        run_ingest(config)
    lake = Lake.of(config)
    assert [e.billing_period for e in lake.ledger()] == ["2026-11"]
    stored = lake.query().execute("SELECT count(*) FROM read_parquet(?)", [
        str(lake.root / "attribution_rollup" / "**" / "*.parquet")]).fetchall()[0][0]
    assert stored > 0


def test_a_publish_failing_is_one_line_of_the_service_naming_it(tmp_path, caplog, monkeypatch):
    # with -v, ingest's own `publishing 1 staged deliveries failed: ...` said it before the job's ERROR line
    from service.core.errors import ResourceError
    from service.ingest import billing

    def full(lake, staged):
        raise ResourceError("the disk is full", where=str(lake.root), hint="free some space")

    monkeypatch.setattr(billing, "publish_costs", full)
    said = failing_bill_said(tmp_path, caplog, BILL)
    assert [(name, level) for name, level, _ in said] == [("service.serve.scheduler", "ERROR")], said


def failing_bill_said(tmp_path, caplog, bill: str | None) -> list[tuple[str, str, str]]:
    """The log records of a serve ingest job (-v) whose billing source fails, naming the source."""
    config = bill_and_jobs(tmp_path)
    if bill is None:
        (tmp_path / "export" / "focus.csv").unlink()
        (tmp_path / "export").rmdir()  # the location is gone: the source fails, not a delivery
    else:
        (tmp_path / "export" / "focus.csv").write_text(bill)
    tasks = Tasks(ingest=lambda: run_ingest(config), rules=None, daily=lambda day: None)
    scheduler = ServiceScheduler(Lake.of(config), JobMetrics(CollectorRegistry(), tasks.names()), tasks,
                                 ingest_every=timedelta(hours=1), daily_at=time(6),
                                 clock=lambda: datetime(2026, 12, 1, tzinfo=timezone.utc))
    with caplog.at_level(logging.DEBUG):  # -v
        assert not scheduler.instrumented("ingest", tasks.ingest)
    failed = [r.getMessage() for r in caplog.records if r.name == "service.serve.scheduler" and r.levelname == "ERROR"]
    assert len(failed) == 1 and failed[0].startswith("job ingest failed: focus-main"), failed
    error = failed[0].split(": ", 2)[-1]  # the error's words, after the source and its periods
    return [(r.name, r.levelname, r.getMessage()) for r in caplog.records if error in r.getMessage()]


def test_a_billing_source_failing_is_one_line_of_the_service_naming_it(tmp_path, caplog):
    # with -v, ingest's own `source focus-main failed: ...` said it before the job's ERROR line
    said = failing_bill_said(tmp_path, caplog, None)
    assert [(name, level) for name, level, _ in said] == [("service.serve.scheduler", "ERROR")], said


def test_a_delivery_failing_is_one_line_of_the_service_naming_it(tmp_path, caplog):
    # with -v, ingest's own `focus-main: delivery ... failed: ...` said it before the job's ERROR line
    said = failing_bill_said(tmp_path, caplog, BILL.replace("12.5,", "twelve,"))
    assert [(name, level) for name, level, _ in said] == [("service.serve.scheduler", "ERROR")], said


def test_an_inventory_unchanged_since_its_last_snapshot_is_not_stored_again_nor_said(tmp_path, caplog):
    """An hourly inventory of the same files stored every partition again (the demo's 746,322 GPU
    rows) and the service said so at INFO each hour: the same bytes as the snapshot in place are
    not written, its record keeps its time, and the line is detail (-v) until something is new."""
    config = bill_and_jobs(tmp_path)
    run_ingest(config)
    lake = Lake.of(config)
    [snapshot] = (lake.root / "jobs").glob("source=trace/snapshot_date=*/data.parquet")
    written = (snapshot.stat().st_mtime_ns, snapshot_ledger.read_record(lake.root, snapshot))
    caplog.clear()  # the first run's lines, kept when an earlier test left the logger at INFO
    with caplog.at_level(logging.INFO, logger="service"):
        run_ingest(config)
    said = [(r.name, r.getMessage()) for r in caplog.records if r.getMessage().startswith("inventory: trace")]
    assert said == [("service.ingest", f"inventory: trace (jobs-file) jobs {snapshot.parent.name}: "
                                       "1 rows unchanged, not stored again")]
    assert (snapshot.stat().st_mtime_ns, snapshot_ledger.read_record(lake.root, snapshot)) == written
    [outcome] = run_inventory(config)
    assert (outcome.rows, outcome.unchanged) == ({}, {f"jobs {snapshot.parent.name}": 1})
    # a record stamped ahead of the clock (one that ran ahead wrote it) is written again, stamped now
    record = snapshot_ledger.record_file(lake.root, snapshot)
    record.write_text(json.dumps({**json.loads(record.read_text()), "written_at": "2099-01-01T00:00:00.000000Z"}))
    [outcome] = run_inventory(config)
    assert (outcome.rows, outcome.unchanged) == ({f"jobs {snapshot.parent.name}": 1}, {})
    assert snapshot_ledger.read_record(lake.root, snapshot)["written_at"] < "2099"
    (tmp_path / "jobs.csv").write_text(JOBS + "2,2026-11-20T00:00:00Z,2026-11-20T00:30:00Z,4\n")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="service"):
        run_ingest(config)
    said = [(r.name, r.getMessage()) for r in caplog.records if r.getMessage().startswith("inventory: trace")]
    assert said == [("service.serve.service", f"inventory: trace (jobs-file) jobs {snapshot.parent.name}: 2 rows stored")]
