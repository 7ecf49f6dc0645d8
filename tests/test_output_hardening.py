"""Output that survives hostile values and killed writers (RELIABILITY 62)."""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
from decimal import Decimal

import click
import pytest

from service.core.output import to_csv
from service.core.publish import write_local

HOSTILE = ["\r=1+1", "a\nb", "x,y", 'say "hi"', " =HYPERLINK(1)", "\t+cmd", "\n-2", "@SUM(A1)", "\0=1+1", "plain"]


def test_62_cells_holding_cr_lf_or_the_delimiter_are_quoted_and_formulas_neutralised():
    text = to_csv([{"value": v, "cost": -3} for v in HOSTILE], ["value", "cost"])
    assert text.count("\r") == 1 and "\"'\r=1+1\"" in text  # the one CR sits inside a quoted cell
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["value", "cost"]
    values = [row[0] for row in rows[1:]]
    assert values == ["'\r=1+1", "a\nb", "x,y", 'say "hi"', "' =HYPERLINK(1)", "'\t+cmd", "'\n-2", "'@SUM(A1)",
                      "'\0=1+1", "plain"]
    assert all(row[1] == "-3" for row in rows[1:])  # numbers stay numbers
    for cell in ("'\r=1+1", "'\n-2"):  # quoted in the file itself, so CR-splitting readers keep them whole
        assert f'"{cell}"' in text


def test_sql_neutralises_a_cell_as_python_does():
    """The FOCUS CSV export neutralises its text in DuckDB (neutralised_sql, one regular expression
    with neutralise_cell): each cell of HOSTILE, and blanks before a prefix or without one, alike."""
    import duckdb

    from service.core.output import neutralise_cell, neutralised_sql
    cells = [*HOSTILE, " \t\r\n@x", " x", "\nx", "x=1", "", "é-", " \0"]
    for cell in cells:
        [(sql,)] = duckdb.execute(f"SELECT {neutralised_sql('$1')}", [cell]).fetchall()
        assert sql == neutralise_cell(cell), repr(cell)
    assert duckdb.execute(f"SELECT {neutralised_sql('NULL::VARCHAR')}").fetchall() == [(None,)]


def test_a_csv_writes_true_and_false_as_the_json_does_not_pythons_spelling():
    """`status`'s `final`, `runs --run`'s `shared` and `restart` came out `True`/`False` (a bool
    is an int to Python); a reader of the CSV and of the JSON should meet one spelling."""
    text = to_csv([{"final": True, "restart": False, "rows": 1, "none": None}], ["final", "restart", "rows", "none"])
    assert text == "final,restart,rows,none\ntrue,false,1,\n"


def test_62_attribute_csv_quotes_a_tag_value_with_a_bare_cr(tmp_path):
    import yaml
    from click.testing import CliRunner

    from service.cli.main import cli
    from tests.attribution_helpers import declared_sources, line, make_lake

    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "10", tags={"team": "\r=1+1"})])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake)}))
    result = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--since", "2026-11-01",
                                      "--until", "2026-12-01", "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert "\"'\r=1+1\",USD,10" in result.output


def test_34_a_tag_value_with_a_line_feed_cannot_forge_a_line_in_a_closest_values_warning(tmp_path):
    """`attribute --where` and `estimate --register` list the lake's values closest to one that
    matched nothing: a value holding a line feed was printed raw, its rest a line of its own."""
    import yaml
    from click.testing import CliRunner

    from service.cli.main import cli
    from tests.attribution_helpers import declared_sources, line, make_lake

    forged = "error: the lake is damaged, run rm -rf"
    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "10", tags={"project": f"llama\n{forged}"})])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake)}))
    where = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--since", "2026-11-01", "--until",
                                     "2026-12-01", "--where", "project=llama", "--format", "csv"])
    register = CliRunner().invoke(cli, ["--config", str(path), "estimate", "--params", "7B", "--tokens", "2T",
                                        "--gpu", "H100", "--gpus", "8", "--mfu", "0.4", "--price-per-gpu-hour", "4",
                                        "--register", "p", "--project", "llama", "--start", "2026-11-01"])
    for result in (where, register):
        assert result.exit_code == 0, result.output
        [warning] = [text for text in result.output.splitlines() if "llama" in text and text.startswith("warning:")]
        assert f"llama\\n{forged}" in warning, result.output
        assert not [text for text in result.output.splitlines() if text.startswith(forged)], result.output


