"""The forms of a window's bounds (break52b, item 7): `--since 2026-11` (a month) and RFC 3339's
lowercase `z` were refused while `2026-W45` and `20261101` were read; `+25:00` printed Python's
"offset must be a timedelta strictly between -timedelta(hours=24) …". A month is its first day
(an `--until` month ends the window before it: `[since, until)`), `z` is UTC, and an offset past
a day is said in our words."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.errors import UsageError
from service.core.timewindow import parse_window
from tests.attribution_helpers import declared_sources, line, make_lake

NOW = datetime(2026, 12, 7, tzinfo=timezone.utc)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@pytest.mark.parametrize("since, until, window", [
    ("2026-11", "2026-12", (utc(2026, 11, 1), utc(2026, 12, 1))),  # November whole, December's 1st excluded
    ("2026-11", None, (utc(2026, 11, 1), NOW)),
    ("2026-11-01t06:00:00z", "2026-11-02T06:00:00z", (utc(2026, 11, 1, 6), utc(2026, 11, 2, 6))),
    ("2026-11-01 06:00:00Z", None, (utc(2026, 11, 1, 6), NOW)),  # the upper case as before
])
def test_a_month_and_a_lowercase_z_are_read(since, until, window):
    found = parse_window(since, until, now=NOW)
    assert (found.since, found.until) == window


@pytest.mark.parametrize("since, said", [
    ("2026-11-01T06:00:00+25:00", "'2026-11-01T06:00:00+25:00' is not a valid date or time (a UTC offset runs "
                                  "from -23:59 to +23:59)"),
    ("2026-11-01T06:00:00-24:00", "(a UTC offset runs from -23:59 to +23:59)"),
    ("2026-13", "'2026-13' is not a valid date or time (month must be in 1..12)"),
])
def test_an_offset_past_a_day_or_a_month_that_is_none_is_said_in_our_words(since, said):
    with pytest.raises(UsageError) as refused:
        parse_window(since, None, now=NOW)
    assert said in str(refused.value) and "timedelta" not in str(refused.value), refused.value


def test_attribute_reads_a_month_as_its_first_day(tmp_path):
    lake = make_lake(tmp_path, [line("2026-10-31 23:00", "1", tags={"team": "a"}),
                                line("2026-11-01 00:00", "10", tags={"team": "a"}),
                                line("2026-11-30 23:00", "100", tags={"team": "a"}),
                                line("2026-12-01 00:00", "1000", tags={"team": "a"})])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake)}))
    result = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--since", "2026-11", "--until", "2026-12",
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["since"], data["until"]) == ("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z")
    assert data["totals"] == [{"currency": "USD", "cost": "110.000000000000"}]
