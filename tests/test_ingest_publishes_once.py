"""An ingest run is one change of the lake (RELIABILITY 43): its deliveries are staged first
and put in place together, so a reader never sees some new periods beside others still old
(a re-delivered October and November read as the new October with the old November)."""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path

import pytest

from connectors.focus import FocusConnector
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest import billing

HEADER = "BilledCost,EffectiveCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd,ChargeCategory\n"


def write_month(export: Path, month: str, cost: str) -> None:
    (export / f"{month}.csv").write_text(
        HEADER + f"{cost},{cost},USD,{month}-01T00:00:00Z,{month}-02T00:00:00Z,{month}-02T01:00:00Z,Usage\n")


def lake_total(lake: Lake) -> Decimal:
    return sum((t.billed_cost for e in lake.ledger() for t in e.totals), Decimal(0))


@pytest.fixture
def two_months(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "bill", "kind": "focus", "location": str(export)}]})
    for month, cost in (("2026-10", "100"), ("2026-11", "10")):
        write_month(export, month, cost)
    assert not billing.ingest(config).failed
    return config, export, Lake.of(config)


def test_43_a_reader_between_two_deliveries_of_one_run_sees_the_old_lake(two_months, monkeypatch):
    config, export, lake = two_months
    assert lake_total(lake) == Decimal(110)
    for month, cost in (("2026-10", "200"), ("2026-11", "20")):
        write_month(export, month, cost)
    seen: list[Decimal] = []
    read = FocusConnector.read

    def reading(self, delivery, *args, **kwargs):
        seen.append(lake_total(lake))  # what a reader sees while the run reads each delivery
        return read(self, delivery, *args, **kwargs)

    monkeypatch.setattr(FocusConnector, "read", reading)
    result = billing.ingest(config)
    assert [o.status for o in result.outcomes] == ["committed", "committed"]
    assert len(seen) >= 2 and set(seen) == {Decimal(110)}  # never 200 + 10
    assert lake_total(lake) == Decimal(220)
    assert not list(lake.staging.glob("costs-*"))  # nothing staged is left behind


def test_a_delivery_that_fails_fails_alone_and_the_others_are_published(two_months):
    config, export, lake = two_months
    write_month(export, "2026-10", "300")
    (export / "2026-11.csv").write_text(HEADER + "not a number,1,USD,2026-11-01T00:00:00Z,x,y,Usage\n")
    result = billing.ingest(config)
    assert sorted(o.status for o in result.outcomes) == ["committed", "failed"]
    assert {e.billing_period: e.totals[0].billed_cost for e in lake.ledger()} == {
        "2026-10": Decimal(300), "2026-11": Decimal(10)}  # November keeps its previous delivery


def test_a_failed_publish_fails_every_staged_delivery_and_keeps_the_lake(two_months, monkeypatch):
    from service.core.errors import SpendlakeError

    config, export, lake = two_months
    for month, cost in (("2026-10", "400"), ("2026-11", "40")):
        write_month(export, month, cost)

    def disk_full(lake, staged):
        raise SpendlakeError("cannot write the lake: No space left on device", where=str(lake.root))

    monkeypatch.setattr(billing, "publish_costs", disk_full)
    result = billing.ingest(config)
    assert [o.status for o in result.outcomes] == ["failed", "failed"]
    assert all("No space left" in str(o.error) for o in result.outcomes)
    assert lake_total(lake) == Decimal(110)
    assert lake.read_state("sources")["bill"]["failures_total"] == 1


def test_the_committed_periods_are_printed_when_the_run_publishes_before_the_rollups_once(two_months, monkeypatch):
    from click.testing import CliRunner

    from service.cli.main import cli

    config, export, lake = two_months
    write_month(export, "2026-10", "500")
    path = export.parent / "spendlake.yaml"
    path.write_text(f"lake: {lake.root}\nsources: [{{name: bill, kind: focus, location: {export}}}]\n")
    printed_before_rollups: list[str] = []  # what the command's stdout holds when the rollup build starts
    monkeypatch.setattr(billing, "refresh_rollups",
                        lambda lake, config: printed_before_rollups.append(sys.stdout.buffer.getvalue().decode()) or [])
    result = CliRunner().invoke(cli, ["--config", str(path), "ingest"])
    assert result.exit_code == 0, result.output
    committed = "bill 2026-10: committed 1 rows USD 500"
    assert result.output.count(committed) == 1 and result.output.count("bill 2026-11: unchanged") == 1, result.output
    assert printed_before_rollups and committed in printed_before_rollups[0]


@pytest.mark.slow  # a subprocess ingest, killed during the rollup build
def test_an_ingest_killed_during_the_rollup_build_has_printed_what_it_committed(two_months):
    import os
    import signal
    import subprocess

    config, export, lake = two_months
    write_month(export, "2026-11", "600")
    path = export.parent / "spendlake.yaml"
    path.write_text(f"lake: {lake.root}\nsources: [{{name: bill, kind: focus, location: {export}}}]\n")
    # the rollup build dies as under kill -9: nothing after the publish runs, no buffer is flushed
    die = ("import os, signal, sys; from service.ingest import billing; "
           "billing.refresh_rollups = lambda lake, config: os.kill(os.getpid(), signal.SIGKILL); "
           "from service.cli.main import cli; sys.argv[0] = 'spendlake'; cli()")
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", die, "--config", str(path), "ingest"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(repo)})
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert "bill 2026-11: committed 1 rows USD 600" in done.stdout and "bill 2026-10: unchanged" in done.stdout
    assert {e.billing_period: e.totals[0].billed_cost for e in lake.ledger()}["2026-11"] == Decimal(600)


def test_the_service_logs_the_committed_periods_before_the_rollups(two_months, monkeypatch, caplog):
    import logging

    from service.serve.service import run_ingest

    config, export, lake = two_months
    write_month(export, "2026-10", "700")
    logged: list[str] = []
    monkeypatch.setattr(billing, "refresh_rollups", lambda lake, config: logged.extend(caplog.messages) or [])
    with caplog.at_level(logging.INFO):
        run_ingest(config)
    assert "ingest: bill 2026-10: committed 1 rows USD 700.000000000000 (estimated)" in logged
    assert caplog.messages.count("ingest: bill 2026-10: committed 1 rows USD 700.000000000000 (estimated)") == 1
