"""Every bad input gets one clear sentence and exit 2 or 3, never a traceback (RELIABILITY 54)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from service.cli.main import cli
from tests.attribution_helpers import one_line_config_file

CASES = [  # (arguments after --config, exit code, what the message names)
    (["attribute", "--since", "99999999999999d"], 2, "--since: '99999999999999d' is out of range"),
    (["attribute", "--since", "7d", "--until", "0001-01-01T00:00:00+14:00"], 2, "--until: "),
    (["attribute", "--since", "0001-01-01T00:00:00+14:00"], 2, "out of range"),
    (["attribute", "--since", "0001-01-02", "--compare"], 2, "--compare: no window of the same length"),
    (["attribute", "--since", "yesterday-ish"], 2, "cannot read 'yesterday-ish' as a time"),
    (["attribute", "--since", "2026-02-29"], 2, "--since: '2026-02-29' is not a valid date or time (day is out"),
    (["attribute", "--since", "7d", "--by", "teem"], 2, "unknown dimension 'teem'"),
    # README's `--by project,job_type` on a config without `clusters:` named valid dimensions only
    (["attribute", "--since", "7d", "--by", "project,job_type"], 2,
     "'job_type' is a dimension of shared GPU clusters: add `clusters:` under `attribution:`"),
    (["attribute", "--since", "7d", "--where", "run=llama-405b-r1"], 2, "'run' is a dimension of shared GPU clusters"),
    (["rules", "run", "--since", "99999999999999d", "--dry-run"], 2, "out of range"),
    (["serve", "--listen", "127.0.0.1:99999"], 2, "port from 0 to 65535"),
    (["serve", "--listen", "no-port"], 2, "is not HOST:PORT"),
    # a report reaches back a month and ends at its day's end: both were an OverflowError traceback
    (["report", "--date", "0001-01-31"], 2, "--date: '0001-01-31' is out of range — a report's day runs from "
                                            "0001-02-01 to 9999-12-30"),
    (["report", "--date", "9999-12-31"], 2, "--date: '9999-12-31' is out of range"),
    (["plans", "--as-of", "9999-12-31"], 2, "--as-of: '9999-12-31' is out of range"),
]


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return one_line_config_file(tmp_path_factory.mktemp("bad-input"))


@pytest.mark.parametrize("args, code, named", CASES, ids=lambda c: " ".join(c) if isinstance(c, list) else None)
def test_54_out_of_range_and_bad_values_exit_with_one_clear_line(config, args, code, named):
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output and named in result.output, result.output


@pytest.mark.parametrize("command", [["report", "--date", "2026-11-02"], ["export", "--format", "focus"]])
@pytest.mark.parametrize("under", ["", "reports/daily"])
def test_an_out_folder_that_is_a_file_or_inside_one_exits_2_naming_that_file(config, tmp_path, command, under):
    blocking = tmp_path / "notes.txt"
    blocking.write_text("mine")
    result = CliRunner().invoke(cli, ["--config", str(config), *command, "--out", str(blocking / under)])
    assert result.exit_code == 2, result.output  # was 3, "…/2026-11-02: cannot write the report: Not a directory"
    assert f"{blocking} is a file, not a folder" in result.output and "Traceback" not in result.output, result.output
    assert blocking.read_text() == "mine"


@pytest.mark.parametrize("args, named", [
    (["--start", "0001-01-01", "--days", "2"], "'--start': must be from 2000-01-01 to 9000-12-31, not 0001-01-01"),
    (["--start", "9999-12-30", "--days", "2"], "'--start': must be from 2000-01-01 to 9000-12-31, not 9999-12-30"),
    (["--seed", "-1"], "'--seed': must be at least 0, not -1"),
])
def test_54_demo_out_of_range_start_or_seed_exits_2_before_writing_anything(tmp_path, args, named):
    """The demo's organisation reaches back over a year before its window: these were an
    OverflowError and numpy's ValueError tracebacks."""
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "demo"), *args])
    assert result.exit_code == 2 and named in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert not (tmp_path / "demo").exists()


@pytest.mark.parametrize("option, value, said", [
    (["report", "--date"], "20261120", "--date: cannot read '20261120' as a date — use YYYY-MM-DD"),
    (["report", "--date"], "2026-W47-5", "--date: cannot read '2026-W47-5' as a date — use YYYY-MM-DD"),
    (["plans", "--as-of"], "2026W475", "--as-of: cannot read '2026W475' as a date — use YYYY-MM-DD"),
    (["plans", "--as-of"], "2026-11-2", "--as-of: '2026-11-2' is not a valid date — use YYYY-MM-DD, e.g. 2026-02-28"),
    (["demo", "--start"], "2026-1-5", "Invalid value for '--start': '2026-1-5' is not a day; use YYYY-MM-DD"),
    (["demo", "--start"], "20260105", "Invalid value for '--start': '20260105' is not a day; use YYYY-MM-DD"),
])
def test_a_day_option_takes_only_the_yyyy_mm_dd_the_readme_documents(config, tmp_path, option, value, said):
    """`report --date 20261120` and `--date 2026-W47-5` wrote the report of 2026-11-20 (Python's
    fromisoformat reads ISO's basic and week forms too), `demo --start 2026-1-5` the demo of
    5 January: none is the YYYY-MM-DD the README and --help name, and a typo could pass as a day."""
    out = {"report": ["--out", str(tmp_path / "out")], "plans": [],
           "demo": ["--dir", str(tmp_path / "out"), "--days", "1"]}[option[0]]
    result = CliRunner().invoke(cli, ["--config", str(config), *option, value, *out])
    assert result.exit_code == 2, result.output
    assert said in result.output and "Traceback" not in result.output, result.output
    assert not (tmp_path / "out").exists()
