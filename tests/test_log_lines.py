"""The service's log: one record, one line. A value from a source (a jobs file's header, a job
name) holding a line break cannot forge a log line, nor an ANSI escape rewrite the terminal
that shows the log (RELIABILITY 34, 62)."""

from __future__ import annotations

import logging
import re
import shutil
import time as time_module
from contextlib import contextmanager
from datetime import datetime, time, timedelta, timezone

from prometheus_client import CollectorRegistry

from service.core.config import parse_config
from service.core.lake import Lake
from service.core.logs import setup_logging
from service.serve.metrics import JobMetrics
from service.serve.scheduler import ServiceScheduler, Tasks
from service.serve.service import run_ingest

FORGED = "2026-12-04 00:00:00,000 INFO service.serve.scheduler: daily report written"


@contextmanager
def service_logging():
    """The service's log set-up (to stderr), the root logger as it was afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    setup_logging(logging.INFO)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_34_a_jobs_file_header_cannot_forge_a_log_line_or_rewrite_the_terminal(tmp_path, capfd):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(f'job_id,start_time,end_time,"gpu\x1b]0;owned\x07\n{FORGED}"\n1,2026-11-30T00:00:00Z,,1\n')
    config = parse_config({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "trace", "kind": "jobs-file", "path": str(jobs)}]})
    tasks = Tasks(ingest=lambda: run_ingest(config), rules=None, daily=lambda day: None)
    scheduler = ServiceScheduler(Lake.of(config), JobMetrics(CollectorRegistry(), tasks.names()), tasks,
                                 ingest_every=timedelta(hours=1), daily_at=time(6),
                                 clock=lambda: datetime(2026, 12, 1, tzinfo=timezone.utc))
    with service_logging():
        assert not scheduler.instrumented("ingest", tasks.ingest)
    lines = capfd.readouterr().err.splitlines()
    failed = [line for line in lines if "job ingest failed" in line]
    assert len(failed) == 1 and "missing column(s) gpus" in failed[0], lines
    # shown escaped, not run, and cut as every column name an error names is (40 characters; 6d3fa9e4)
    assert "gpu\\x1b]0;owned\\x07\\n2026-12-04 00:00:00,000 IN… (88 characters)" in failed[0]
    assert not [line for line in lines if line.startswith(FORGED)]
    assert not any(ch in "".join(lines) for ch in "\x1b\x07\r")


def test_62_a_log_message_is_one_line_and_a_traceback_runs_no_escape(capfd):
    with service_logging():
        try:
            raise ValueError("bad cell 'x\x1b[2J'")
        except ValueError:
            logging.getLogger("service.test").exception("job %s failed", "ingest\r\nforged")
    err = capfd.readouterr().err
    assert "job ingest\\r\\nforged failed" in err and "ValueError: bad cell 'x\\x1b[2J'" in err
    assert "\x1b" not in err and "\r" not in err


def test_an_exception_message_in_a_traceback_is_one_line_and_cannot_forge_a_log_line(capfd):
    """What an exception says quotes values (a cell, a job name): a line feed in one started a line."""
    with service_logging():
        try:
            try:
                raise OSError(f"cell a\n{FORGED}")
            except OSError as cause:
                raise ValueError(f"row 2\n{FORGED}") from cause
        except ValueError:
            logging.getLogger("service.test").exception("job failed")
    lines = capfd.readouterr().err.splitlines()
    assert not [line for line in lines if line.startswith(FORGED)], lines
    assert f"ValueError: row 2\\n{FORGED}" in lines and f"OSError: cell a\\n{FORGED}" in lines, lines
    assert "The above exception was the direct cause of the following exception:" in lines
    assert sum(line.startswith("  File ") for line in lines) == 2  # the frames as Python writes them


def test_a_delivery_found_unchanged_is_ingest_detail_not_a_service_event(tmp_path, caplog):
    """`serve` shows the service's events (service.serve) without -v; a delivery already
    ingested, every hour, is ingest's detail, shown with -v."""
    export = tmp_path / "export"
    export.mkdir()
    (export / "focus.csv").write_text("BilledCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd\n"
                                      "12.5,USD,2026-11-01T00:00:00Z,2026-11-20T00:00:00Z,2026-11-20T01:00:00Z\n")
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "focus-main", "kind": "focus", "location": str(export)}]})
    with caplog.at_level(logging.INFO):
        run_ingest(config)
        run_ingest(config)
    lines = [(r.name, r.getMessage()) for r in caplog.records if r.getMessage().startswith("ingest: focus-main")]
    assert lines[0][0] == "service.serve.service" and "committed 1 rows" in lines[0][1]
    assert lines[1][0] == "service.ingest" and "unchanged" in lines[1][1]


def test_a_copy_skipped_is_a_service_event_once_then_ingest_detail(tmp_path, caplog):
    """`serve` said "skipped, the same bytes as …" at INFO on every hourly ingest, forever; it is
    said once, when the copy is first found, then ingest's detail (`status`'s copies: line keeps
    telling it). A copy found again after it went away is told again."""
    export = tmp_path / "export"
    (export / "2026-11").mkdir(parents=True)
    (export / "2026-11" / "focus.csv").write_text(
        "BilledCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd\n"
        "12.5,USD,2026-11-01T00:00:00Z,2026-11-20T00:00:00Z,2026-11-20T01:00:00Z\n")
    copy = export / "2026-11-restored"
    shutil.copytree(export / "2026-11", copy)
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "focus-main", "kind": "focus", "location": str(export)}]})

    def told() -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.INFO):
            run_ingest(config)
        return [r.name for r in caplog.records if "skipped, the same bytes as" in r.getMessage()]

    assert told() == ["service.serve.service"]
    assert told() == told() == ["service.ingest"]
    shutil.rmtree(copy)
    assert told() == []
    shutil.copytree(export / "2026-11", copy)
    assert told() == ["service.serve.service"]


