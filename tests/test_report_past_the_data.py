"""`spendlake report --date D` past the lake's billing data (break52b item 8): a day a month past
it read `Month to date $0.00` and every team at $0.00, exit 0, its intro saying only that the
figures were incomplete. The intro now says the day is past the data, where the data ends and
which day to report instead, and so does stderr; the exit stays 0, as the lake holds data before
the day (the report is written; an empty lake is exit 3, test_report_without_data)."""

from __future__ import annotations

import json
from datetime import date

from click.testing import CliRunner

from service.cli.main import cli
from tests.test_report_sources_behind import write_daily

ENDS = "the lake's billing data, which ends at 2026-12-07 00:00 UTC"
LAST = "the last whole day of data is 2026-12-06 (`spendlake report --date 2026-12-06`)"


def lake_to_december_6th(tmp_path):
    """One 100 USD usage line a day, 2026-11-01 to 2026-12-06."""
    (tmp_path / "bills").mkdir()
    write_daily(tmp_path / "bills" / "bill.csv", date(2026, 11, 1), date(2026, 12, 6))
    config = tmp_path / "spendlake.yaml"
    config.write_text("lake: ./lake\nsources:\n  - {name: cur, kind: focus, location: ./bills}\n")
    assert CliRunner().invoke(cli, ["--config", str(config), "ingest"]).exit_code == 0
    return config


def reported(config, day: str, out):
    result = CliRunner().invoke(cli, ["--config", str(config), "report", "--date", day, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return result, json.loads((out / day / "report.json").read_text())


def test_a_day_a_month_past_the_data_says_so_in_the_intro_and_on_stderr(tmp_path):
    config = lake_to_december_6th(tmp_path)
    result, data = reported(config, "2027-01-05", tmp_path / "out")
    [headline] = [h for h in data["headlines"] if h["label"].startswith("Month to date")]
    assert data["notes"][0] == (
        f"2027-01-05 is past {ENDS}, before January 2027 begins: none of the month's usage is in the lake yet, so the "
        "day's and the month to date's figures hold none of it (where they read $0.00, that is data not in yet, "
        f"not spend that stopped), and no change against earlier days is shown; {LAST}. Run `spendlake ingest` "
        "once the month's bills are delivered.")
    assert result.stderr == (f"warning: 2027-01-05 is past {ENDS}, before January 2027 begins: the report's figures "
                             "hold none of the day's or the month's usage (where they read $0.00, that is data not in "
                             f"yet); {LAST}\n")
    assert "report for 2027-01-05" in result.stdout
    assert (headline["value"], headline["change_pct"]) == ("0", None)  # as it was: the month holds no usage yet
    folder = tmp_path / "out" / "2027-01-05"
    assert f"_2027-01-05 is past {ENDS}, before January 2027 begins:" in (folder / "summary.md").read_text()
    assert f"2027-01-05 is past {ENDS.replace(chr(39), '&#39;')}, before" in (folder / "report.html").read_text()


def test_a_day_past_the_data_in_its_month_warns_and_keeps_its_intro(tmp_path):
    config = lake_to_december_6th(tmp_path)
    result, data = reported(config, "2026-12-10", tmp_path / "out")
    assert data["notes"][0].startswith("The lake's billing data ends at 2026-12-07 00:00 UTC: spend after it is not in "
                                       "yet, so this day's and this month's figures are incomplete")
    assert result.stderr == (f"warning: 2026-12-10 is past {ENDS}: the report's figures hold none of the day's usage, "
                             f"and the month's only up to then; {LAST}\n")


def test_a_day_the_data_reaches_says_nothing_on_stderr(tmp_path):
    config = lake_to_december_6th(tmp_path)
    for day in ("2026-12-06", "2026-11-15"):
        result, data = reported(config, day, tmp_path / "out")
        assert result.stderr == "" and not any("is past the lake's billing data" in note for note in data["notes"])
