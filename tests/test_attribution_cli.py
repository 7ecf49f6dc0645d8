"""`spendlake attribute`: the JSON contract, formats, bad input and injection attempts."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from decimal import Decimal
from urllib.parse import parse_qs

import pytest
import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from service.cli.main import cli
from service.core.config import load_config
from service.serve.app import Api
from tests.attribution_helpers import declared_sources, line, make_lake

LINES = [
    line("2026-11-02 00:00", "10", tags={"team": "nlp", "project": "llama"}),
    line("2026-11-02 05:00", "-3", tags={"team": "refunds"}, category="Credit"),
    line("2026-11-02 01:00", "4", tags={"team": "=cmd|calc", "project": "llama"}),
    line("2026-11-02 02:00", "1.5", tags={"team": "x' OR 1=1--"}),
    line("2026-11-02 03:00", "2", currency="EUR", tags={"team": "nlp"}),
    line("2026-11-02 00:00", "1", category="Tax"),
]
ATTRIBUTION = {"shared": [{"match": {"charge_category": "Tax"}, "split": "fixed", "weights": {"nlp": 1}}]}


@pytest.fixture
def setup(tmp_path):
    lake = make_lake(tmp_path, LINES)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": ATTRIBUTION,
                                    "sources": declared_sources(lake)}))
    return lake, path


def run(path, *args):
    return CliRunner().invoke(cli, ["--config", str(path), "attribute", *args])


def lake_digest(lake) -> str:
    digest = hashlib.sha256()
    for file in sorted((lake.root / "costs").rglob("*")):
        if file.is_file():
            digest.update(file.name.encode() + file.read_bytes())
    return digest.hexdigest()


def test_json_contract(setup):
    _, path = setup
    result = run(path, "--since", "2026-11-01", "--until", "2026-12-01", "--by", "team,project", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data) == {"since", "until", "cost", "by", "rows", "totals", "data_through", "sources", "notes"}
    assert data["notes"] == ["the window's last 692.0 h have no data yet (the data runs through 2026-11-02T04:00:00Z)"]
    assert data["since"] == "2026-11-01T00:00:00Z" and data["until"] == "2026-12-01T00:00:00Z"
    # the end of the latest usage charge period (the credit and tax lines do not count)
    assert data["data_through"] == "2026-11-02T04:00:00Z"
    assert data["sources"] == [{"source": "cur", "data_through": "2026-11-02T04:00:00Z"}]
    assert data["cost"] == "billed" and data["by"] == ["team", "project"]
    # the shared tax line keeps its own (default) project
    assert {"team": "nlp", "project": "llama", "currency": "USD", "cost": "10.000000000000"} in data["rows"]
    assert {"team": "nlp", "project": "unallocated", "currency": "USD", "cost": "1.000000000000"} in data["rows"]
    assert all(set(row) == {"team", "project", "currency", "cost"} for row in data["rows"])
    assert data["totals"] == [{"currency": "EUR", "cost": "2.000000000000"},
                              {"currency": "USD", "cost": "13.500000000000"}]
    day = json.loads(run(path, "--since", "2026-11-01", "--until", "2026-12-01", "--granularity", "day",
                         "--format", "json").output)
    assert {row["period"] for row in day["rows"]} == {"2026-11-02"}


def test_csv_neutralises_formula_cells_and_table_has_totals(setup):
    _, path = setup
    result = run(path, "--since", "2026-11-01", "--until", "2026-12-01", "--format", "csv")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert "'=cmd|calc,USD,4.000000000000" in lines
    assert "refunds,USD,-3.000000000000" in lines  # a negative cost stays a number
    table = run(path, "--since", "2026-11-01", "--until", "2026-12-01", "--format", "table")
    assert "total" in table.output and "13.50" in table.output and "81.5%" in table.output


def test_where_top_and_explain(setup):
    _, path = setup
    data = json.loads(run(path, "--since", "2026-11-01", "--until", "2026-12-01", "--where", "team=NLP",
                          "--where", "project=llama", "--format", "json").output)
    assert data["rows"] == [{"team": "nlp", "currency": "USD", "cost": "10.000000000000"}]
    data = json.loads(run(path, "--since", "2026-11-01", "--until", "2026-12-01", "--top", "1",
                          "--format", "json").output)
    assert {(r["team"], r["cost"]) for r in data["rows"] if r["currency"] == "USD"} == {
        ("nlp", "11.000000000000"), ("other", "2.500000000000")}
    data = json.loads(run(path, "--since", "2026-11-01", "--until", "2026-12-01", "--explain",
                          "--format", "json").output)
    nlp = next(r for r in data["rows"] if r["team"] == "nlp" and r["currency"] == "USD")
    assert [(e["how"], e["cost"]) for e in nlp["explain"]] == [
        ("tag:team", "10.000000000000"), ("shared:0 (charge_category=Tax; fixed by team)", "1.000000000000")]


def test_explain_spells_each_placement_kind_colon_what_alike_in_the_table_csv_json_and_the_api(tmp_path):
    """--explain said `tag team`, `rule 0 (…)` and `shared 0 (…)` beside `inventory-tag:Team`,
    `job:<id>` and `idle:<cluster>`: one spelling, `<kind>:<what>`, wherever the answer is read."""
    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "10", tags={"team": "nlp"}),
                                line("2026-11-02 01:00", "4", account="222222222222"),
                                line("2026-11-02 02:00", "1", category="Tax"),
                                line("2026-11-02 03:00", "2", service="AWS Support (Business)")])
    path = tmp_path / "spendlake.yaml"
    attribution = {"dimensions": {"team": {"rules": [{"match": {"account": "222222222222"}, "value": "infra"}]},
                                  "project": {}},
                   "shared": [{"match": {"charge_category": "Tax"}, "split": "proportional", "by": "team"},
                              {"match": {"service": "AWS Support (Business)"}, "split": "proportional",
                               "by": "project"}]}
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake),
                                    "attribution": attribution}))
    window = ("--since", "2026-11-01", "--until", "2026-12-01", "--explain", "--by")
    data = json.loads(run(path, *window, "team,project", "--format", "json").output)
    hows = sorted({part["how"] for row in data["rows"] for part in row["explain"]})
    assert hows == ["default", "rule:0 (account=222222222222)", "shared:0 (charge_category=Tax; proportional by team)",
                    "shared:1 (service=AWS Support (Business); no direct spend to split by, kept on the default)",
                    "tag:team"]
    csv_hows = sorted({part["how"] for row in csv.DictReader(io.StringIO(run(path, *window, "team,project",
                                                                             "--format", "csv").stdout))
                       for part in json.loads(row["explain"])})
    assert csv_hows == hows
    table = run(path, *window, "team,project", "--format", "table").output
    assert all(how[:40] in table for how in hows), table
    config = load_config(path)
    response = Api(config, CollectorRegistry()).handle(
        "/api/v1/attribute", parse_qs("since=2026-11-01&until=2026-12-01&explain=true&by=team,project"), None)
    assert sorted({part["how"] for row in json.loads(response.body)["rows"] for part in row["explain"]}) == hows


@pytest.mark.parametrize("args, message", [
    (["--since", "7d", "--by", "teams"], "valid dimensions: team, project, experiment"),
    (["--since", "7d", "--where", "squad=nlp"], "valid dimensions: team, project, experiment"),
    (["--since", "7d", "--by", 'team"; DROP TABLE x;--'], "valid dimensions"),
    (["--since", "last tuesday"], "e.g. 24h, 7d"),
    (["--since", "7d", "--where", "team"], "DIMENSION=VALUE"),
    # an operator the filter does not have is named as such, not as an unknown dimension `team!`
    (["--since", "7d", "--where", "team!=nlp"], "cannot read 'team!=nlp': a filter keeps the rows equal to a value"),
    (["--since", "7d", "--where", "team>=a"], "use DIMENSION=VALUE, repeated for several values of one dimension"),
    (["--since", "2026-11-02", "--until", "2026-11-01"], "the window is empty"),
    (["--since", "7d", "--compare", "--granularity", "day"], "--compare needs --granularity total"),
    ([], "--since: the window needs a start"),
])
def test_bad_input_exits_2(setup, args, message):
    _, path = setup
    result = run(path, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output


@pytest.mark.parametrize("value", ['team"; DROP TABLE x;--', "x' OR 1=1--", "nlp' OR '1'='1"])
def test_injection_through_where_changes_nothing(setup, value):
    lake, path = setup
    before = lake_digest(lake)
    result = run(path, "--since", "2026-11-01", "--until", "2026-12-01", "--where", f"team={value}",
                 "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]  # stderr warns when the value matches nothing
    # Only the line whose team really is that string matches; nothing else leaks through.
    assert rows == ([{"team": "x' OR 1=1--", "currency": "USD", "cost": "1.500000000000"}]
                    if value == "x' OR 1=1--" else [])
    assert lake_digest(lake) == before
    assert run(path, "--check", "--format", "json").exit_code == 0


def test_check_passes_and_reports_every_period(setup):
    _, path = setup
    result = run(path, "--check", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {(r["currency"], r["cost"]) for r in rows} == {(c, m) for c in ("USD", "EUR")
                                                          for m in ("billed", "effective", "list")}
    assert all(r["ok"] and Decimal(r["difference"]) == 0 for r in rows)


def test_check_fails_with_the_difference(setup, monkeypatch):
    import service.attribution.compute as attribution

    _, path = setup
    real = attribution.split_exactly

    def leaky(amount, weights):  # a split that loses a cent
        parts = real(amount, weights)
        first = next(iter(parts))
        parts[first] -= Decimal("0.01")
        return parts

    monkeypatch.setattr(attribution, "split_exactly", leaky)
    result = run(path, "--check", "--format", "json")
    assert result.exit_code == 3
    assert "cur 2026-11 USD billed: -0.01" in result.output


def test_empty_lake_says_so(tmp_path):
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake")}))
    result = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--since", "7d", "--format", "table"])
    assert result.exit_code == 0 and "is empty" in result.output
    result = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--since", "7d", "--format", "json"])
    assert result.exit_code == 0 and '"rows": []' in result.output


def test_config_errors_carry_dotted_paths(tmp_path):
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"attribution": {
        "shared": [{"match": {"service": "Support"}, "split": "fixed", "weights": {"a": 0.5, "b": 0.3}}]}}))
    result = CliRunner().invoke(cli, ["--config", str(path), "config", "validate"])
    assert result.exit_code == 2 and "attribution.shared[0].weights: must sum to 1" in result.output


def test_check_on_an_empty_lake_fails_exit_3_as_report_does_and_a_csv_keeps_its_whole_header(tmp_path):
    """Nothing reconciled is no check passed (a config naming the wrong lake would pass a gate
    on `--check`): exit 3 saying the lake is empty and to ingest, as `report` does (break47 #16);
    CSV and JSON still parse as an empty result."""
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": []}))
    said = f"the lake at {tmp_path / 'lake'} is empty: nothing to reconcile — run `spendlake ingest`"
    result = CliRunner().invoke(cli, ["--config", str(config), "attribute", "--check", "--format", "csv"])
    assert result.exit_code == 3 and said in result.stderr, result.output
    assert result.stdout.splitlines() == ["source,billing_period,currency,cost,source_total,attributed_total,"
                                          "difference,rounding,ok"]
    result = CliRunner().invoke(cli, ["--config", str(config), "attribute", "--check", "--format", "json"])
    assert result.exit_code == 3 and said in result.stderr and json.loads(result.stdout) == [], result.output
    report = CliRunner().invoke(cli, ["--config", str(config), "report"])
    assert report.exit_code == 3 and "is empty: no report written" in report.stderr, report.output


def test_check_with_query_options_says_it_reconciles_whole_periods(setup):
    # `attribute --since 7d --check` reconciles every billing period, not the week: said, not implied
    _, path = setup
    plain = run(path, "--check", "--format", "csv")
    assert plain.exit_code == 0 and "warning" not in plain.stderr, plain.output
    windowed = run(path, "--since", "7d", "--where", "team=nlp", "--check", "--format", "csv")
    assert windowed.exit_code == 0 and windowed.stdout == plain.stdout, windowed.output
    assert ("warning: --check reconciles every billing period in whole; --since, --where left out"
            in windowed.stderr), windowed.stderr


def test_a_table_whose_rounded_rows_miss_the_total_says_so_under_it_and_csv_json_stay_exact(tmp_path):
    """EUR 1,000.25 of a team and an untagged -2.125 credit show 1,000.25 and -2.13 (998.12) over a
    total row of 998.13 (998.125 rounded): the table said nothing of the cent; a note under it now
    names both sums, and CSV and JSON keep every decimal as before."""
    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "1000.25", currency="EUR", tags={"team": "nlp"}),
                                line("2026-11-02 01:00", "-2.125", currency="EUR", category="Credit"),
                                line("2026-11-02 00:00", "1.5", tags={"team": "nlp"})])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake)}))
    window = ("--since", "2026-11-01", "--until", "2026-12-01", "--by", "team")
    table = run(path, *window, "--format", "table").output
    note = ("note: the EUR rows, each shown rounded, do not add up to the total row: cost EUR 998.12 against "
            "EUR 998.13 (EUR 998.125 exact); the difference is rounding (--format csv or json keep every decimal)")
    shares = ("note: a share is shown only between 0 and 100% of its total: credits make the total net (EUR 998.13), "
              "so a credit, or a part larger than that net total, is no share of it and shows — (the amount stands).")
    assert [text for text in table.splitlines() if text.startswith("note:")] == [note, shares]  # USD: no note
    assert table.index("998.13") < table.index(note)
    assert "note:" not in run(path, *window, "--format", "csv").stdout
    data = json.loads(run(path, *window, "--format", "json").output)
    assert sum(Decimal(r["cost"]) for r in data["rows"] if r["currency"] == "EUR") == Decimal("998.125")
    compared = run(path, *window, "--compare", "--format", "table").output
    assert "cost EUR 998.12 against EUR 998.13" in compared and "change EUR 998.12 against EUR 998.13" in compared
