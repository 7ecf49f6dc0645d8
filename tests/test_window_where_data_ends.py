"""Where the data ends, said of windows that reach past it (break52b, items 4 and 5):
- a window wholly after the data (`--since 2027-01-01 --until 2027-02-01`) said only `no cost in
  the window …; the lake holds the billing periods …`, never the `data through` line nor the
  `last 744.0 h have no data yet` README promises of an `--until` past the data's end;
- a source whose data ends inside the window, before the lake's (cur through 11-14 04:00 of a
  November the other source fills), went unsaid in JSON notes: the table's `behind:` names
  every source behind the lake, in the window or not."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from prometheus_client import CollectorRegistry

from service.serve.app import Api
from tests.attribution_helpers import attribute_cli, config_file_of, line, make_lake

END = datetime(2026, 11, 28, tzinfo=timezone.utc)
CUR_END = datetime(2026, 11, 14, 4, tzinfo=timezone.utc)
AFTER = ("--since", "2027-01-01", "--until", "2027-02-01")
PAST = "the window's last 744.0 h have no data yet"
LAGGING = ("source cur's data ends 2026-11-14 04:00 UTC, inside the window: the window's last 332.0 h hold none "
           "of cur's cost yet (the lake's data runs through 2026-11-28 00:00 UTC)")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("ends")
    hours = lambda end: [f"{end - timedelta(hours=n):%Y-%m-%d %H:%M}" for n in range(1, 24 * 10 + 1)]
    make_lake(root, [line(start, "1", tags={"team": "nlp"}) for start in hours(END)], source="gcp")
    lake = make_lake(root, [line(start, "2", tags={"team": "cv"}) for start in hours(CUR_END)], source="cur")
    return config_file_of(root, lake)


run = attribute_cli


def test_a_window_wholly_after_the_data_says_where_the_data_ends(setup):
    path, config = setup
    table = run(path, *AFTER, "--format", "table")
    assert table.exit_code == 0, table.output
    assert table.stdout == f"data through 2026-11-28 00:00 UTC (behind: cur 2026-11-14 04:00 UTC); {PAST}\n"
    assert "no cost in the window 2027-01-01 00:00 → 2027-02-01 00:00 UTC" in table.stderr
    data = json.loads(run(path, *AFTER, "--format", "json").stdout)
    assert data["rows"] == [] and f"{PAST} (the data runs through 2026-11-28T00:00:00Z)" in data["notes"]
    assert f"note: {PAST} (data through 2026-11-28 00:00 UTC)" in run(path, *AFTER, "--format", "csv").stderr
    api = Api(config, CollectorRegistry(), clock=lambda: END + timedelta(days=60))
    answer = json.loads(api.handle("/api/v1/attribute", {"since": ["2027-01-01"], "until": ["2027-02-01"]}, None).body)
    assert f"{PAST} (the data runs through 2026-11-28T00:00:00Z)" in answer["notes"]


def test_a_source_whose_data_ends_inside_the_window_is_named_in_its_notes(setup):
    path, config = setup
    window = ("--since", "2026-11-01", "--until", "2026-11-28")
    data = json.loads(run(path, *window, "--format", "json").stdout)
    assert data["notes"] == [LAGGING]
    assert f"note: {LAGGING}" in run(path, *window, "--format", "table").stderr
    api = Api(config, CollectorRegistry(), clock=lambda: END)
    answer = json.loads(api.handle("/api/v1/attribute", {"since": ["2026-11-01"], "until": ["2026-11-28"]}, None).body)
    assert answer["notes"] == [LAGGING]


def test_a_source_ending_outside_the_window_is_not_a_note(setup):
    path, _ = setup
    before = json.loads(run(path, "--since", "2026-11-01", "--until", "2026-11-14", "--format", "json").stdout)
    after = json.loads(run(path, "--since", "2026-11-20", "--until", "2026-11-28", "--format", "json").stdout)
    assert "notes" not in before and "notes" not in after