def test_a_log_line_is_stamped_in_utc_whatever_the_hosts_zone(monkeypatch, capfd):
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # +05:30: logging's default stamp is the host's zone, unmarked
    time_module.tzset()
    try:
        with service_logging():
            before = datetime.now(timezone.utc)
            logging.getLogger("service.test").info("daily report due at 06:00 UTC")
            after = datetime.now(timezone.utc)
    finally:
        monkeypatch.delenv("TZ")
        time_module.tzset()
    line = capfd.readouterr().err.splitlines()[-1]
    stamp = datetime.strptime(line.split(" ")[0], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert before - timedelta(milliseconds=1) <= stamp <= after, line
    assert line.endswith("INFO service.test: daily report due at 06:00 UTC")


def test_what_serve_says_of_itself_is_stamped_and_levelled_as_its_other_lines(tmp_path, monkeypatch):
    """`spendlake serve` printed "spendlake serving …", "config changed on disk; send SIGHUP …", "SIGHUP: the
    config was not reloaded …", "reloading …" and "stopped" bare, without the UTC stamp of every other log
    line, so an operator could not tell when a SIGHUP was taken or refused; they are log lines now, the
    ones asking for action at WARNING."""
    import inspect

    from click.testing import CliRunner

    import service.serve.service as service_module
    from service.cli.main import cli
    from service.serve.config_watch import CHANGED_MESSAGE, REFUSED_MESSAGE

    said = ["spendlake serving http://127.0.0.1:9464 (lake /data/lake)", f"{CHANGED_MESSAGE} (/etc/spendlake.yaml)",
            "SIGHUP: the config was not reloaded, still serving the running one: bad line",
            f"{REFUSED_MESSAGE} (/etc/spendlake.yaml): bad line", "stopped"]
    default = inspect.signature(service_module.serve).parameters["announce"].default

    def fake_serve(config, **options):  # what the service announces, through what the CLI gives it
        for line in said:
            (options.get("announce") or default)(line)

    monkeypatch.setattr(service_module, "serve", fake_serve)
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: {tmp_path / 'lake'}\n")
    result = CliRunner().invoke(cli, ["--config", str(config), "serve"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    assert [re.match(rf"{stamp} (INFO|WARNING) service\.serve\.service: ", line).group(1) for line in lines] == \
        ["INFO", "WARNING", "WARNING", "WARNING", "INFO"], lines
    assert [line.split(": ", 1)[1] for line in lines] == said


def test_a_period_held_by_a_copy_rewritten_beside_its_original_is_logged_once_and_counted_each_run(tmp_path, caplog):
    """A backup of November changed while the exporter's file did not fails November (exit 3) until
    one of the two goes: `serve` said the FAILED line and 'job ingest failed' at ERROR every hour,
    forever. The failure is said when it begins, then is ingest's detail (-v), each run still counted as
    a failed ingest; `status` names the copy meanwhile (test_delivery_copies)."""
    export = tmp_path / "export"
    (export / "2026-11").mkdir(parents=True)
    header = "BilledCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd\n"
    (export / "2026-11" / "focus.csv").write_text(
        header + "12.5,USD,2026-11-01T00:00:00Z,2026-11-20T00:00:00Z,2026-11-20T01:00:00Z\n")
    shutil.copytree(export / "2026-11", export / "2026-11-backup", copy_function=shutil.copy)
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "focus-main", "kind": "focus", "location": str(export)}]})
    registry = CollectorRegistry()
    tasks = Tasks(ingest=lambda: run_ingest(config), rules=None, daily=lambda day: None)
    scheduler = ServiceScheduler(Lake.of(config), JobMetrics(registry, tasks.names()), tasks,
                                 ingest_every=timedelta(hours=1), daily_at=time(6),
                                 clock=lambda: datetime(2026, 12, 1, tzinfo=timezone.utc))
    assert scheduler.instrumented("ingest", tasks.ingest)
    (export / "2026-11-backup" / "focus.csv").write_text(
        header + "0.4,USD,2026-11-01T00:00:00Z,2026-11-20T00:00:00Z,2026-11-20T01:00:00Z\n")

    def told() -> list[tuple[str, str]]:
        caplog.clear()
        with caplog.at_level(logging.INFO):
            assert not scheduler.instrumented("ingest", tasks.ingest)
        return [(r.name, r.levelname) for r in caplog.records
                if "FAILED" in r.getMessage() or "job ingest failed" in r.getMessage()]

    assert told() == [("service.serve.scheduler", "ERROR")]  # the FAILED line is the job's failure (serve42)
    assert told() == told() == [("service.ingest", "INFO")]
    assert registry.get_sample_value("spendlake_job_failures_total", {"job": "ingest", "task": "ingest"}) == 3
    shutil.rmtree(export / "2026-11-backup")
    assert scheduler.instrumented("ingest", tasks.ingest)
