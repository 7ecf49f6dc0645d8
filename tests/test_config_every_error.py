"""`config validate` says every error of a sources or inventory list in one round (break52b,
item 6): an entry of an unknown kind (`kind: fokus`) was said for its kind alone, its name `F_1`
unchecked, and a name used twice was said only once every entry passed, so the user fixed one
round and met the next (as budgets were, net49)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from service.cli.main import cli


def validate(tmp_path, config: dict):
    path = tmp_path / "spendlake.yaml"
    path.write_text(json.dumps({"lake": str(tmp_path / "lake"), **config}))
    return CliRunner().invoke(cli, ["--config", str(path), "config", "validate"])


def test_an_unknown_kinds_entry_has_its_name_checked_and_a_name_used_twice_is_said(tmp_path):
    result = validate(tmp_path, {"sources": [{"name": "F_1", "kind": "fokus", "location": str(tmp_path / "a")},
                                             {"name": "F_1", "kind": "focus"}]})
    assert result.exit_code == 2, result.output
    for said in ("sources[0].kind: no billing connector kind 'fokus' is installed",
                 "sources[0].name: must be lowercase letters, digits and hyphens, e.g. cur-main, not 'F_1'",
                 "sources[1].name: source name 'F_1' is used twice; names must be unique",
                 "sources[1].location: is required but missing"):
        assert said in result.output, result.output
    assert "report_name" not in result.output  # no key of the kind meant is refused for it


@pytest.mark.parametrize("entry, said", [
    ({"name": "Tags", "kind": "aws-tagz"}, "inventory[0].name: must be lowercase letters"),
    ({"name": "Tags", "kind": "focus", "location": "x"}, "inventory[0].name: must be lowercase letters"),
])
def test_an_inventory_entry_of_an_unknown_or_wrong_kind_has_its_name_checked(tmp_path, entry, said):
    result = validate(tmp_path, {"inventory": [entry, {"name": "t", "kind": "aws-tags"},
                                               {"name": "t", "kind": "aws-tags"}]})
    assert result.exit_code == 2, result.output
    assert "inventory[0].kind: " in result.output and said in result.output, result.output
    assert "inventory[2].name: inventory source name 't' is used twice; names must be unique" in result.output
    assert "location: kind" not in result.output  # focus's key under an inventory kind: the kind said it


def test_a_name_used_twice_by_valid_entries_is_still_refused_at_its_entry(tmp_path):
    folders = [tmp_path / "a", tmp_path / "b"]
    result = validate(tmp_path, {"sources": [{"name": "cur", "kind": "focus", "location": str(folders[0])},
                                             {"name": "cur", "kind": "focus", "location": str(folders[1])}]})
    assert result.exit_code == 2, result.output
    assert "sources[1].name: source name 'cur' is used twice; names must be unique" in result.output
