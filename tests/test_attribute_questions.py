"""Questions a team lead asks `spendlake attribute` whose answer is no rows: the note says why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import SAMPLES
from service.cli.main import cli

WINDOW = ["--since", "2024-01-01", "--until", "2025-01-01"]


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> str:
    """The FOCUS sample: team PeoriaData spent on BrightPathMatrix only, CloudPathMax is PhiladelphiaData's."""
    root = tmp_path_factory.mktemp("lead")
    (root / "export").mkdir()
    shutil.copy(SAMPLES / "focus" / "focus_1.0_sample_1000.csv", root / "export" / "bill.csv")
    path = root / "spendlake.yaml"
    path.write_text(yaml.safe_dump({
        "lake": str(root / "lake"), "sources": [{"name": "focus", "kind": "focus", "location": str(root / "export")}],
        "attribution": {"dimensions": {"team": {"tags": ["business_unit"]}, "project": {"tags": ["application"]}}}}))
    assert invoke("--config", str(path), "ingest").exit_code == 0
    return str(path)


def test_known_values_that_no_line_carries_together_are_named_as_the_reason_not_a_window_without_cost(config):
    result = invoke("--config", config, "attribute", *WINDOW, "--by", "team", "--where", "team=PeoriaData",
                    "--where", "project=CloudPathMax", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "team,currency,cost",
        "note: no cost in the window 2024-01-01 00:00 → 2025-01-01 00:00 UTC matches --where team=PeoriaData "
        "--where project=CloudPathMax: each value is on lines of the lake, none of the window's lines carries them "
        "all (without --where the window holds cost)"], result.output
    alone = invoke("--config", config, "attribute", *WINDOW, "--by", "team", "--where", "project=CloudPathMax",
                   "--format", "csv")
    assert alone.output.splitlines()[1].startswith("PhiladelphiaData,USD,0.404"), alone.output


def test_a_known_value_without_cost_in_the_window_says_the_window_holds_other_cost(config):
    # AuroraSRE spent on 2024-09-21 only
    result = invoke("--config", config, "attribute", "--since", "2024-09-22", "--until", "2024-09-23",
                    "--by", "team", "--where", "team=aurorasre", "--format", "table")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "note: no cost in the window 2024-09-22 00:00 → 2024-09-23 00:00 UTC matches --where team=aurorasre "
        "(without --where the window holds cost)"], result.output
    outside = invoke("--config", config, "attribute", "--since", "2024-10-01", "--until", "2024-11-01",
                     "--where", "team=AuroraSRE", "--format", "csv")
    assert outside.output.splitlines()[1:] == [  # a window wholly after the data: where the data ends too
        "note: the window's last 744.0 h have no data yet (data through 2024-10-01 00:00 UTC)",
        "note: no cost in the window 2024-10-01 00:00 → 2024-11-01 00:00 UTC; the lake holds the billing periods "
        "2024-09 to 2024-10"], outside.output


def test_values_typed_comma_separated_in_one_where_warn_how_to_give_several(config):
    result = invoke("--config", config, "attribute", *WINDOW, "--where", "team=PeoriaData, PhiladelphiaData",
                    "--format", "csv")
    assert result.exit_code == 0, result.output
    [warning] = [line for line in result.output.splitlines() if line.startswith("warning: ")]
    assert warning.startswith("warning: --where team=PeoriaData, PhiladelphiaData matches nothing in the lake; "
                              "closest team values: "), warning
    assert warning.endswith("; several values: repeat --where, e.g. --where team=PeoriaData --where "
                            "team=PhiladelphiaData"), warning
    several = invoke("--config", config, "attribute", *WINDOW, "--where", "team=PeoriaData", "--where",
                     "team=PhiladelphiaData", "--format", "csv")
    assert [line.split(",")[0] for line in several.stdout.splitlines()] == ["team", "PeoriaData", "PhiladelphiaData"]


def test_weeks_the_window_cuts_are_named_with_the_days_they_hold(config):
    # 2024-09-04 is a Wednesday: the first week (from Monday 2024-09-02) holds 5 of its 7 days,
    # the last (from 2024-09-16) 4; a lead comparing the weeks is told, not left to read 5 days as 7
    result = invoke("--config", config, "attribute", "--since", "2024-09-04", "--until", "2024-09-20",
                    "--granularity", "week", "--format", "csv")
    assert result.exit_code == 0, result.output
    periods = {line.split(",")[0] for line in result.output.splitlines()[1:] if not line.startswith("note")}
    assert periods == {"2024-09-02", "2024-09-09", "2024-09-16"}, result.output
    [note] = [line for line in result.output.splitlines() if line.startswith("note: ")]
    assert note == ("note: periods the window cuts: week 2024-09-02 holds 2024-09-04 00:00 → 2024-09-09 00:00 UTC "
                    "(5 of 7 days); week 2024-09-16 holds 2024-09-16 00:00 → 2024-09-20 00:00 UTC (4 of 7 days)")
    whole = invoke("--config", config, "attribute", "--since", "2024-09-02", "--until", "2024-09-16",
                   "--granularity", "week", "--format", "csv")
    assert "note" not in whole.output and whole.output.count("2024-09-09") >= 1, whole.output
    hours = invoke("--config", config, "attribute", "--since", "2024-09-10T12:00:00Z", "--until", "2024-09-11",
                   "--granularity", "day", "--format", "csv")
    assert "note: periods the window cuts: day 2024-09-10 holds 2024-09-10 12:00 → 2024-09-11 00:00 UTC " \
           "(0.5 of 1 day)" in hours.output, hours.output
    month = invoke("--config", config, "attribute", "--since", "2024-09-24", "--until", "2024-10-01",
                   "--granularity", "month", "--format", "csv")
    assert month.output.splitlines()[-1] == ("note: periods the window cuts: month 2024-09-01 holds 2024-09-24 00:00 "
                                             "→ 2024-10-01 00:00 UTC (7 of 30 days)"), month.output


def test_a_window_reaching_before_the_first_bill_says_how_much_of_it_holds_none(config):
    # `--since 30d` on a lake ingested two weeks ago: the table's total is not thirty days' spend
    result = invoke("--config", config, "attribute", "--since", "2024-08-15", "--until", "2024-09-10",
                    "--format", "table")
    assert result.exit_code == 0, result.output
    assert ("data through 2024-10-01 00:00 UTC; the window's first 17.0 days hold no bill (the lake's first billing "
            "period is 2024-09)") in result.stdout, result.output
    inside = invoke("--config", config, "attribute", "--since", "2024-09-01", "--until", "2024-09-10",
                    "--format", "table")
    assert "hold no bill" not in inside.output and "data through 2024-10-01 00:00 UTC" in inside.stdout
