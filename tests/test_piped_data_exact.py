"""A piped CSV or JSON holds the lake's value exactly (break52b, item 3): click.echo strips ANSI
sequences where stdout is no terminal, so `attribute --format csv | …` wrote the tag value
`ctl\\x01\\x07\\x1b[31mred\\x1b[0m` as `ctl\\x01\\x07red`. Only a formula's leading quote is added."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import yaml

from service.cli import output
from tests.attribution_helpers import declared_sources, line, make_lake

HOSTILE = "ctl\x01\x07\x1b[31mred\x1b[0m\tTAB"


def test_emit_writes_a_csv_cells_ansi_sequence_when_piped(capsys):
    output.emit([{"team": HOSTILE, "cost": "1"}, {"team": "=1+1", "cost": "2"}], ["team", "cost"], "csv")
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[1:] == [[HOSTILE, "1"], ["'=1+1", "2"]]


def test_attribute_piped_as_csv_and_json_carries_the_tag_value_whole(tmp_path):
    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "1004", tags={"team": HOSTILE})])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake)}))
    base = [sys.executable, "-m", "service", "--config", str(path), "attribute", "--since", "2026-11-01",
            "--until", "2026-11-03", "--by", "team", "--format"]
    piped = subprocess.run([*base, "csv"], capture_output=True, text=True, check=True).stdout
    assert list(csv.DictReader(io.StringIO(piped)))[0]["team"] == HOSTILE, repr(piped)
    answer = json.loads(subprocess.run([*base, "json"], capture_output=True, text=True, check=True).stdout)
    assert answer["rows"][0]["team"] == HOSTILE
