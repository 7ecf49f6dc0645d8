"""A window and the data's end (break47): a window reaching past the data's end says so in
every form, not only in the table's coverage line (JSON and `/api/v1/attribute` in `notes`, CSV
on stderr); and a relative `--until` is measured back from the data's end as `--since` is, so
`--since 7d --until 3d` is the 7 days before the data's last 3 whatever the wall clock says."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from prometheus_client import CollectorRegistry

from service.core.timewindow import parse_window
from service.serve.app import Api
from tests.attribution_helpers import attribute_cli, config_file_of, line, make_lake

END = datetime(2026, 11, 28, tzinfo=timezone.utc)  # the usage data ends at midnight
NOTE = "the window's last 96.0 h have no data yet (the data runs through 2026-11-28T00:00:00Z)"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("past")
    lines = [line(f"{END - timedelta(hours=n):%Y-%m-%d %H:%M}", "1", tags={"team": "nlp"}, resource="i-1")
             for n in range(1, 24 * 20 + 1)]  # 20 days, $1 an hour
    lake = make_lake(root, lines)
    return config_file_of(root, lake)


run = attribute_cli


def test_a_window_past_the_data_says_so_in_json_csv_and_the_api(setup):
    path, config = setup
    window = ("--since", "2026-11-25", "--until", "2026-12-02")
    data = json.loads(run(path, *window, "--format", "json").output)
    assert data["notes"] == [NOTE] and data["until"] == "2026-12-02T00:00:00Z"
    csv = run(path, *window, "--format", "csv")
    assert csv.stdout.splitlines() == ["team,currency,cost", "nlp,USD,72.000000000000"]
    assert csv.stderr == "note: the window's last 96.0 h have no data yet (data through 2026-11-28 00:00 UTC)\n"
    table = run(path, *window, "--format", "table").stdout
    assert "data through 2026-11-28 00:00 UTC; the window's last 96.0 h have no data yet" in table
    api = Api(config, CollectorRegistry(), clock=lambda: END + timedelta(days=8))
    answer = json.loads(api.handle("/api/v1/attribute", {"since": ["2026-11-25"], "until": ["2026-12-02"]}, None).body)
    assert answer["notes"] == [NOTE]
    within = json.loads(run(path, "--since", "7d", "--format", "json").output)
    assert "notes" not in within  # a window within the data has nothing to say


def test_a_relative_until_is_measured_from_the_datas_end_as_since_is(setup):
    path, config = setup
    now = END + timedelta(days=8, hours=5)  # the wall clock, 8 days past the data's end
    assert parse_window("7d", "3d", now=now, end=END) == parse_window("2026-11-18", "2026-11-25", now=now)
    assert parse_window("7d", "now", now=now, end=END).until == now  # `now` is the wall clock
    data = json.loads(run(path, "--since", "7d", "--until", "3d", "--format", "json").output)
    assert (data["since"], data["until"]) == ("2026-11-18T00:00:00Z", "2026-11-25T00:00:00Z")
    assert data["totals"] == [{"currency": "USD", "cost": "168.000000000000"}] and "notes" not in data
    api = Api(config, CollectorRegistry(), clock=lambda: now)
    answer = json.loads(api.handle("/api/v1/attribute", {"since": ["7d"], "until": ["3d"]}, None).body)
    assert (answer["since"], answer["until"]) == ("2026-11-18T00:00:00Z", "2026-11-25T00:00:00Z")
