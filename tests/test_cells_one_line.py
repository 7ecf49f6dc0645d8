"""A line feed in a value stays on its line in a table (break52b, item 2): team `line1\\nline2`
printed as `│ line1 │ 1,007.00 │` and then `│ line2 │ │`, so a tag value could put any text on a
line of its own. printable() shows it as `\\n`, as it does a CR; a cell of several lines (a
footer's total in each currency, a wrapped ARN) is a Lines, each line printable."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from service.cli.main import cli
from service.cli.output import Lines, print_table, wrapped_id
from service.core.output import one_line, printable, printable_lines
from tests.attribution_helpers import declared_sources, line, make_lake


@pytest.mark.parametrize("control", ["\n", "\r", "\x0b", "\x0c", "\x1b", "\x85"])
def test_printable_escapes_every_control_one_line_does(control):
    assert printable(f"a{control}b") == one_line(f"a{control}b") == f"a{control!r}b".replace("'", "")
    assert "\n" not in printable(f"a{control}b")


def test_printable_lines_keeps_the_line_breaks_of_a_text_of_several_lines():
    assert printable_lines("team,cost\nnlp\x1b[2J,1\n") == "team,cost\nnlp\\x1b[2J,1\n"


def test_a_tag_value_with_a_line_feed_is_one_row_of_attributes_table(tmp_path):
    import yaml

    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "1007", tags={"team": "line1\nline2"}),
                                line("2026-11-02 00:00", "5", tags={"team": "nlp"})])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake)}))
    result = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--since", "2026-11-01",
                                      "--until", "2026-11-03", "--by", "team", "--format", "table"])
    assert result.exit_code == 0, result.output
    [row] = [text for text in result.output.splitlines() if "line1" in text]
    assert "line1\\nline2" in row and "1,007.00" in row, result.output
    assert not any(text.lstrip("│ ").startswith("line2") for text in result.output.splitlines()), result.output


def test_a_cell_of_several_lines_shows_each_line_printable(capsys):
    """A footer's totals in two currencies stay one under the other, a run name's line feed
    inside one of them is an escape, and a long ARN still wraps after its `:` and `/`."""
    arn = "arn:aws:savingsplans::123456789012:savingsplan/0123456789abcdef-0123456789abcdef"
    print_table([{"run": wrapped_id(arn), "cost": "1"}], ["run", "cost"],
                footer={"run": Lines(["total a\nforged", "total b"]), "cost": Lines(["1.00", "2.00"])})
    out = capsys.readouterr().out.splitlines()
    assert any("total a\\nforged" in text and "1.00" in text for text in out), out
    assert any("total b" in text and "2.00" in text for text in out), out
    assert any(text.startswith("│ arn:aws:savingsplans::123456789012:") for text in out), out
    assert any("savingsplan/" in text and "arn:" not in text for text in out), out
