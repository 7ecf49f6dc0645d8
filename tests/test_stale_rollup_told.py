"""A period whose stored rollup is missing or stale (the config changed before `spendlake rollup`
ran) is attributed from its raw lines: the CLI says so once on stderr with the fix when that makes a
wait, and serve's API rolls it up once per state of the lake and config, not on every request."""

from __future__ import annotations

import json
from decimal import Decimal
from urllib.parse import parse_qs

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from servicekit import commit, make_config, write_config

from service.attribution import rollup, rollup_told
from service.attribution.rollup_told import told_by
from service.cli.main import cli
from service.core.lake import Lake
from service.serve.app import Api

LINES = [
    ("2026-11-03 05:00:00", "2026-11-03 06:00:00", "USD", "4.25", {"team": "nlp", "project": "llm"}),
    ("2026-11-10 05:00:00", "2026-11-10 06:00:00", "USD", "1", {"team": "vision", "project": "cam"}),
    ("2026-10-10 05:00:00", "2026-10-10 06:00:00", "USD", "2.5", {"team": "nlp", "project": "cam"}),
]
WINDOW = ["--since", "2026-10-01", "--until", "2026-12-01", "--by", "team,project", "--format", "json"]
QUERY = "since=2026-10-01&until=2026-12-01&by=team,project"


@pytest.fixture
def lake(tmp_path):
    """October and November 2026 committed without their rollups, as a config change leaves them."""
    config = make_config(tmp_path)
    commit(Lake(config.lake), "cur", LINES)
    path = write_config(tmp_path, {"lake": str(config.lake), "sources": [
        {"name": "cur", "kind": "focus", "location": str(tmp_path / "export")}]})
    return config, str(path)


@pytest.fixture
def rolled_up(monkeypatch):
    """Each period rolled up from its raw lines, as (source, period)."""
    done = []
    real = rollup.rollup_relation

    def counted(lake, config, con, part, *args, **kwargs):
        done.append((part.source, part.period))
        return real(lake, config, con, part, *args, **kwargs)

    monkeypatch.setattr(rollup, "rollup_relation", counted)
    return done


def test_a_query_over_periods_of_many_lines_without_their_rollup_says_so_once_with_the_fix(lake, monkeypatch):
    quiet = CliRunner().invoke(cli, ["--config", lake[1], "attribute", *WINDOW])
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr  # 3 lines: no wait to explain
    monkeypatch.setattr(rollup_told, "NOTE_LINES", 3)  # as a 10M-line month is
    told = CliRunner().invoke(cli, ["--config", lake[1], "attribute", *WINDOW])
    assert told.exit_code == 0, told.output
    assert told.stderr.splitlines() == [
        "note: 2 period(s) (cur 2026-10, cur 2026-11; 3 lines) have no stored rollup for this config (it changed "
        "since the last ingest or `spendlake rollup`, or a build failed): attributed from their raw lines, which "
        "is slower; `spendlake rollup` stores them"], told.stderr
    assert told.stdout == quiet.stdout  # the JSON unchanged
    stored = CliRunner().invoke(cli, ["--config", lake[1], "rollup"])
    assert stored.exit_code == 0, stored.output
    after = CliRunner().invoke(cli, ["--config", lake[1], "attribute", *WINDOW])
    assert after.stderr == "" and after.stdout == quiet.stdout, after.stderr


def test_a_command_reading_the_periods_several_times_says_it_once(lake, monkeypatch):
    from service.attribution import AttributionQuery, attribute_query

    monkeypatch.setattr(rollup_told, "NOTE_LINES", 1)
    config = lake[0]
    said: list[str] = []
    with told_by(said.append):
        for by in ("team", "project"):
            attribute_query(Lake.of(config), config, AttributionQuery.parse(config, since="2026-10-01",
                                                                            until="2026-12-01", by=by))
    assert len(said) == 1 and said[0].startswith("2 period(s) (cur 2026-10, cur 2026-11; 3 lines)"), said
    attribute_query(Lake.of(config), config, AttributionQuery.parse(config, since="2026-10-01", until="2026-12-01"))
    assert len(said) == 1  # outside a command nobody is told


def api_answer(api: Api, query: str = QUERY) -> dict:
    response = api.handle("/api/v1/attribute", parse_qs(query), None)
    assert response.status == 200, response.body
    return json.loads(response.body)


def test_serve_rolls_a_stale_period_up_once_for_the_requests_of_the_same_lake_state(lake, rolled_up):
    config, path = lake
    api = Api(config, CollectorRegistry())
    first = api_answer(api)
    assert sorted(rolled_up) == [("cur", "2026-10"), ("cur", "2026-11")]
    second = api_answer(api)
    assert len(rolled_up) == 2 and second == first  # the second request rolled nothing up again
    cli_json = json.loads(CliRunner().invoke(cli, ["--config", path, "attribute", *WINDOW]).stdout)
    assert first["rows"] == cli_json["rows"] and first["totals"] == cli_json["totals"], (first, cli_json)
    api_answer(api, "since=2026-10-01&until=2026-12-01&by=team")  # another question reads other dimensions
    assert len(rolled_up) == 2 + 2 + 2  # the CLI's two, then this one's two


def test_serve_rolls_a_period_up_again_once_its_data_changed(lake, rolled_up):
    config = lake[0]
    api = Api(config, CollectorRegistry())
    before = api_answer(api)
    commit(Lake(config.lake), "cur", [*LINES[:2], ("2026-11-20 05:00:00", "2026-11-20 06:00:00", "USD", "3",
                                                    {"team": "nlp", "project": "llm"})], delivery_id="d2")
    after = api_answer(api)
    assert rolled_up[2:] == [("cur", "2026-11")], rolled_up  # October's delivery is the same, kept
    assert len(api.rollups.files) == 2  # November's first delivery, superseded, no longer held
    assert after["totals"] != before["totals"]
    cost = {(row["team"], row["project"]): row["cost"] for row in after["rows"]}
    assert Decimal(cost[("nlp", "llm")]) == Decimal("7.25"), after["rows"]


def test_serve_keeps_no_more_rolled_up_bytes_than_its_bound(lake, rolled_up):
    api = Api(lake[0], CollectorRegistry())
    api.rollups.max_bytes = 1  # no period's rows fit
    first = api_answer(api)
    assert api_answer(api) == first and len(rolled_up) == 4  # rolled up by each request, the answer the same


def test_serve_lets_go_of_the_rolled_up_periods_once_their_rollups_are_stored(lake, rolled_up):
    config, path = lake
    api = Api(config, CollectorRegistry())
    first = api_answer(api)
    assert api.rollups.held > 0 and len(api.rollups.files) == 2
    assert CliRunner().invoke(cli, ["--config", path, "rollup"]).exit_code == 0
    assert api_answer(api) == first and len(rolled_up) == 2
    assert api.rollups.held == 0 and not api.rollups.files  # read from the stored rollups, none held
