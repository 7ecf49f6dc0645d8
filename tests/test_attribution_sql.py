"""The generated SQL stays portable: sqlglot transpiles it to Spark and Trino with nothing
unsupported, and every named parameter survives (issue 8 runs the same plan on Spark)."""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlglot

from service.attribution.sql import resources_sql, rollup_sql
from service.attribution.statement import transpile
from service.attribution.tag_keys import tag_candidates
from service.attribution.window_sql import spellings_sql, window_sql
from tests.attribution_helpers import config

CONFIG = config({
    "dimensions": {"project": {"tags": ["project", "x'; DROP TABLE costs;--"]},
                   "team": {"tags": ["team", "owner-team"], "rules": [
        {"match": {"resource_id": "^arn:aws:s3:::ckpt-", "project": "llama"}, "value": "pretrain"},
        {"match": {"account": "111122223333", "region": "us-east-1"}, "value": "research"}]}},
    "shared": [{"match": {"charge_category": "Tax"}, "split": "even"},
               {"match": {"service": "AWS Support (Business)"}, "split": "fixed", "weights": {"a": 0.5, "b": 0.5}}],
}).attribution
STATEMENTS = {
    "rollup": rollup_sql(CONFIG, ["Team", "user:team", "owner_team", "x'; DROP TABLE costs;--"], "cur", "2026-11"),
    "window": window_sql("rollups", ["team", "project"], "effective", "week", datetime(2026, 11, 1),
                         datetime(2026, 12, 1), explain=True, per_partition=True),
    "total": window_sql("rollups", ["team"], "billed", "total", None, None, explain=False, per_partition=True),
    "resources": resources_sql(CONFIG, ["Team"], ["i-1", "i-2"]),
    "spellings": spellings_sql("rollups", ["team", "project"]),
}


@pytest.mark.parametrize("dialect", ["spark", "trino"])
@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_generated_sql_transpiles_with_its_parameters(name, dialect):
    sql = STATEMENTS[name]
    out = transpile(sql, dialect)
    used = {p.name for p in sqlglot.parse_one(sql.text, read="duckdb").find_all(sqlglot.exp.Placeholder)}
    assert used == set(sql.params), "every marker is bound and every bound value is used"
    assert "?" not in sql.text, "no positional parameter whose place depends on concatenation"
    if dialect == "spark":  # Spark binds the same names (spark.sql(text, args={name: value}))
        assert {p.name for p in sqlglot.parse_one(out, read="spark").find_all(sqlglot.exp.Placeholder)} == used
    assert "Tags[" not in out  # map access that raises on a missing key would fail on untagged lines
    if name in ("rollup", "resources"):
        assert ("TRY_ELEMENT_AT(Tags, :p" if dialect == "spark" else "ELEMENT_AT(Tags, ") in out


def test_tag_keys_and_config_values_are_parameters_not_sql():
    sql = STATEMENTS["rollup"]
    assert "DROP TABLE" not in sql.text and "x'; DROP TABLE costs;--" in sql.params.values()
    assert "ckpt" not in sql.text and "111122223333" not in sql.text


def test_alias_order_then_exact_spelling_then_byte_order():
    keys = ["owner_team", "TEAM", "team", "Team", "user:team", "project"]
    assert tag_candidates(["team", "owner-team"], keys) == ["team", "TEAM", "Team", "user:team", "owner_team"]