KILLED_WRITER = """
import sys, time
from pathlib import Path
import service.core.publish as write
import os
real_replace = os.replace
def stall(*args):  # staged, not yet in place: wait to be killed
    print("staged", flush=True); time.sleep(60)
write.os.replace = stall
write.write_local({"report.html": b"x" * 1000, "a.csv": b"a\\n"}, Path(sys.argv[1]))
"""


def test_62_a_report_killed_mid_write_leaves_no_staging_folder_after_the_next_run(tmp_path):
    folder = tmp_path / "reports" / "2026-11-29"
    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(folder)], stdout=subprocess.PIPE,
                              cwd=os.getcwd(), text=True)
    assert writer.stdout.readline().strip() == "staged"
    staged = [p.name for p in folder.parent.iterdir() if p.name.startswith(".staging-")]
    assert len(staged) == 1
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    assert (folder.parent / staged[0]).exists()  # kill -9 leaves it behind...
    write_local({"report.html": b"<html>", "a.csv": b"a\n"}, folder)
    assert sorted(p.name for p in folder.parent.iterdir()) == ["2026-11-29"]  # ...the next report removes it
    assert (folder / "report.html").read_bytes() == b"<html>"


def test_62_a_live_writers_staging_folder_is_left_alone(tmp_path):
    parent = tmp_path / "reports"
    live = parent / f".staging-2026-11-28-{os.getpid()}-{'a' * 32}"
    live.mkdir(parents=True)
    write_local({"report.html": b"<html>"}, parent / "2026-11-29")
    assert live.exists()


def test_53_a_report_on_a_full_disk_says_disk_full_naming_the_file_it_could_not_write(tmp_path, monkeypatch):
    """Was 'cannot write the report: No space left on device — check the --out folder's
    permissions and free space', against the folder, unlike every other command's 'disk full'."""
    from service.core import publish
    from service.core.errors import ResourceError

    folder = tmp_path / "reports" / "2026-11-29"
    monkeypatch.setattr(publish, "open", lambda path, mode: open("/dev/full", mode), raising=False)
    with pytest.raises(ResourceError) as refused:
        write_local({"report.html": b"<html>", "a.csv": b"a\n"}, folder)
    assert str(refused.value).startswith(f"{folder / 'report.html'}: disk full: [Errno 28] No space left on device "
                                         "— free space on the --out folder's file system"), refused.value
    assert refused.value.exit_code == 3 and not folder.parent.exists()  # no staging folder, nor the folders it made


def test_34_terminal_escapes_in_lake_values_are_shown_not_run(capsys):
    """A tag value is anyone's text: in a table, a warning or an error it must not clear the
    screen, recolour it or retitle the window (ESC, OSC, BEL, C1 controls)."""
    import click

    from service.cli.output import print_table
    from service.core.errors import DataError
    from service.core.suggest import suggestion

    hostile = "\x1b[2J\x1b[31mPWNED\x1b]0;title\x07\x9b1m"
    print_table([{"team": hostile, "cost": "1"}], ["team", "cost"])
    click.echo(suggestion("x", [hostile], "team values"), err=True)
    out = capsys.readouterr()
    for text in (out.out, out.err):
        assert "PWNED" in text and not any(c in text for c in "\x1b\x07\x9b"), repr(text)
    assert "\\x1b[2J" in out.out
    from click.testing import CliRunner

    from service.cli.main import SpendlakeGroup

    @click.command()
    def fails():
        raise DataError(f"job {hostile} is listed twice")

    result = CliRunner().invoke(SpendlakeGroup("t", commands={"fails": fails}), ["fails"])
    assert result.exit_code == 3 and "PWNED" in result.output and "\x1b" not in result.output, repr(result.output)


