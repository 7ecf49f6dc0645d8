"""The API names the server's folders, not their paths: `/api/v1/attribute`'s notes, `/api/v1/plans`'
503 and `/reports`' 404s told any HTTP client where the lake and the reports lie on the server's
disk (tests/test_api_without_a_bill.py, test_plans_cli.py, test_serve_reports.py keep those). A damaged
lake file's 503 and `/readyz`'s reasons said its path too; the service's log keeps the paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.core.config import load_config
from service.serve.unpathed import Unpathed
from tests.attribution_helpers import one_line_config_file
from tests.test_service_http import api_for

TOKEN = "a-token-of-16-characters-at-least"


@pytest.mark.parametrize(("text", "said"), [
    ("the lake at /srv/spend/lake is empty: run `spendlake ingest`", "the lake is empty: run `spendlake ingest`"),
    ("the lake /srv/spend/lake is served for reads only.", "the lake is served for reads only."),
    ("'/srv/spend/lake/costs/source=a/data.parquet' is damaged", "'the lake's costs/source=a/data.parquet' is damaged"),
    ("could not read /srv/spend/lake.", "could not read the lake."),
    ("no report of 2026-11-29 in /srv/spend/reports", "no report of 2026-11-29 in the reports folder"),
    ("/srv/spend/lake2/x and /srv/spend/lake-old are other folders", None),
    ("the reports of spend and the lake's sources", None),
])
def test_a_folder_is_said_by_name_a_file_in_it_by_its_path_inside(text, said):
    unpathed = Unpathed([("/srv/spend/lake", "the lake"), ("/srv/spend/reports", "the reports folder"),
                         ("reports", "the reports folder")])  # a relative folder would match words: left out
    assert unpathed(text) == (said or text)


def test_a_damaged_lake_file_and_the_unreadable_lake_are_named_inside_the_lake(tmp_path, caplog):
    config = load_config(one_line_config_file(tmp_path))
    [part] = (tmp_path / "lake").rglob("costs/**/*.parquet")
    part.write_bytes(part.read_bytes()[:-40])  # cut short
    api = api_for(config, token=TOKEN)
    answer = api.handle("/api/v1/attribute", {"since": ["2026-11-01"], "until": ["2026-11-05"]}, f"Bearer {TOKEN}")
    error = json.loads(answer.body)["error"]
    assert answer.status == 503 and error["where"] == f"the lake's {part.relative_to(tmp_path / 'lake')}", error
    assert "is truncated" in error["message"] and str(tmp_path) not in answer.body.decode()
    assert f"{part}: cost partition source=cur/billing_period=2026-11 is truncated" in caplog.text
    ready = api.handle("/readyz", {}, f"Bearer {TOKEN}")
    [reason] = json.loads(ready.body)["reasons"]
    assert ready.status == 503 and reason.startswith("the lake is not readable: the lake's costs/"), reason
    assert str(tmp_path) not in ready.body.decode()


def test_a_lake_named_through_a_link_is_named_as_the_lake_too(tmp_path):
    """The lake names itself resolved; a config may name it through a link: both are the lake."""
    config = load_config(one_line_config_file(tmp_path))
    (tmp_path / "via").symlink_to(tmp_path)
    unpathed = Unpathed.of(config.model_copy(update={"lake": tmp_path / "via" / "lake"}), Path(config.lake).resolve())
    assert unpathed(f"the lake at {tmp_path / 'via' / 'lake'} is empty") == "the lake is empty"
    assert unpathed(f"{tmp_path / 'lake' / '_locks'} is held") == "the lake's _locks is held"
    assert unpathed(f"no reports yet: {tmp_path / 'reports'} does not exist") == \
        "no reports yet: the reports folder does not exist"


def test_a_sources_local_location_is_said_by_its_name_over_http_and_an_s3_one_as_it_is(tmp_path):
    """/api/v1/status' `last_error` of a source said its local location (`/srv/exports/focus: no such file
    or directory`, a file of it) to any holder of the token; now `source bill's location`. An s3:// location is
    no path of the server's: it is said as it is (as is a path ending in a served folder's: `s3://b/<lake>`)."""
    from click.testing import CliRunner
    import yaml

    from service.cli.main import cli

    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "tags.json").write_text("not json")
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "bill", "kind": "focus", "location": str(tmp_path / "exports" / "focus")},
        {"name": "cloud", "kind": "focus", "location": "s3://bills/focus"}], "inventory": [
        {"name": "tags", "kind": "aws-tags", "path": str(tmp_path / "inventory")}]}))
    for command in ("ingest", "inventory"):
        assert CliRunner().invoke(cli, ["--config", str(path), command, "--source", "bill" if command == "ingest"
                                        else "tags"]).exit_code == 3
    config = load_config(path)
    answer = api_for(config, token=TOKEN).handle("/api/v1/status", {}, f"Bearer {TOKEN}")
    errors = {row["source"]: row["last_error"] for row in json.loads(answer.body)["sources"] if row.get("last_error")}
    assert errors["bill"].startswith("source bill's location: no such file or directory"), errors
    assert errors["tags"].startswith("source tags's location's tags.json: "), errors
    assert str(tmp_path) not in answer.body.decode(), answer.body
    unpathed = Unpathed.of(config, config.lake)
    said = f"s3://bills/focus/x.csv: access denied; s3://other{tmp_path}/exports/focus/y.csv is another bucket's"
    assert unpathed(said) == said
