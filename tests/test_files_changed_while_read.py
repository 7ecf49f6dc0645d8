"""A local export file rewritten while ingest reads it (RELIABILITY 6 for local files): an
export job rewriting `part-0001.csv`, a user copying a new file over the old one. What was
staged may mix old and new rows under the old file's delivery id, so the delivery fails
(exit 3, naming the file), nothing of it is committed, the other deliveries are, and the
next ingest reads the file whole."""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from connectors.focus import FocusConnector
from service.cli.main import cli
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest import billing

HEADER = "BilledCost,EffectiveCost,BillingCurrency,BillingPeriodStart,ChargePeriodStart,ChargePeriodEnd,ChargeCategory\n"
CHANGED = "changed while it was read"


def write_month(export: Path, month: str, cost: str) -> Path:
    path = export / f"{month}.csv"
    path.write_text(HEADER + f"{cost},{cost},USD,{month}-01T00:00:00Z,{month}-02T00:00:00Z,{month}-02T01:00:00Z,Usage\n")
    return path


def billed(lake: Lake) -> dict[str, Decimal]:
    return {e.billing_period: e.totals[0].billed_cost for e in lake.ledger()}


@pytest.fixture
def export(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "bill", "kind": "focus", "location": str(folder)}]})
    return config, folder, Lake.of(config)


def rewrite_after_staging(monkeypatch, path: Path, cost: str) -> None:
    """Rewrite `path` (same month, new cost) once a delivery holding it is staged: the export
    job finishing its file after ingest read it, before the run publishes."""
    stage = billing.stage_costs

    def staging(lake, con, relation, **delivery):
        staged = stage(lake, con, relation, **delivery)
        if str(path) in delivery["files"] and path.read_text().split(",")[0] != cost:
            write_month(path.parent, path.stem, cost)
        return staged

    monkeypatch.setattr(billing, "stage_costs", staging)


def test_6_a_local_file_rewritten_after_it_was_staged_fails_alone_and_commits_nothing(export, monkeypatch):
    config, folder, lake = export
    october = write_month(folder, "2026-10", "100")
    write_month(folder, "2026-11", "10")
    assert not billing.ingest(config).failed
    write_month(folder, "2026-10", "200")
    write_month(folder, "2026-11", "20")
    rewrite_after_staging(monkeypatch, october, "300")
    result = billing.ingest(config)
    assert [str(o.error) for o in result.failed] == [
        f"{october} {CHANGED} — run ingest again when the export has finished writing it"]
    assert billed(lake) == {"2026-10": Decimal(100), "2026-11": Decimal(20)}  # October keeps its last delivery
    assert not list(lake.staging.glob("costs-*"))
    monkeypatch.undo()
    assert not billing.ingest(config).failed  # the next run reads the file as it is now
    assert billed(lake) == {"2026-10": Decimal(300), "2026-11": Decimal(20)}


def test_6_a_new_file_rewritten_during_a_first_ingest_in_one_pass_fails_alone(export, monkeypatch):
    config, folder, lake = export
    october = write_month(folder, "2026-10", "100")
    write_month(folder, "2026-11", "10")
    write_month(folder, "2026-12", "1")
    rewrite_after_staging(monkeypatch, october, "300")  # the one pass fails; the survey's try reads it again
    result = billing.ingest(config)
    assert [o.delivery.files for o in result.failed] == [(str(october),)]
    assert CHANGED in str(result.failed[0].error)
    assert billed(lake) == {"2026-11": Decimal(10), "2026-12": Decimal(1)}
    monkeypatch.undo()
    assert not billing.ingest(config).failed
    assert billed(lake) == {"2026-10": Decimal(300), "2026-11": Decimal(10), "2026-12": Decimal(1)}


def test_6_a_file_cut_short_while_it_is_read_is_told_as_changed_not_as_a_bad_file(export, monkeypatch):
    config, folder, lake = export
    october = write_month(folder, "2026-10", "100")
    assert not billing.ingest(config).failed
    write_month(folder, "2026-10", "200")
    read = FocusConnector.read

    def cut_short(self, delivery, con, scratch):
        relation = read(self, delivery, con, scratch)
        october.write_text(HEADER + "20")  # the relation is lazy: staging reads this
        return relation

    monkeypatch.setattr(FocusConnector, "read", cut_short)
    result = CliRunner().invoke(cli, ["--config", str(write_config(config, folder)), "ingest"])
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    assert f"{october} {CHANGED}" in result.output
    assert billed(lake) == {"2026-10": Decimal(100)}


def test_6_files_removed_or_rewritten_after_they_were_listed_are_named(export, monkeypatch):
    config, folder, lake = export
    october = write_month(folder, "2026-10", "100")
    write_month(folder, "2026-11", "10")
    assert not billing.ingest(config).failed
    write_month(folder, "2026-10", "200")
    write_month(folder, "2026-11", "20")
    deliveries = FocusConnector.deliveries

    def listed_then_removed(self):
        found = list(deliveries(self))
        october.unlink()
        write_month(folder, "2026-11", "30")  # and November rewritten: both fail, nothing is committed
        return iter(found)

    monkeypatch.setattr(FocusConnector, "deliveries", listed_then_removed)
    errors = sorted(str(o.error) for o in billing.ingest(config).failed)
    assert len(errors) == 2 and errors[0].startswith(f"{october}: file listed by the delivery is missing")
    assert CHANGED in errors[1]
    assert billed(lake) == {"2026-10": Decimal(100), "2026-11": Decimal(10)}


def rewrite_keeping_size_and_mtime(path: Path, cost: str) -> None:
    """`path` with another cost of as many digits, its size and modification time as before (an
    export rewriting it within one mtime tick, or a copy keeping the old mtime)."""
    before = path.stat()
    write_month(path.parent, path.stem, cost)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_6_a_file_rewritten_with_its_size_and_mtime_is_read_again(export):
    config, folder, lake = export
    october = write_month(folder, "2026-10", "100")
    assert not billing.ingest(config).failed
    rewrite_keeping_size_and_mtime(october, "200")
    result = billing.ingest(config)
    assert not result.failed and [o.status for o in result.outcomes] == ["committed"]
    assert billed(lake) == {"2026-10": Decimal(200)}


def test_6_a_file_rewritten_with_its_size_and_mtime_while_read_fails_alone(export, monkeypatch):
    config, folder, lake = export
    october = write_month(folder, "2026-10", "100")
    write_month(folder, "2026-11", "10")
    assert not billing.ingest(config).failed
    write_month(folder, "2026-10", "200")
    stage = billing.stage_costs

    def staging(lake, con, relation, **delivery):
        staged = stage(lake, con, relation, **delivery)
        if str(october) in delivery["files"]:
            rewrite_keeping_size_and_mtime(october, "300")
        return staged

    monkeypatch.setattr(billing, "stage_costs", staging)
    result = billing.ingest(config)
    assert [str(o.error) for o in result.failed] == [
        f"{october} {CHANGED} — run ingest again when the export has finished writing it"]
    assert billed(lake) == {"2026-10": Decimal(100), "2026-11": Decimal(10)}
    monkeypatch.undo()
    assert not billing.ingest(config).failed
    assert billed(lake) == {"2026-10": Decimal(300), "2026-11": Decimal(10)}


def write_config(config, folder: Path) -> Path:
    path = folder.parent / "spendlake.yaml"
    path.write_text(f"lake: {config.lake}\nsources:\n  - name: bill\n    kind: focus\n    location: {folder}\n")
    return path
