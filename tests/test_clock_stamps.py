"""The lake's own stamps after a clock ran ahead: a delivery stamped as committed after this
machine's clock is said to be so by `status` and /api/v1/status (its stamp kept as written),
not by the report, which the same lake and day make whatever the clock."""

from __future__ import annotations

import json
import shutil
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from click.testing import CliRunner

from conftest import SAMPLES
from service.cli.main import cli
from service.core import commit, timewindow
from service.core.config import parse_config
from service.ingest.billing import ingest


def lake_ahead(tmp_path, monkeypatch, ahead: timedelta):
    """The FOCUS sample (periods 2024-09 and 2024-10) committed by a clock `ahead` of this one."""
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLES / "focus" / "focus_1.0_sample_1000.csv", tmp_path / "export")
    config = {"lake": str(tmp_path / "lake"), "sources": [{"name": "bill", "kind": "focus",
                                                          "location": str(tmp_path / "export")}]}
    (tmp_path / "spendlake.yaml").write_text(json.dumps(config))
    stamp = (datetime.now(timezone.utc) + ahead).strftime("%Y-%m-%dT%H:%M:%SZ")
    with monkeypatch.context() as clock:
        clock.setattr(commit, "utc_now_iso", lambda: stamp)
        assert not ingest(parse_config(config)).failed
    return parse_config(config), stamp


def test_status_says_a_delivery_stamped_after_this_clock_is_so(tmp_path, monkeypatch):
    """A service 40 days ahead ingested; set right, `status` listed ingested_at 40 days in the
    future with nothing said."""
    config, stamp = lake_ahead(tmp_path, monkeypatch, timedelta(days=40))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "status", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert {row["ingested_at"] for row in json.loads(result.stdout)} == {stamp}  # that clock's word, kept
    said = [line for line in result.stderr.splitlines() if line.startswith("ahead: ")]
    assert len(said) == 2 and said[0].startswith(f"ahead: bill 2024-09 is stamped as committed at {stamp}, after "
                                                 "this machine's clock (")
    assert "ran ahead, or this one is behind" in said[0] and "date -u" in said[0]


def test_the_status_api_says_it_too(tmp_path, monkeypatch):
    from prometheus_client import CollectorRegistry

    from service.serve.app import Api

    config, stamp = lake_ahead(tmp_path, monkeypatch, timedelta(days=40))
    body = json.loads(Api(config, CollectorRegistry()).handle("/api/v1/status", {}, None).body)
    assert {period["ingested_at"] for period in body["periods"]} == {stamp}
    assert len(body["notes"]) == 2 and body["notes"][0].startswith(f"bill 2024-09 is stamped as committed at {stamp}")


def test_a_report_of_deliveries_stamped_after_this_clock_is_the_same_whatever_the_clock(tmp_path, monkeypatch):
    """The report's freshness table said under it that a delivery was stamped after this
    machine's clock: the same lake and day gave other bytes once the clock passed the stamp.
    `status` and /api/v1/status say it; the report is the lake's and the day's alone."""
    _, stamp = lake_ahead(tmp_path, monkeypatch, timedelta(days=40))
    report = ["--config", str(tmp_path / "spendlake.yaml"), "report", "--date", "2024-09-30", "--out"]
    assert CliRunner().invoke(cli, [*report, str(tmp_path / "now")]).exit_code == 0
    later = datetime.now(timezone.utc) + timedelta(days=60)  # the stamps are now in the past
    for module in [m for name, m in sys.modules.items() if name.startswith("service.")]:
        if getattr(module, "utc_now", None) is timewindow.utc_now:
            monkeypatch.setattr(module, "utc_now", lambda: later)
    assert CliRunner().invoke(cli, [*report, str(tmp_path / "later")]).exit_code == 0
    written = {path.relative_to(tmp_path / "now"): path.read_bytes() for path in (tmp_path / "now").rglob("*.*")}
    assert len(written) > 3 and stamp.encode() in written[Path("2024-09-30/report.json")]
    assert {path: (tmp_path / "later" / path).read_bytes() for path in written} == written


def test_a_stamp_within_the_clock_skew_is_not_said_ahead(tmp_path, monkeypatch):
    """Another host a minute ahead committed it: no clock ran ahead."""
    lake_ahead(tmp_path, monkeypatch, timedelta(minutes=1))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "status", "--format", "json"])
    assert result.exit_code == 0 and "ahead: " not in result.stderr


def test_an_orphaned_sources_stamps_are_not_said_ahead_its_orphaning_is_said_once(tmp_path, monkeypatch):
    """break51b: after sources were renamed, /api/v1/status's notes listed an 'ahead' stamp for each period of
    every orphaned source (15 lines of noise), and not that they were orphaned. The source renamed here (bill →
    bill-renamed, never ingested): the API's notes say bill is orphaned, once, and `status` says no 'ahead:'."""
    from prometheus_client import CollectorRegistry

    from service.serve.app import Api

    config, _ = lake_ahead(tmp_path, monkeypatch, timedelta(days=40))
    renamed = json.loads((tmp_path / "spendlake.yaml").read_text())
    renamed["sources"][0]["name"] = "bill-renamed"
    (tmp_path / "spendlake.yaml").write_text(json.dumps(renamed))
    body = json.loads(Api(parse_config(renamed), CollectorRegistry()).handle("/api/v1/status", {}, None).body)
    [note] = body["notes"]
    assert note.startswith("orphaned: bill is not in the config but the lake holds it ("), note
    assert "`spendlake forget bill` removes it" in note
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "status", "--format", "json"])
    assert "ahead: " not in result.stderr and "orphaned: bill is not in the config" in result.stderr, result.stderr
