"""A value no cost line carries, none close enough for a typo (a renamed run: r1 and r1-renamed,
difflib 0.33), lists the known values the likeliest first (service.core.suggest.ranked), as README
says a plan's note and `--where`'s warning name the closest values, not all of them alphabetically
(break52c item 5)."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.suggest import ranked
from tests.attribution_helpers import declared_sources, line, make_lake
from tests.test_estimate import SEVEN_B_FLAGS

RENAMED = ["ev1", "eveur", "evghost", "evself", "evx", "r1-renamed", "r2"]


def test_the_known_values_holding_the_word_come_first_then_the_alike_then_the_rest():
    # r1-renamed holds r1; r2 (0.5) and ev1 (0.4) are alike; the others as sorted before
    assert ranked("r1", RENAMED) == ["r1-renamed", "r2", "ev1", "eveur", "evghost", "evself", "evx"]
    assert ranked("R1_v2", ["r1v2-long", "R1-V2", "zz"])[:2] == ["R1-V2", "r1v2-long"]  # separators and case aside
    assert ranked("genomics", ["nlp", "ml_infra"]) == ["ml_infra", "nlp"]  # nothing alike: sorted, as ever


def test_a_plan_on_a_renamed_value_and_a_where_name_the_likeliest_known_values_first(tmp_path):
    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "10", tags={"project": "llm", "experiment": value})
                                for value in RENAMED])
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake)}))

    def invoke(*args):
        result = CliRunner().invoke(cli, ["--config", str(config), *args])
        assert result.exit_code == 0, result.output
        return result

    likeliest = "known experiment values: r1-renamed, r2, ev1, eveur, evghost, evself, evx"
    registered = invoke("estimate", *SEVEN_B_FLAGS, "--register", "pa", "--project", "llm", "--experiment", "r1",
                        "--start", "2026-11-02", "--format", "json")
    assert f"carries experiment 'r1' yet; {likeliest}" in registered.stderr, registered.stderr
    plans = invoke("plans", "--as-of", "2026-11-02", "--format", "json")
    assert [row["status"] for row in json.loads(plans.stdout)] == ["unknown experiment"]
    assert f"no cost line carries experiment 'r1'; {likeliest}" in plans.stderr, plans.stderr
    where = invoke("attribute", "--since", "2026-11-02", "--until", "2026-11-03", "--by", "experiment",
                   "--where", "experiment=r1", "--format", "json")
    assert f"--where experiment=r1 matches nothing in the lake; {likeliest}" in where.stderr, where.stderr
