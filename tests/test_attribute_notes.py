"""The notes `spendlake attribute` says beside its rows (values no line carries together, periods
the window cuts, days before the first bill) are in its JSON's `notes` and `/api/v1/attribute`'s,
in the same words: a script or dashboard reading the JSON is told what the table's reader is."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from servicekit import commit, make_config, write_config

from service.cli.main import cli
from service.core.lake import Lake
from service.serve.app import Api
from service.serve.metrics import LakeCollector


@pytest.fixture
def lake(tmp_path):
    """November 2026 alone: nlp on project llm on the 3rd, vision on project cam on the 10th."""
    config = make_config(tmp_path)
    commit(Lake(config.lake), "cur", [
        ("2026-11-03 05:00:00", "2026-11-03 06:00:00", "USD", "4.25", {"team": "nlp", "project": "llm"}),
        ("2026-11-10 05:00:00", "2026-11-10 06:00:00", "USD", "1", {"team": "vision", "project": "cam"}),
    ])
    path = write_config(tmp_path, {"lake": str(config.lake), "sources": [
        {"name": "cur", "kind": "focus", "location": str(tmp_path / "export")}]})
    return config, str(path)


def past(hours: float) -> str:
    """The note of a window reaching `hours` past the data's end (2026-11-10 06:00)."""
    return f"the window's last {hours:.1f} h have no data yet (the data runs through 2026-11-10T06:00:00Z)"


def answers(lake, query: str, *options: str) -> tuple[dict, dict, str]:
    """The API's answer to `query`, the CLI's JSON to `options`, and the CLI's stderr."""
    return api_and_cli(*lake, query, *options)


