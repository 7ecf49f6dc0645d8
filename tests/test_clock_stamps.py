"""The lake's own stamps after a clock ran ahead: a delivery stamped as committed after this
machine's clock is said to be so by `status` and the report (its stamp kept as written)."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone

from click.testing import CliRunner

from conftest import SAMPLES
from service.cli.main import cli
from service.core import commit
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import ingest
from service.report.data import freshness_section


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


def test_the_reports_last_delivery_stamped_after_this_clock_is_said_so(tmp_path, monkeypatch):
    config, stamp = lake_ahead(tmp_path, monkeypatch, timedelta(days=40))
    [table] = freshness_section(config, Lake.of(config), datetime(2024, 10, 1, tzinfo=timezone.utc)).tables
    assert table.rows[0]["last_delivery"] == stamp
    assert len(table.notes) == 1 and table.notes[0].startswith(f"bill 2024-09 is stamped as committed at {stamp}")


def test_a_stamp_within_the_clock_skew_is_not_said_ahead(tmp_path, monkeypatch):
    """Another host a minute ahead committed it: no clock ran ahead."""
    config, _ = lake_ahead(tmp_path, monkeypatch, timedelta(minutes=1))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "status", "--format", "json"])
    assert result.exit_code == 0 and "ahead: " not in result.stderr
    assert freshness_section(config, Lake.of(config), datetime(2024, 10, 1, tzinfo=timezone.utc)).tables[0].notes == []