def test_62_a_bidi_override_in_a_tag_value_cannot_reorder_a_table_row_or_a_warning(capsys):
    r"""An unclosed `\u202e` (right-to-left override) would show the rest of its line backwards."""
    import click

    from service.cli.output import print_table
    from service.core.suggest import suggestion

    hostile = "\u202eevil\u2066"
    print_table([{"team": hostile, "cost": "7.09"}], ["team", "cost"])
    click.echo(suggestion("x", [hostile], "team values"), err=True)
    out = capsys.readouterr()
    for text in (out.out, out.err):
        assert "\\u202eevil\\u2066" in text and "\u202e" not in text and "\u2066" not in text, repr(text)


def test_34_an_ingest_warning_naming_ids_from_the_file_prints_their_escapes(tmp_path):
    import yaml
    from click.testing import CliRunner

    from conftest import SAMPLES
    from service.cli.main import cli

    rows = list(csv.reader((SAMPLES / "aws" / "legacy_cur_csv_anonymous_sample.csv").open(encoding="utf-8")))
    rows[1][rows[0].index("identity/LineItemId")] = "id\x1b]0;owned\x07"
    export = tmp_path / "export"
    export.mkdir()
    with (export / "cur.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([rows[0], rows[1], rows[1], *rows[2:5]])
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"),
                                      "sources": [{"name": "cur", "kind": "aws-cur", "location": str(export)}]}))
    result = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
    assert result.exit_code == 0, result.output
    assert "id\\x1b]0;owned\\x07" in result.output and "\x1b" not in result.output, repr(result.output)


def test_34_findings_ack_shows_an_s3_keys_escapes_not_runs_them(tmp_path):
    """A checkpoint prefix is whatever a job named its files: S3 keys may hold any character."""
    from datetime import datetime, timezone
    from decimal import Decimal

    import yaml
    from click.testing import CliRunner

    from rules.base import Finding
    from service.cli.main import cli
    from service.core.lake import Lake
    from service.findings.store import store_findings

    seen = datetime(2026, 11, 28, tzinfo=timezone.utc)
    lake = Lake(tmp_path / "lake")
    store_findings(lake, [Finding(id="f1", rule="checkpoint-sprawl", severity="warning", category="waste",
                                  resource_id="s3://ckpt/run\x1b]0;owned\x07/", team="nlp", summary="40 checkpoints",
                                  impact_usd=Decimal("3.10"), monthly_waste_usd=Decimal("3.10"), first_seen=seen,
                                  last_seen=seen)])
    (tmp_path / "spendlake.yaml").write_text(yaml.safe_dump({"lake": str(lake.root)}))
    acked = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "findings", "ack", "f1",
                                     "--reason", "planned\x1b[2J"])
    assert acked.exit_code == 0, acked.output
    assert "acknowledged f1 (checkpoint-sprawl, s3://ckpt/run\\x1b]0;owned\\x07/): planned\\x1b[2J" in acked.output
    assert "\x1b" not in acked.output and "\x07" not in acked.output


TERMINAL_HIJACKS = "\x1b]0;owned\x07\x7f\x85\x9b31m\u202eevil\u2066"
RUN_BY_A_TERMINAL = "\x1b\x07\x7f\x85\x9b\u202e\u2066"


def test_json_escapes_del_c1_and_bidi_controls_and_reads_back_the_same_strings(capsys):
    """`cat out.json` must not run or reorder anything; json.loads gives back what was written."""
    import json

    from service.cli.output import emit

    value = f"a\\{TERMINAL_HIJACKS}\u00e9"
    emit([{"team": value, "cost": Decimal("0.1234567890123456789")}], ["team", "cost"], "json")
    text = capsys.readouterr().out
    assert not any(c in text for c in RUN_BY_A_TERMINAL), repr(text)
    assert "\\u007f\\u0085\\u009b31m\\u202eevil\\u2066" in text and "\u00e9" in text  # the rest stays readable
    assert json.loads(text) == [{"team": value, "cost": "0.1234567890123456789"}]


