"""SQL injection through `--by`, `--where`, tag keys or values (RELIABILITY 30): a bill whose
tag keys and values are SQL, a config whose tag keys and rule values are SQL, and hostile
`by`/`where` from the CLI and the HTTP API. Each is refused as unknown (exit 2, HTTP 400) or
bound as a value that matches only itself; the lake's files stay byte for byte."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from urllib.parse import urlencode

import pytest
import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from service.cli.main import cli
from service.core.config import load_config
from service.serve.app import Api
from service.serve.metrics import LakeCollector
from tests.aws_exports import LEGACY_COLUMNS, legacy_csv, line

KEY = "x'); DROP TABLE costs;--"
WINDOW = ["--since", "2026-10-01", "--until", "2026-11-01"]


def digest(lake) -> str:
    """Every file of the lake but the lock and the per-source run state (last success times)."""
    out = hashlib.sha256()
    for file in sorted(lake.rglob("*")):
        if file.is_file() and not file.relative_to(lake).parts[0] in ("_locks", "_state"):
            out.update(str(file.relative_to(lake)).encode() + file.read_bytes())
    return out.hexdigest()


@pytest.fixture
def hostile(tmp_path):
    columns = [*LEGACY_COLUMNS, f"resourceTags/user:{KEY}", 'resourceTags/user:te"am', "resourceTags/user:project"]
    rows = [line(cost="1", team="'; DELETE FROM costs;--", **{f"resourceTags__user:{KEY}": "v1",
                                                               "resourceTags__user:project": "p' OR '1'='1"}),
            line(cost="2", team="nlp", **{'resourceTags__user:te"am': "ignored", "resourceTags__user:project": "llama"})]
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "bill.csv").write_bytes(legacy_csv(rows, columns))
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({
        "lake": str(tmp_path / "lake"),
        "sources": [{"name": "cur", "kind": "aws-cur", "location": str(tmp_path / "exp")}],
        "attribution": {"dimensions": {"team": {"tags": [KEY, 'te"am', "team"], "rules": [
            {"match": {"service": "'; SELECT 1;--", "resource_id": "^i-'\\); DROP TABLE x;--"}, "value": "'); DROP"}]}}},
    }))
    assert CliRunner().invoke(cli, ["--config", str(path), "ingest"]).exit_code == 0
    return path


def attribute(path, *args):
    return CliRunner().invoke(cli, ["--config", str(path), "attribute", *WINDOW, *args])


def test_reliability_30_tag_keys_and_values_are_values_and_hostile_by_or_where_change_nothing(hostile, api_server):
    lake = hostile.parent / "lake"
    before = digest(lake)
    # A tag key that is SQL is a key like any other: the first alias in order holds on line 1.
    result = attribute(hostile, "--by", "team,project", "--format", "json")
    assert result.exit_code == 0, result.output
    assert {(r["team"], r["project"], r["cost"]) for r in json.loads(result.stdout)["rows"]} == {
        ("v1", "p' OR '1'='1", "1.000000000000"), ("ignored", "llama", "2.000000000000")}
    for by in ("team; DROP TABLE costs", "team,project)--", "x'||1", "Tags['user:team']"):
        refused = attribute(hostile, "--by", by)
        assert refused.exit_code == 2 and "unknown dimension" in refused.output, refused.output
    for where, rows in (("project=p' OR '1'='1", [("v1", "1.000000000000")]), ("project=' OR 1=1--", []),
                        ("team=v1'; DELETE FROM costs;--", [])):
        result = attribute(hostile, "--by", "team", "--where", where, "--format", "json")
        assert result.exit_code == 0, result.output
        assert [(r["team"], r["cost"]) for r in json.loads(result.stdout)["rows"]] == rows
    assert attribute(hostile, "--where", "1=1").exit_code == 2

    registry = CollectorRegistry()
    config = load_config(hostile)
    registry.register(LakeCollector(config))
    base = f"http://127.0.0.1:{api_server(Api(config, registry))}/api/v1/attribute?"
    window = {"since": "2026-10-01", "until": "2026-11-01"}
    for query, status in (({"by": "team;DROP TABLE costs"}, 400), ({"by": "Tags['x']"}, 400),
                          ({"by": "team", "where": "1=1"}, 400), ({"by": "team", "top": "1;DROP"}, 400),
                          ({"by": "team", "where": "project=p' OR '1'='1"}, 200)):
        try:
            with urllib.request.urlopen(base + urlencode({**window, **query}), timeout=10) as response:
                code, body = response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            code, body = error.code, json.loads(error.read())
        assert code == status, body
        if status == 200:
            assert [(r["team"], r["cost"]) for r in body["rows"]] == [("v1", "1.000000000000")]
    assert digest(lake) == before
    assert attribute(hostile, "--check").exit_code == 0


def test_reliability_31_a_statement_in_any_value_a_user_gives_runs_nowhere(hostile, api_server):
    """Every user-facing path into a query (each CLI option and API parameter that reaches SQL)
    given a value holding COPY, ATTACH, INSTALL, LOAD and a read of /etc/passwd: each is refused
    (exit 2, HTTP 400) or matches nothing as a value; no file appears, the lake stays byte for byte."""
    lake, escaped = hostile.parent / "lake", hostile.parent / "escaped"
    payload = (f"x'); COPY (SELECT 1) TO '{escaped}.csv'; ATTACH '{escaped}.db' AS a; INSTALL httpfs; "
               "LOAD httpfs; SELECT * FROM read_csv('/etc/passwd'); --")
    before = digest(lake)
    for args in (["attribute", *WINDOW, "--where", f"team={payload}"], ["attribute", *WINDOW, "--by", payload],
                 ["findings", "--team", payload], ["findings", "--rule", payload], ["findings", "--status", payload],
                 ["runs", *WINDOW, "--run", payload], ["runs", *WINDOW, "--state", payload],
                 ["commitments", *WINDOW, "--by", payload], ["rules", "run", "--rule", payload, "--dry-run"]):
        result = CliRunner().invoke(cli, ["--config", str(hostile), *args])
        assert result.exit_code in (0, 2), (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
        assert "root:" not in result.output, args
    registry = CollectorRegistry()
    config = load_config(hostile)
    registry.register(LakeCollector(config))
    base = f"http://127.0.0.1:{api_server(Api(config, registry))}/api/v1/"
    for route, query in (("findings", {"team": payload}), ("findings", {"rule": payload}),
                         ("runs", {"run": payload, "since": "2026-10-01"}), ("plans", {"as_of": payload}),
                         ("attribute", {"since": "2026-10-01", "where": f"team={payload}"})):
        try:
            with urllib.request.urlopen(base + route + "?" + urlencode(query), timeout=10) as response:
                code, body = response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            code, body = error.code, error.read().decode()
        assert code in (200, 400) and "root:" not in body, (route, code, body)
    assert not list(hostile.parent.glob("escaped*"))
    assert digest(lake) == before