def api_and_cli(config, path: str, query: str, *options: str) -> tuple[dict, dict, str]:
    """`answers` for a config already loaded and the file it was read from."""
    registry = CollectorRegistry()
    registry.register(LakeCollector(config))
    response = Api(config, registry).handle("/api/v1/attribute", parse_qs(query), None)
    assert response.status == 200, response.body
    result = CliRunner().invoke(cli, ["--config", path, "attribute", *options, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(response.body), json.loads(result.stdout), result.stderr


def test_known_values_no_line_of_the_window_carries_together_are_a_note_in_the_json_and_the_api(lake):
    api, cli_json, stderr = answers(lake, "since=2026-11-01&until=2026-12-01&where=team=nlp&where=project=cam",
                                    "--since", "2026-11-01", "--until", "2026-12-01", "--where", "team=nlp",
                                    "--where", "project=cam")
    said = ("no cost in the window 2026-11-01 00:00 → 2026-12-01 00:00 UTC matches {w}team=nlp {w}project=cam: each "
            "value is on lines of the lake, none of the window's lines carries them all (without {o} the window "
            "holds cost)")
    assert api["rows"] == [] and api["notes"] == [said.format(w="where=", o="where")], api
    assert cli_json["notes"] == [said.format(w="--where ", o="--where")], cli_json
    assert f"note: {cli_json['notes'][0]}" in stderr.splitlines(), stderr
    api, cli_json, _ = answers(lake, "since=2026-12-01&until=2026-12-05&where=team=nlp",
                               "--since", "2026-12-01", "--until", "2026-12-05", "--where", "team=nlp")
    assert api["notes"] == cli_json["notes"] == [  # a window wholly after the data: where the data ends too
        "no cost in the window 2026-12-01 00:00 → 2026-12-05 00:00 UTC; the lake holds the billing periods "
        "2026-11 to 2026-11", past(96)], api


def test_periods_the_window_cuts_are_a_note_in_the_json_and_the_api(lake):
    api, cli_json, stderr = answers(lake, "since=2026-11-03&until=2026-11-12&granularity=week",
                                    "--since", "2026-11-03", "--until", "2026-11-12", "--granularity", "week")
    said = ("periods the window cuts: week 2026-11-02 holds 2026-11-03 00:00 → 2026-11-09 00:00 UTC (6 of 7 days); "
            "week 2026-11-09 holds 2026-11-09 00:00 → 2026-11-12 00:00 UTC (3 of 7 days)")
    assert api["notes"] == cli_json["notes"] == [said, past(42)], api
    assert stderr.splitlines() == [f"note: {said}"], stderr
    # week 2026-10-26 (5 of 7 days) has no cost, so no row to misread: not named
    api, cli_json, _ = answers(lake, "since=2026-10-28&until=2026-11-12&granularity=week",
                               "--since", "2026-10-28", "--until", "2026-11-12", "--granularity", "week")
    assert api["notes"] == cli_json["notes"] == [
        "periods the window cuts: week 2026-11-09 holds 2026-11-09 00:00 → 2026-11-12 00:00 UTC (3 of 7 days)",
        "the window's first 4.0 days hold no bill (the lake's first billing period is 2026-11)", past(42)], api
    api, cli_json, _ = answers(lake, "since=2026-11-02&until=2026-11-16&granularity=week",
                               "--since", "2026-11-02", "--until", "2026-11-16", "--granularity", "week")
    assert api["notes"] == cli_json["notes"] == [past(138)]  # whole weeks: only the days past the data to say


def test_days_of_the_window_before_the_first_bill_are_a_note_in_the_json_and_the_api(lake):
    api, cli_json, _ = answers(lake, "since=2026-10-22&until=2026-11-20", "--since", "2026-10-22",
                               "--until", "2026-11-20")
    said = "the window's first 10.0 days hold no bill (the lake's first billing period is 2026-11)"
    assert api["notes"] == cli_json["notes"] == [said, past(234)], api
    assert api["totals"] == [{"currency": "USD", "cost": "5.250000000000"}]
    csv = CliRunner().invoke(cli, ["--config", lake[1], "attribute", "--since", "2026-10-22", "--until", "2026-11-20",
                                   "--format", "csv"])
    assert csv.stdout.splitlines() == ["team,currency,cost", "nlp,USD,4.250000000000", "vision,USD,1.000000000000"]
    assert csv.stderr.splitlines() == [  # the CSV stays data; the notes on stderr
        f"note: {said}", "note: the window's last 234.0 h have no data yet (data through 2026-11-10 06:00 UTC)"]
    table = CliRunner().invoke(cli, ["--config", lake[1], "attribute", "--since", "2026-10-22", "--until",
                                     "2026-11-20", "--format", "table"])
    assert f"; {said}" in table.stdout and said not in table.stderr, table.output


def test_a_previous_window_without_cost_is_a_note_in_the_json_and_the_api(lake):
    # the data ends 2026-11-10 06:00: --compare sets the 9.25 days before November against it, days with no bill
    api, cli_json, stderr = answers(lake, "since=2026-11-01&until=2026-12-01&compare=true", "--since", "2026-11-01",
                                    "--until", "2026-12-01", "--compare")
    said = ("no cost in the previous window 2026-10-22 18:00 → 2026-11-01 00:00 UTC; the lake holds the billing "
            "periods 2026-11 to 2026-11; {} shows it as 0")
    assert api["notes"] == [said.format("compare"), past(498)], api
    assert cli_json["notes"] == [said.format("--compare"), past(498)], cli_json
    assert stderr.splitlines() == [f"note: {said.format('--compare')}"], stderr
    assert [row["previous_cost"] for row in api["rows"]] == ["0", "0"], api


def test_an_answer_without_rows_says_from_its_own_read_whether_the_window_holds_cost(lake, monkeypatch):
    # the note on known values no line carries together needs to know the window holds cost without
    # --where: the answer's read saw every line of the window (its rows kept by `where` after), so no
    # second attribution per empty answer (a raw read of a 10M-line month when rollups are stale)
    import service.attribution.answer_notes as answer_notes
    again = []
    monkeypatch.setattr(answer_notes, "attribute_query", lambda *args, **kwargs: again.append(args) or [][0])
    for since, until, said in (("2026-11-01", "2026-12-01", "matches {w}team=nlp {w}project=cam: each value is on "
                                "lines of the lake, none of the window's lines carries them all (without {o} the "
                                "window holds cost)"),
                               ("2026-11-05", "2026-11-08", "; the lake holds the billing periods 2026-11 to 2026-11")):
        api, cli_json, _ = answers(lake, f"since={since}&until={until}&where=team=nlp&where=project=cam",
                                   "--since", since, "--until", until, "--where", "team=nlp", "--where", "project=cam")
        assert api["rows"] == [] and api["notes"][0].endswith(said.format(w="where=", o="where")), api
        assert cli_json["notes"][0].endswith(said.format(w="--where ", o="--where")), cli_json
    assert again == []


def test_a_period_without_its_stored_rollup_is_named_with_v_and_the_command_that_stores_it(lake):
    # README: right answers, only slower, until `spendlake rollup` stores them (a config change makes
    # every stored rollup stale; this lake has none)
    shown = CliRunner().invoke(cli, ["--config", lake[1], "-v", "attribute", "--since", "2026-11-01", "--until",
                                     "2026-12-01", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    said = [line for line in shown.stderr.splitlines() if "rolled up from the raw lines" in line]
    assert len(said) == 1 and said[0].endswith(
        "attribution: 0 period(s) from stored rollups, 1 rolled up from the raw lines in memory (none stored for "
        "this config and delivery, or the stored one damaged: cur 2026-11; `spendlake rollup` stores them)"), shown.stderr
    quiet = CliRunner().invoke(cli, ["--config", lake[1], "attribute", "--since", "2026-11-01", "--until",
                                     "2026-12-01", "--format", "json"])
    assert "rolled up" not in quiet.stderr and json.loads(quiet.stdout) == json.loads(shown.stdout)