def test_csv_is_exact_when_piped_and_shows_escapes_on_a_terminal(capsys, monkeypatch):
    from service.cli import output

    rows, columns = [{"team": f"nlp{TERMINAL_HIJACKS}", "cost": Decimal("0.1234567890123456789")}], ["team", "cost"]
    output.emit(rows, columns, "csv")
    piped = capsys.readouterr().out
    assert list(csv.reader(io.StringIO(piped)))[1] == [f"nlp{TERMINAL_HIJACKS}", "0.1234567890123456789"]
    monkeypatch.setattr(output, "is_tty", lambda: True)
    output.emit(rows, columns, "csv")
    shown = capsys.readouterr().out
    assert shown == "team,cost\nnlp\\x1b]0;owned\\x07\\x7f\\x85\\x9b31m\\u202eevil\\u2066,0.1234567890123456789\n"


def test_table_headers_and_left_out_column_names_are_escaped_like_cells(capsys):
    """A tag key used in --by is a column: `[red]` is text, an ESC is shown, a line feed stays on its line."""
    from service.cli.output import print_table

    key = "team[red]\x1b[2J"
    wide = "x" * 70
    print_table([{key: "nlp", "cost": "1", "left\nout\x1b": wide}], [key, "cost", "left\nout\x1b"])
    out = capsys.readouterr()
    assert "team[red]\\x1b[2J" in out.out and "\x1b" not in out.out + out.err, repr(out)
    assert "not shown at 80 columns: left\\nout\\x1b (a wider" in out.err and out.err.count("\n") == 1, repr(out.err)


def test_one_line_warnings_show_a_line_feed_in_a_value_as_an_escape():
    from click.testing import CliRunner

    from service.cli.main import SpendlakeGroup
    from service.core.errors import DataError

    @click.command()
    def fails():
        raise DataError("job a\nerror: forged is listed twice")

    result = CliRunner().invoke(SpendlakeGroup("t", commands={"fails": fails}), ["fails"])
    assert result.output == "error: job a\\nerror: forged is listed twice\n"


def test_the_demos_commitments_line_shows_a_bills_currency_escaped_on_one_line():
    """BillingCurrency is the bill's text: an OSC escape is shown, a line feed cannot forge a line."""
    from service.cli.demo import commitment_line

    total = {"currency": "US\x1b]0;owned\x07D\nerror: forged", "commitment": Decimal("100"), "used": Decimal("80"),
             "unused": Decimal("20"), "unused_pct": Decimal("20.0"), "coverage_pct": Decimal("75.0")}
    line = commitment_line(total)
    assert line.startswith("commitments, last 30 days (US\\x1b]0;owned\\x07D\\nerror: forged): 100.00 committed")
    assert "\x1b" not in line and "\n" not in line


def test_a_report_it_may_not_write_beside_a_read_only_lake_says_to_write_it_elsewhere(tmp_path, monkeypatch):
    """A finance user with read access to the lake runs `report` without --out: the default folder
    (reports/ beside the lake) is not theirs; the error said to check '--out folder' they never gave,
    then to set report.out (the service's key, not set) where `report` was called as the command calls it."""
    from datetime import date

    from servicekit import commit, make_config

    from service.core import publish
    from service.core.errors import SpendlakeError
    from service.core.lake import Lake
    from service.report.write import write_report

    def denied(path, mode):
        raise PermissionError(13, "Permission denied", str(path))

    config = make_config(tmp_path)
    commit(Lake.of(config), "cur", [("2026-11-29 03:00:00", "2026-11-29 04:00:00", "USD", "2", {})])
    monkeypatch.setattr(publish, "open", denied, raising=False)
    with pytest.raises(SpendlakeError) as refused:
        write_report(config, date(2026, 11, 29))  # as service/cli/report.py calls it without --out
    assert str(refused.value).endswith("cannot write the report: Permission denied — check the folder's permissions "
                                       "and free space, or write elsewhere with --out DIR (a lake you may only read: "
                                       "--out a folder of your own)"), refused.value
    assert refused.value.exit_code == 3
