"""A rollup sums a period's lines by what its dimensions and shared rules read of them before it
decides their values (service/attribution/sql.py `grouped`): it is row for row, type for type,
the rollup computed line by line, whatever the rules match on, inventory tags, shared rules,
credits, tags spelled with spaces or empty, and the dimensions and measures a query reads."""

from __future__ import annotations

import pytest

from service.attribution.needs import Needs, needed_dimensions
from service.attribution.rollup import groups_by_tag_map
from service.attribution.rollup_versions import cost_partitions, inventory_keys, recorded_tag_keys
from service.attribution.sql import MEASURES, attributed_sql, dim_col, how_col, rollup_sql
from service.attribution.statement import Params, Sql
from tests.attribution_helpers import config, line, make_lake

RULES = {
    "dimensions": {"team": {"tags": ["team", "owner"], "rules": [
                       {"match": {"account": "222222222222"}, "value": "finance"},
                       {"match": {"resource_id": "^bucket-"}, "value": "data"}]},
                   "project": {"rules": [{"match": {"team": "finance", "region": "eu-west-1"}, "value": "ledger"}]},
                   "env": {"tags": ["env"], "rules": [{"match": {"usage_type": "^spot"}, "value": "batch"}]}},
    "shared": [{"match": {"service": "AWS Support (Business)"}, "split": "proportional", "by": "team"},
               {"match": {"charge_category": "Tax"}, "split": "even", "by": "project"}],
}


def lines() -> list[dict]:
    return [
        line("2026-11-02 00:00", "6", effective="4", tags={"team": "nlp", "project": "llm"}, resource="i-1"),
        line("2026-11-02 00:00", "2", effective="1", tags={"team": "nlp", "project": "llm"}, resource="i-2"),
        line("2026-11-02 00:00", "1.000000000001", tags={"Team": " NLP ", "env": "prod"}, resource="i-1"),
        line("2026-11-02 00:00", "3", tags={"owner": "vision"}, account="222222222222", region="eu-west-1"),
        line("2026-11-02 00:00", "-0.5", tags={"team": "nlp", "project": "llm"}, resource="i-1"),  # a credit
        line("2026-11-02 01:00", "0.25", service="Amazon S3", resource="bucket-x"),
        line("2026-11-02 01:00", "0.25", service="Amazon S3", resource="bucket-y"),
        line("2026-11-02 01:00", "4", usage_type="spot-usage", resource="i-inv"),
        line("2026-11-02 01:00", "4", usage_type="spot-usage", tags={"team": ""}, resource="i-inv"),
        line("2026-11-03 00:00", "9", end="2026-11-05 00:00", tags={"project": "llm"}),
        line("2026-11-03 00:00", "1", service="AWS Support (Business)", category="Tax"),
        line("2026-11-03 00:00", "7", currency="EUR", tags={"team": "nlp"}),
    ]


def line_by_line(attribution, tag_keys, part, inventory, needs: Needs) -> Sql:
    """The rollup as it was computed before the lines were grouped: each line's values decided."""
    params = Params()
    where = f"source = {params.bind(part.source, 'source')} AND billing_period = {params.bind(part.period, 'period')}"
    lines = attributed_sql(attribution, tag_keys, where, params, inventory, needs=needs)
    keys = ["cp_start", "cp_end", "currency", "shared",
            *(c for name in needed_dimensions(attribution, needs.dims) for c in (dim_col(name), how_col(name)))]
    sums = [f"coalesce(sum({column}), 0) AS {m}" if needs.measures is None or m in needs.measures
            else f"CAST(NULL AS DECIMAL(38,12)) AS {m}" for m, column in MEASURES.items()]
    return Sql(lines.text + f"SELECT {', '.join(keys)}, {', '.join(sums)}, count(*) AS lines FROM attributed "
               f"GROUP BY {', '.join(keys)}", lines.params)


def rows(con, sql) -> tuple[list, list]:
    text = f"SELECT * FROM ({sql.text}) AS r"
    described = con.execute(f"DESCRIBE {text}", sql.params).fetchall()
    return described, sorted(con.execute(text, sql.params).fetchall(), key=repr)


def inventory_team(lake) -> None:
    """i-inv's team from the inventory (resource_tags), joined to its lines by resource id."""
    con = lake.connect()
    lake.commit_snapshot(con, con.sql("SELECT 'arn:aws:ec2:us-east-1:111111111111:instance/i-inv' AS resource_id, "
                                      "'us-east-1' AS region, 'team' AS key, 'infra' AS value"),
                         table="resource_tags", source="tags", key="snapshot_date", value="2026-11-03")
    con.close()


@pytest.mark.parametrize("by_tag_map", [False, True], ids=["by-tag-values", "by-tag-map"])
@pytest.mark.parametrize("inventory", [False, True], ids=["lines", "inventory-tags"])
@pytest.mark.parametrize("needs", [Needs(), Needs(("project",), ("effective",)), Needs(("env",), hows=False)],
                         ids=["stored", "some-dimensions", "no-hows"])
def test_a_rollup_grouped_per_tag_map_is_the_rollup_line_by_line(tmp_path, inventory, needs, by_tag_map):
    lake = make_lake(tmp_path, lines())
    if inventory:
        inventory_team(lake)
    attribution = config(RULES).attribution
    [part] = cost_partitions(lake)
    con = lake.query()
    try:
        keys = inventory_keys(lake, con)
        assert (keys is not None) == inventory
        tag_keys = recorded_tag_keys([part])
        sql = rollup_sql(attribution, tag_keys, part.source, part.period, keys, needs=needs, by_tag_map=by_tag_map)
        assert "grouped_lines AS (" in sql.text  # grouped as read, before any value is decided
        assert (" AS g_0" in sql.text) != by_tag_map  # a tag key's value, read per line
        grouped = rows(con, sql)
        assert grouped == rows(con, line_by_line(attribution, tag_keys, part, keys, needs))
    finally:
        con.close()
    described, grouped_rows = grouped
    assert len(grouped_rows) < len(lines())  # lines of one group were summed
    if inventory and needs.dims is None:
        assert any("inventory-tag:team" in row for row in grouped_rows)


SPELLINGS = ("team", "Team", "user_team", "user:team", "user_Team")  # five keys `team` reads, one a line


@pytest.mark.parametrize(("spellings", "named", "by_map"), [(SPELLINGS, False, True), (SPELLINGS, True, False),
                                                            (SPELLINGS[:1], False, False)],
                         ids=["five-keys-few-maps", "a-name-per-resource", "one-key"])
def test_lines_are_grouped_by_the_whole_tag_map_when_that_is_cheaper(tmp_path, spellings, named, by_map):
    """Grouping by the map spares a lookup per line and tag key read (the bench's 10M-line
    month, 8 keys: its build 2.6 -> 2.0 CPU s); not for a few keys (their lookups cost less),
    nor when a tag on every resource (a Name) makes each line's map its own: grouping by it
    would sum nothing and cost twice the CPU of deciding each line."""
    tags = [{spellings[n % len(spellings)]: "nlp", **({"Name": f"node-{n}"} if named else {})} for n in range(20)]
    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "1", tags=tag) for tag in tags])
    [part] = cost_partitions(lake)
    con = lake.query()
    try:
        assert groups_by_tag_map(con, config({}).attribution, recorded_tag_keys([part]), part, None) == by_map
    finally:
        con.close()
